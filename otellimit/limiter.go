package otellimit

import (
	"context"
	"time"

	"github.com/rategate/rategate/limiter"
)

// Limiter is a limiter.Limiter that records the decisions of the limiter it
// wraps under a policy; make it with [Metrics.Wrap]. It grants, refuses and
// queues exactly as the wrapped limiter does and returns its errors
// unchanged. It passes Stats, Quota (limiter.Quoter), Foresee
// (limiter.Foreseer) and Close through, and the leases it returns pass
// Release, Report and Settle through to the wrapped limiter's lease.
//
// Wrap the limiter a primitive is given, not a member of a limiter.Chain:
// the chain decides exactly (at one instant, undoing a partial grant) only
// with package limiter's own limiters; a wrapped one is a member from
// outside the package, asked first with TryAcquire. Wrap the chain instead.
type Limiter struct {
	lim   limiter.Limiter
	p     *policy
	src   *source
	count bool // count decisions (not when an HTTP middleware counts them)
}

// Wrap returns lim instrumented under the policy name (DefaultPolicy when
// empty). Its Stats, and its Limit() int or Rate() limiter.Rate method if
// it has one, are read at each collection until [Limiter.Close]; wrap a
// long-lived limiter once, not per call (for a limiter per key, see
// [Metrics.WrapPerKey] and [WrapKeyed]). Wrap panics if lim is nil, as a
// programming error, like limiter.Chain.
func (m *Metrics) Wrap(lim limiter.Limiter, policy string) *Limiter {
	return m.wrap(lim, m.policy(policy, "", false), true)
}

func (m *Metrics) wrap(lim limiter.Limiter, p *policy, count bool) *Limiter {
	if lim == nil {
		panic("otellimit: Wrap of a nil Limiter")
	}
	return &Limiter{lim: lim, p: p, src: p.addSource(lim), count: count}
}

// TryAcquire asks the wrapped limiter and counts its decision.
func (l *Limiter) TryAcquire(n int) limiter.Lease {
	return tryAcquire(l.lim, l.p, l.count, n)
}

// Acquire asks the wrapped limiter, counts its decision and records the
// time it took.
func (l *Limiter) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	return acquire(ctx, l.lim, l.p, l.count, n)
}

// tryAcquire and acquire are generic so that a key of a set (keyOf) is
// passed without being boxed into an interface.
func tryAcquire[L limiter.Limiter](lim L, p *policy, count bool, n int) limiter.Lease {
	lease := lim.TryAcquire(n)
	if lease.Granted() {
		if count {
			p.granted.Add(1)
		}
		return p.lease(lease)
	}
	if count {
		p.refused(lease.Err())
	}
	return lease
}

func acquire[L limiter.Limiter](ctx context.Context, lim L, p *policy, count bool, n int) (limiter.Lease, error) {
	start := time.Now()
	lease, err := lim.Acquire(ctx, n)
	waited := time.Since(start)
	r := Granted
	if err != nil {
		r = p.m.result(err)
	}
	if count {
		p.count(r)
	}
	p.waited(ctx, waited, r)
	if err != nil {
		return lease, err
	}
	return p.lease(lease), nil
}

// Stats returns the wrapped limiter's Stats, or the zero Stats if it has
// none.
func (l *Limiter) Stats() limiter.Stats {
	if s, ok := l.lim.(interface{ Stats() limiter.Stats }); ok {
		return s.Stats()
	}
	return limiter.Stats{}
}

// Quota returns the wrapped limiter's Quota, or the zero Quota if it cannot
// say (see limiter.QuotaOf).
func (l *Limiter) Quota() limiter.Quota {
	q, _ := limiter.QuotaOf(l.lim)
	return q
}

// Foresee returns the wrapped limiter's Foresee, or false if it is not a
// limiter.Foreseer.
func (l *Limiter) Foresee(n int) (time.Duration, bool) {
	if f, ok := l.lim.(limiter.Foreseer); ok {
		return f.Foresee(n)
	}
	return 0, false
}

// Close stops reporting the wrapped limiter's state and closes it, if it
// has a Close method, returning its error.
func (l *Limiter) Close() error {
	l.p.removeSource(l.src)
	if c, ok := l.lim.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// Unwrap returns the wrapped limiter.
func (l *Limiter) Unwrap() limiter.Limiter { return l.lim }

// lease returns the lease to give the caller for a lease lim granted. A
// lease that holds no permits (a rate limiter's: limiter.Lease.Holds is
// false) is returned as it is, so that its Report and Settle reach the
// limiter exactly and nothing is allocated; its outcome is not counted
// here. A lease that holds permits is held by a heldLease, which times it,
// counts it among the leases held, counts its outcome, and passes Release,
// Report and Settle through.
func (p *policy) lease(l limiter.Lease) limiter.Lease {
	if !l.Holds() {
		return l
	}
	if !p.hadLease.Load() {
		p.hadLease.Store(true)
	}
	p.held.Add(1)
	return limiter.NewLease(l.Permits(), &heldLease{inner: l, start: time.Now(), p: p})
}

// heldLease is the Releaser of a wrapped lease that holds permits (or
// reports outcomes, or settles) through its own Releaser.
type heldLease struct {
	inner limiter.Lease
	start time.Time
	p     *policy
}

// ReleasePermits releases the wrapped lease and records how long it was
// held.
func (h *heldLease) ReleasePermits(int) {
	d := time.Since(h.start)
	h.inner.Release()
	h.p.held.Add(-1)
	h.p.m.leaseTime.Record(context.Background(), d.Seconds(), h.p.baseRec...)
}

// ReportOutcome counts o and reports it to the wrapped lease.
func (h *heldLease) ReportOutcome(_ int, o limiter.Outcome, latency time.Duration) {
	h.p.outcome(o)
	h.inner.Report(o, latency)
}

// SettlePermits settles the wrapped lease. The wrapped lease's Release
// then gives back what it holds after settling, whichever copy of the
// outer lease is released.
func (h *heldLease) SettlePermits(_, actual int) {
	h.inner = h.inner.Settle(actual)
}
