package limiter

import "time"

// Quota is a limiter's policy and state as a client can be told them, for
// example in the HTTP RateLimit-Policy and RateLimit header fields: at most
// Limit permits per Window, of which Remaining can be granted now, and all
// Limit again after Reset if nothing more is taken.
//
// A token bucket reports Limit = Burst and Window = the time the bucket takes
// to refill from empty; a fixed, sliding or log window its Limit and Window;
// a pacer one permit per interval between grants; a concurrency limiter its
// Limit with a zero Window (its permits come back on release, not with time)
// and a zero Reset. The zero Quota means the limiter could not say.
type Quota struct {
	// Limit is the most permits the policy grants per Window.
	Limit int64
	// Window is the policy's time window; 0 for a concurrency limiter.
	Window time.Duration
	// Remaining is the permits TryAcquire could be granted now: 0 while
	// callers wait in Acquire, since TryAcquire does not jump the queue.
	Remaining int64
	// Reset is how long until Remaining is back to Limit if nothing more is
	// granted; 0 when it is already, or when only releases bring permits
	// back (a concurrency limiter).
	Reset time.Duration
}

// Quoter is implemented by limiters that can report their Quota: every
// limiter in this package, a key's limiter from Keyed.For and
// KeyedTokenBucket.For, a Chain (the quota of its member with the fewest
// permits remaining), and the limiters of package redislimit.
type Quoter interface {
	Quota() Quota
}

// QuotaAppender is implemented by limiters that enforce several policies
// at once, a Chain among them: AppendQuotas appends the Quota of each
// policy, in order, to dst and returns the extended slice.
type QuotaAppender interface {
	AppendQuotas(dst []Quota) []Quota
}

// QuotaOf returns lim's Quota, or the zero Quota and false when lim does not
// implement Quoter (or reports the zero Quota).
func QuotaOf(lim Limiter) (Quota, bool) {
	q, ok := lim.(Quoter)
	if !ok {
		return Quota{}, false
	}
	quota := q.Quota()
	return quota, quota != (Quota{})
}

// quota is Quota for every limiter in this package.
func (b *base) quota() Quota {
	b.mu.Lock()
	defer b.mu.Unlock()
	q := b.pol.quota(b.now())
	q.Remaining = max(q.Remaining, 0)
	if b.q.Len() > 0 {
		q.Remaining = 0
	}
	q.Reset = max(q.Reset, 0)
	return q
}

func (g *gcra) quota(now int64) Quota {
	c := g.cfg.Load()
	tat, ok := g.load()
	var debt int64 // scaled units still owed at now
	if delta := now - c.base; ok && delta <= c.maxDelta {
		debt = max(tat-delta*c.n, 0)
	}
	reset := time.Duration(ceilDiv(debt, c.n))
	if c.pacer {
		// One grant per interval: the interval one permit costs.
		return Quota{Limit: 1, Window: time.Duration(ceilDiv(c.d, c.n)), Remaining: boolInt(debt == 0), Reset: reset}
	}
	window, ok := mulDivCeil(c.burst, c.d, c.n)
	if !ok {
		window = int64(1<<63 - 1)
	}
	return Quota{Limit: c.burst, Window: time.Duration(window), Remaining: (c.tol - debt) / c.d, Reset: reset}
}

func (p *concurrency) quota(int64) Quota {
	return Quota{Limit: p.limit.Load(), Remaining: p.avail.Load()}
}
