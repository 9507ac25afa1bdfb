package limiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Chain returns a Limiter that grants n permits only when every one of ls
// grants n permits at the same instant: all or nothing. A request refused
// by one member gives back what the members before it took (this package's
// limiters refund their permits exactly: a failed chain consumes nothing), and
// the chain's lease releases every member's lease, in reverse order. Each
// member counts its own grant once; the chain adds no statistics of its own.
//
// TryAcquire tries the members in order and stops at the first refusal,
// whose RetryAfter and Err it reports. Acquire waits until all members grant
// at once: it sleeps for the refusing member's RetryAfter, or waits in its
// queue when that is unknown (a concurrency limiter waits for a release), and
// then tries the whole chain again. Callers waiting in a chain's Acquire are
// therefore not served in arrival order: each sleeps and retries on its own,
// and the first to retry after permits come back takes them.
//
// Chain panics if ls is empty or holds a nil Limiter, as a programming error.
func Chain(ls ...Limiter) Limiter {
	if len(ls) == 0 {
		panic("limiter: Chain of no limiters")
	}
	c := &chain{ls: append([]Limiter(nil), ls...), known: true}
	for _, l := range ls {
		if l == nil {
			panic("limiter: Chain of a nil Limiter")
		}
		_, ok := l.(refunder)
		if inner, isChain := l.(*chain); !ok || isChain && !inner.known {
			c.known = false
		}
	}
	return c
}

type chain struct {
	ls []Limiter
	// known: every member is one of this package's limiters, whose leases
	// are rebuilt from the member and the count, so the chain's lease needs
	// no allocation.
	known bool
}

// heldLeases releases the leases of a chain with foreign members.
type heldLeases []Lease

func (h heldLeases) ReleasePermits(int) {
	for i := len(h) - 1; i >= 0; i-- {
		h[i].Release()
	}
}

// ReleasePermits releases n permits to every member, in reverse order.
func (c *chain) ReleasePermits(n int) {
	for i := len(c.ls) - 1; i >= 0; i-- {
		if r, ok := c.ls[i].(Releaser); ok {
			r.ReleasePermits(n)
		}
	}
}

func (c *chain) refund(n int, since time.Time) {
	for i := len(c.ls) - 1; i >= 0; i-- {
		if r, ok := c.ls[i].(refunder); ok {
			r.refund(n, since)
		}
	}
}

// undo gives back the leases held[:k], newest first: held[skip] was taken
// at or after since, the others at or after start.
func (c *chain) undo(held []Lease, k int, start time.Time, skip int, since time.Time) {
	for i := k - 1; i >= 0; i-- {
		if i == skip {
			c.giveBack(i, held[i], since)
		} else if r, ok := c.ls[i].(refunder); ok {
			r.refund(held[i].permits, start)
		} else {
			held[i].Release()
		}
	}
}

// tryAll takes n from every member, or from none, and on refusal returns
// the refusing member's lease and index. skip, if >= 0, is a member whose
// permits the caller already holds as have, taken at or after since; on
// refusal have is given back too, and the caller holds nothing.
func (c *chain) tryAll(n, skip int, have Lease, since time.Time) (Lease, int) {
	var buf [8]Lease
	held := buf[:0]
	if len(c.ls) > len(buf) {
		held = make([]Lease, 0, len(c.ls))
	}
	start := time.Now() // before any TryAcquire below
	for i, l := range c.ls {
		var lease Lease
		if i == skip {
			lease = have
		} else {
			lease = l.TryAcquire(n)
		}
		if !lease.Granted() {
			c.undo(held, i, start, skip, since)
			if skip > i {
				// The lease the caller waited for is behind the refusal:
				// the caller drops it, so it goes back here.
				c.giveBack(skip, have, since)
			}
			return lease, i
		}
		held = append(held, lease)
	}
	if c.known {
		return Lease{rel: c, permits: n, granted: true}, -1
	}
	return Lease{rel: heldLeases(append([]Lease(nil), held...)), permits: n, granted: true}, -1
}

// TryAcquire takes n permits from every member, or from none.
func (c *chain) TryAcquire(n int) Lease {
	l, _ := c.tryAll(n, -1, Lease{}, time.Time{})
	return l
}

// Acquire waits until every member grants n permits at the same instant.
func (c *chain) Acquire(ctx context.Context, n int) (Lease, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	skip, have, since := -1, Lease{}, time.Time{}
	backoff := time.Duration(0)
	for {
		if err := ctx.Err(); err != nil {
			c.giveBack(skip, have, since)
			return ctxDenied(err), err
		}
		waited := skip >= 0
		lease, i := c.tryAll(n, skip, have, since)
		if lease.Granted() {
			return lease, nil
		}
		skip, have = -1, Lease{}
		switch err := lease.Err(); {
		case errors.Is(err, ErrExceedsLimit), errors.Is(err, ErrInvalidCount), errors.Is(err, ErrClosed):
			return lease, fmt.Errorf("limiter: chain: %w", err)
		}
		d := lease.RetryAfter()
		if d <= 0 && waited {
			// One member granted from its queue and another then refused
			// without saying when: two members whose queues are ahead of
			// the chain (NewestFirst can serve the chain's wait at once)
			// would otherwise bounce it between them without ever
			// blocking. Back off, doubling, until something changes.
			backoff = min(max(2*backoff, time.Microsecond), 10*time.Millisecond)
			d = backoff
		} else if d > 0 {
			backoff = 0
		}
		if d > 0 {
			if err := pastDeadline(ctx, d); err != nil {
				lease.why = reasonDeadline
				return lease, fmt.Errorf("limiter: chain: %w", err)
			}
			if err := sleep(ctx, &timer, d); err != nil {
				return ctxDenied(err), err
			}
			continue
		}
		// The refusing member cannot say when (a concurrency limiter waits
		// for a release, or its queue is ahead): wait in its own queue, then
		// try the others at the instant it grants.
		before := time.Now() // the member's grant comes after this
		l, err := c.ls[i].Acquire(ctx, n)
		if err != nil {
			return l, err
		}
		skip, have, since = i, l, before
	}
}

// giveBack returns a member's lease, taken by Acquire at or after since,
// that the chain did not use.
func (c *chain) giveBack(i int, l Lease, since time.Time) {
	if i < 0 || !l.Granted() {
		return
	}
	if r, ok := c.ls[i].(refunder); ok {
		if e, ok := c.ls[i].(interface{ epoch() time.Time }); ok && l.retry > 0 {
			since = e.epoch().Add(l.retry - 1) // the instant the member granted it
		}
		r.refund(l.permits, since)
	} else {
		l.Release()
	}
}

// Quota returns the Quota of the member with the fewest permits remaining
// (the one that would refuse first) among the members that report one, or
// the zero Quota when none does.
func (c *chain) Quota() Quota {
	var best Quota
	found := false
	for _, l := range c.ls {
		if q, ok := QuotaOf(l); ok && (!found || q.Remaining < best.Remaining) {
			best, found = q, true
		}
	}
	return best
}
