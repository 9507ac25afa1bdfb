package limiter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rategate/rategate/internal/precise"
	"github.com/rategate/rategate/internal/waitq"
)

// Chain returns a Limiter that grants n permits only when every one of ls
// grants n permits: all or nothing. The chain's lease releases every
// member's lease, in reverse order. Each member of this package counts a
// grant of the chain once, as its own, and the refusal of a chain's
// TryAcquire by the member that refused; a chain's waits in a member's
// queue and the retries of its Acquire count nothing, and the chain keeps
// no statistics of its own. Chains of chains are flattened.
//
// For this package's limiters (and the limiters of Keyed.For and
// KeyedTokenBucket.For) the decision is exact: the chain locks those members
// in one process-wide order, reads the clock once, takes from each at that
// one instant, and, if one refuses, undoes the others before any lock is
// released. No other goroutine can act in between, so every member's bound
// holds however the members are also used directly, and a refused chain
// consumes nothing. Members from outside this package (a redislimit
// limiter, say) are asked first, with TryAcquire, before those locks are
// taken; when a member of this package then refuses, their leases are
// released, which gives back a concurrency permit but cannot give back a
// rate permit: it stays spent, on the safe side of the bound.
//
// TryAcquire reports the first refusal (its Err and RetryAfter), and fails
// with ErrLimited while callers wait in the chain's Acquire: it does not jump
// their queue. Acquire serves its callers in arrival order. The caller at
// the head of the chain's queue waits for the refusing member: it sleeps for
// its RetryAfter, or, when that is unknown (a concurrency limiter waits for
// a release, or the member's own queue is ahead), waits in that member's
// queue, then decides again. A request larger than some member can ever
// grant fails at once with ErrExceedsLimit.
//
// Chain panics if ls is empty or holds a nil Limiter, as a programming error.
func Chain(ls ...Limiter) Limiter {
	if len(ls) == 0 {
		panic("limiter: Chain of no limiters")
	}
	c := &chain{}
	for _, l := range ls {
		switch m := l.(type) {
		case nil:
			panic("limiter: Chain of a nil Limiter")
		case *chain:
			c.ls = append(c.ls, m.ls...)
		default:
			c.ls = append(c.ls, l)
		}
	}
	c.q.Init(&c.mu, waitq.Options{})
	c.origin = time.Now()
	c.static = true
	for _, l := range c.ls {
		if _, ok := l.(based); !ok {
			c.static = false
		}
	}
	return c
}

type chain struct {
	ls []Limiter
	// static: every member is one of this package's six limiters, whose
	// leases are rebuilt from the member, the count and the instant, so the
	// chain's lease needs no allocation: the chain itself releases and
	// settles it.
	static bool
	// origin is the instant a static chain's leases count their grant
	// instant from; each member's is its own.
	origin time.Time

	mu sync.Mutex
	q  waitq.Queue // oldest first; its head decides
}

// based is implemented by the six limiters of this package (through base).
type based interface{ core() *base }

func (b *base) core() *base { return b }

// ReleasePermits releases n permits to every member that takes permits
// back, in reverse order. It serves static chains' leases.
func (c *chain) ReleasePermits(n int) {
	for i := len(c.ls) - 1; i >= 0; i-- {
		if r, ok := c.ls[i].(Releaser); ok {
			r.ReleasePermits(n)
		}
	}
}

// settleAt settles a static chain's lease, granted at instant at of the
// chain, with every member at that instant of its own.
func (c *chain) settleAt(at int64, granted, actual int) {
	t := c.origin.Add(time.Duration(at))
	for _, l := range c.ls {
		b := l.(based).core()
		b.settleAt(b.instant(t), granted, actual)
	}
}

// heldLeases releases the leases of a chain with keyed or foreign members.
type heldLeases []Lease

func (h heldLeases) ReleasePermits(int) {
	for i := len(h) - 1; i >= 0; i-- {
		h[i].Release()
	}
}

// ReportOutcome reports o to every member's lease, so that an adaptive
// member of a chain learns from the work the chain admitted.
func (h heldLeases) ReportOutcome(_ int, o Outcome, latency time.Duration) {
	for _, l := range h {
		l.Report(o, latency)
	}
}

// SettlePermits settles every member's lease that can be settled.
func (h heldLeases) SettlePermits(_, actual int) {
	for i := range h {
		h[i] = h[i].Settle(actual)
	}
}

// maxRequest is the most any member can ever grant at once, or -1 when no
// member can say.
func (c *chain) check(n int) (reason, error) {
	if n < 0 {
		return reasonInvalid, fmt.Errorf("limiter: chain: %w: %d", ErrInvalidCount, n)
	}
	for _, l := range c.ls {
		if m, ok := l.(based); ok {
			b := m.core()
			b.mu.Lock()
			most := b.pol.maxRequest()
			b.mu.Unlock()
			if int64(n) > most {
				return reasonExceeds, fmt.Errorf("limiter: chain: %w: %d permits asked, a member grants at most %d", ErrExceedsLimit, n, most)
			}
		}
	}
	return reasonNone, nil
}

// TryAcquire takes n permits from every member, or from none.
func (c *chain) TryAcquire(n int) Lease {
	if c.q.Waiting() && n >= 0 {
		return denied(reasonLimited, 0)
	}
	l, _ := c.decide(n, -1, Lease{}, true)
	return l
}

// Acquire waits, behind the chain's earlier callers, until every member
// grants n permits at once.
func (c *chain) Acquire(ctx context.Context, n int) (Lease, error) {
	if ctx == nil {
		panic("limiter: nil Context")
	}
	if why, err := c.check(n); err != nil {
		return denied(why, 0), err
	}
	if err := ctx.Err(); err != nil {
		return ctxDenied(err), err
	}
	c.mu.Lock()
	w, _, _, _ := c.q.Take(ctx, time.Now(), int64(n), nil) // no cap, never closed: it queues
	c.mu.Unlock()
	defer c.leave(w)
	if err := c.q.Wait(ctx, w, nil); err != nil {
		return ctxDenied(err), err
	}
	return c.serve(ctx, n)
}

// leave takes w out of the queue and, if it was the head, hands the head
// to the next waiter.
func (c *chain) leave(w *waitq.Waiter) {
	c.mu.Lock()
	c.q.Leave(w)
	c.mu.Unlock()
}

// pastDeadline returns an error wrapping context.DeadlineExceeded when a
// wait of d would end after ctx's deadline, and nil otherwise.
func pastDeadline(ctx context.Context, d time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && d > 0 && time.Until(dl) < d {
		return fmt.Errorf("limiter: the wait of %v would end after the context deadline: %w", d, context.DeadlineExceeded)
	}
	return nil
}

// serve is the head waiter's loop: decide, and until the chain grants,
// wait for the member that refused.
func (c *chain) serve(ctx context.Context, n int) (Lease, error) {
	var pt precise.Timer // waits end at the instant, as the members' own queues do
	defer pt.Stop()
	skip, have := -1, Lease{}
	backoff := time.Duration(0)
	waited := false // the last round waited in a member's queue
	for {
		if err := ctx.Err(); err != nil {
			c.giveBack(skip, have)
			return ctxDenied(err), err
		}
		lease, i := c.decide(n, skip, have, false)
		skip, have = -1, Lease{}
		if lease.Granted() {
			return lease, nil
		}
		if err := lease.Err(); errors.Is(err, ErrExceedsLimit) || errors.Is(err, ErrInvalidCount) || errors.Is(err, ErrClosed) {
			return lease, fmt.Errorf("limiter: chain: %w", err)
		}
		d := lease.RetryAfter()
		if d <= 0 && waited {
			// A member granted from its queue, then one refused without
			// saying when: with NewestFirst queues ahead, waiting in them
			// can return at once. Back off, doubling, until something changes.
			backoff = min(max(2*backoff, time.Microsecond), 10*time.Millisecond)
			d = backoff
		} else if d > 0 {
			backoff = 0
		}
		waited = d <= 0
		if d > 0 {
			if err := pastDeadline(ctx, d); err != nil {
				lease.x = int64(reasonDeadline)
				return lease, fmt.Errorf("limiter: chain: %w", err)
			}
			if pt.Until(ctx, nil, time.Now().Add(d), 0) == precise.Done {
				err := ctx.Err()
				return ctxDenied(err), err
			}
			continue
		}
		var err error
		if skip, have, err = c.waitMember(ctx, i, n); err != nil {
			return Denied(err, 0), err
		}
	}
}

// waitMember waits in member i's own queue. A member that takes permits
// back (a concurrency limiter, or one from outside this package) is asked
// for the n permits, which the chain then holds while it decides the others
// (and gives back if they refuse); a rate limiter of this package is asked
// for 0 permits, which returns when its queue ahead has been served and
// takes nothing.
func (c *chain) waitMember(ctx context.Context, i, n int) (int, Lease, error) {
	m := c.ls[i]
	if !givesBack(m) {
		_, err := awaitMember(ctx, m, 0)
		return -1, Lease{}, err
	}
	l, err := awaitMember(ctx, m, n)
	if err != nil {
		return -1, Lease{}, err
	}
	return i, l, nil
}

// awaiter is a member of this package that can wait in its own queue
// without counting: the chain's wait is a grant to nobody until the chain
// grants, and then the member counts it (countGrant) like its other grants.
type awaiter interface {
	await(ctx context.Context, n int) (Lease, error)
	countGrant()
}

func (b *base) await(ctx context.Context, n int) (Lease, error) { return b.wait(ctx, n, true) }
func (b *base) countGrant()                                     { b.granted.Add(1) }

// awaitMember waits in m's queue for n permits: silently when m is of this
// package, and otherwise through its Acquire (which counts as it counts).
func awaitMember(ctx context.Context, m Limiter, n int) (Lease, error) {
	if a, ok := m.(awaiter); ok {
		return a.await(ctx, n)
	}
	return m.Acquire(ctx, n)
}

// givesBack reports whether member l's permits come back on release: a
// concurrency limiter, a chain holding one, or any limiter from outside this
// package (whose Release the chain calls, whatever it does).
func givesBack(l Limiter) bool {
	switch m := l.(type) {
	case based:
		return m.core().returns
	case *chain:
		for _, x := range m.ls {
			if givesBack(x) {
				return true
			}
		}
		return false
	case keyedMember:
		return m.givesBack()
	}
	return true
}

// giveBack returns the lease of member i that the chain waited for and did
// not use.
func (c *chain) giveBack(i int, l Lease) {
	if i >= 0 && l.Granted() {
		l.Release() // waited for silently: never counted
	}
}

// isIdle reports whether every member is as if new, so that a Keyed holding
// chains can evict them.
func (c *chain) isIdle() bool {
	for _, l := range c.ls {
		i, ok := l.(idler)
		if !ok || !i.isIdle() {
			return false
		}
	}
	return true
}

// AppendQuotas appends each member's Quota to dst, in member order, and
// returns the extended slice: a keyed member's is its key's limiter's, a
// member that reports none appends the zero Quota. A caller that tells
// clients about every policy in force (HTTP's RateLimit-Policy) lists them
// all; Quota gives the one that would refuse first.
func (c *chain) AppendQuotas(dst []Quota) []Quota {
	for _, l := range c.ls {
		q, _ := QuotaOf(l)
		dst = append(dst, q)
	}
	return dst
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
