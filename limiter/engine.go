package limiter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/internal/waitq"
)

// policy is one algorithm's state machine. base calls its methods with
// base.mu held; algorithms with a lock-free fast path make take safe to call
// concurrently with that fast path.
type policy interface {
	// take grants n permits at now (nanoseconds since the limiter's origin)
	// if the state allows it, ignoring the queue. n == 0 asks whether one
	// permit could be granted and takes nothing. When it cannot grant, retry
	// is the wait in nanoseconds until it could (> 0), or -1 when only a
	// release can make room.
	take(now int64, n int) (ok bool, retry int64)
	// maxRequest is the most permits one request can ever be granted.
	maxRequest() int64
	// available is the number of permits that could be granted at now.
	available(now int64) int64
	// idle reports whether the state is that of a new limiter at now.
	idle(now int64) bool
	// quota reports the policy and its state at now (see Quota); Remaining
	// ignores the queue.
	quota(now int64) Quota

	// A Chain decides with several limiters at one instant, under their
	// locks, and undoes its takes if one of them refuses: hold and unhold
	// bracket such a decision, and untake undoes one take in it.
	//
	// hold keeps the lock-free fast paths from seeing the state until
	// unhold, which publishes it: the chain's takes and untakes then reach
	// them all at once, or not at all. Both are idempotent; policies without
	// a lock-free path that could grant in between do nothing.
	hold()
	unhold()
	// untake exactly undoes a successful take(now, n) made under the same
	// hold of base.mu (and of hold) with nothing in between.
	untake(now int64, n int)
	// uncounted returns the grants the state records that base.granted
	// does not count yet (see gcra); the caller holds base.mu.
	uncounted() int64

	// settle books, at now, the actual cost of a lease of granted permits
	// granted at instant at (negative: unknown): overuse as a debt that
	// later grants pay, unused permits back as far as no grant since can
	// have relied on them (see Lease.Settle). The caller holds base.mu.
	settle(now, at, granted, actual int64)
}

// lockedState is the policy methods of a state that the lock-free fast
// paths cannot grant from while a Chain decides under base.mu (the
// windows, which have no fast path; Concurrency, whose fast path can only
// refuse while a chain holds permits it may give back): there is nothing
// to hold, and every grant is counted at once.
type lockedState struct{}

func (lockedState) hold()            {}
func (lockedState) unhold()          {}
func (lockedState) uncounted() int64 { return 0 }

// base holds what every limiter shares: clock origin, queue, counters, Close.
//
// Its fields are laid out for the lock-free fast paths: what every call reads
// but rarely changes comes first (the queue's state word, which says whether
// anybody waits); then, on cache lines of their own, the words every call
// writes (the algorithm's state word and the counters, so that the line a
// compare-and-swap takes is the one the counter needs); then the lock.
type base struct {
	q       waitq.Queue // guarded by mu
	origin  time.Time
	pol     policy
	rel     Releaser  // the Releaser of granted leases: the Concurrency, or &rl
	returns bool      // permits come back on release (a Concurrency)
	rl      rateLease // a rate limiter's leases' Releaser

	_        [64]byte
	word     atomic.Int64 // the lock-free state: GCRA's tat, Concurrency's free permits
	granted  atomic.Int64
	rejected atomic.Int64
	_        [64]byte

	mu sync.Mutex
}

// init readies b for policy p. rel is the Releaser of granted leases of a
// limiter whose permits come back (a Concurrency); nil for a rate limiter,
// whose leases get one that releases nothing and settles.
func (b *base) init(p policy, rel Releaser, q QueueOptions) {
	b.origin = time.Now()
	b.pol = p
	b.rl.b = b
	b.returns = rel != nil
	if rel == nil {
		rel = &b.rl
	}
	b.rel = rel
	b.q.Init(&b.mu, q.waitq())
}

// now returns nanoseconds since the limiter was made, from the monotonic clock.
func (b *base) now() int64 { return int64(time.Since(b.origin)) }

// instant returns t in the limiter's time: nanoseconds since it was made.
func (b *base) instant(t time.Time) int64 { return int64(t.Sub(b.origin)) }

// grant counts a grant of n permits at instant at and returns its lease.
func (b *base) grant(n int, at int64) Lease {
	b.granted.Add(1)
	return grantedLease(b.rel, n, at)
}

func (b *base) reject(why reason, retry int64) Lease {
	b.rejected.Add(1)
	if retry < 0 {
		retry = 0
	}
	return denied(why, time.Duration(retry))
}

// TryAcquire takes n permits if they are available now and nobody waits in
// Acquire. It never blocks.
func (b *base) TryAcquire(n int) Lease { return b.tryAcquire(n) }

// Acquire waits until n permits are granted, ctx is done, the queue is
// full, or the limiter is closed; see Limiter.
func (b *base) Acquire(ctx context.Context, n int) (Lease, error) { return b.acquire(ctx, n) }

// Stats returns a snapshot of the limiter's state and counters.
func (b *base) Stats() Stats { return b.stats() }

// Close fails every waiting Acquire with ErrClosed; later acquisitions fail
// with ErrClosed too. Leases already granted may still be released. It
// returns nil, also when called again.
func (b *base) Close() error { return b.close() }

// Quota returns the limiter's policy and state; see Quota.
func (b *base) Quota() Quota { return b.quota() }

// tryAcquire is TryAcquire under the lock: the path of the locked
// algorithms, and the fallback of the lock-free ones.
func (b *base) tryAcquire(n int) Lease {
	if n < 0 {
		return b.reject(reasonInvalid, 0)
	}
	b.mu.Lock()
	// Under the lock: SetLimit changes a window's limit under it.
	if int64(n) > b.pol.maxRequest() {
		b.mu.Unlock()
		return b.reject(reasonExceeds, 0)
	}
	if b.q.Closed() != nil {
		b.mu.Unlock()
		return b.reject(reasonClosed, 0)
	}
	if b.q.Len() > 0 {
		b.mu.Unlock()
		return b.reject(reasonLimited, 0)
	}
	now := b.now()
	ok, retry := b.pol.take(now, n)
	b.mu.Unlock()
	if ok {
		return b.grant(n, now)
	}
	return b.reject(reasonLimited, retry)
}

// requestErr is the error of a request refused for why; for reasonExceeds
// the caller holds b.mu.
func (b *base) requestErr(why reason, n int) error {
	switch why {
	case reasonInvalid:
		return fmt.Errorf("%w: %d", ErrInvalidCount, n)
	case reasonExceeds:
		return fmt.Errorf("%w: %d permits asked, at most %d can be granted", ErrExceedsLimit, n, b.pol.maxRequest())
	}
	return why.err()
}

// acquire is Acquire for every algorithm.
func (b *base) acquire(ctx context.Context, n int) (Lease, error) {
	return b.wait(ctx, n, false)
}

// wait is acquire; a silent wait (a Chain's, in its member's queue) counts
// neither its grant nor its failure.
func (b *base) wait(ctx context.Context, n int, silent bool) (Lease, error) {
	if ctx == nil {
		panic("limiter: nil Context")
	}
	if n < 0 {
		return b.refuse(silent, reasonInvalid, 0), b.requestErr(reasonInvalid, n)
	}
	b.mu.Lock()
	// Under the lock: SetLimit changes a window's limit under it, and a
	// request that a lowered limit made impossible must fail here rather
	// than queue after SetLimit's kick and wait forever.
	if int64(n) > b.pol.maxRequest() {
		err := b.requestErr(reasonExceeds, n)
		b.mu.Unlock()
		return b.refuse(silent, reasonExceeds, 0), err
	}
	if err := ctx.Err(); err != nil {
		b.mu.Unlock()
		return b.refuse(silent, reasonOf(err), 0), err
	}
	t := time.Now()
	now := b.instant(t)
	w, granted, retry, err := b.q.Take(ctx, t, int64(n), func(n int64) (bool, time.Duration) {
		ok, retry := b.pol.take(now, int(n))
		return ok, time.Duration(retry)
	})
	if w != nil {
		w.Silent = silent
	}
	b.mu.Unlock()
	switch {
	case granted:
		if !silent {
			b.granted.Add(1)
		}
		return grantedLease(b.rel, n, now), nil
	case err != nil:
		return b.refuse(silent, reasonOf(err), retry), err
	}
	// A waiter is allocated per wait (not pooled: its channel belongs to the
	// synctest bubble, if any, that made it). The head waits precisely (a
	// timer, then the OS alarm or a short spin: see internal/precise), so
	// that its grant is booked at its instant, not when a late timer fires.
	if err := b.q.Wait(ctx, w, b.serve); err != nil {
		return b.refuse(silent, reasonOf(err), w.RetryAfter()), err
	}
	return grantedLease(b.rel, n, w.Stamp), nil
}

// refuse counts a refusal (unless silent) and returns its lease.
func (b *base) refuse(silent bool, why reason, retry time.Duration) Lease {
	if !silent {
		b.rejected.Add(1)
	}
	return denied(why, max(retry, 0))
}

// serve grants queued requests in order while the state allows at t (see
// waitq.Queue.Serve). The caller holds b.mu.
func (b *base) serve(t time.Time) {
	now := b.instant(t)
	b.q.Serve(t, func(w *waitq.Waiter) (bool, time.Duration) {
		ok, retry := b.pol.take(now, int(w.N()))
		if ok {
			w.Stamp = now
			if !w.Silent {
				b.granted.Add(1)
			}
		}
		return ok, time.Duration(retry)
	})
}

// kick serves the queue again after a change of limits or a release.
// Requests that can no longer ever be granted fail now rather than wait
// forever.
func (b *base) kick() {
	b.mu.Lock()
	if b.q.Len() > 0 {
		most := b.pol.maxRequest()
		b.q.FailEach(func(n int64) error {
			if n > most {
				return fmt.Errorf("%w: %d permits asked, the limit is now %d", ErrExceedsLimit, n, most)
			}
			return nil
		})
		b.serve(time.Now())
	}
	b.mu.Unlock()
}

// close fails every waiter with ErrClosed and makes later calls fail.
func (b *base) close() error {
	b.mu.Lock()
	b.q.Close(ErrClosed)
	b.mu.Unlock()
	return nil
}

func (b *base) stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{
		Available: max(b.pol.available(b.now()), 0),
		Queued:    b.q.Queued(),
		Waiters:   b.q.Len(),
		Granted:   b.granted.Load() + b.pol.uncounted(),
		Rejected:  b.rejected.Load(),
	}
}

// isIdle reports whether the limiter is as if new: nobody waits and its
// state has recovered. Keyed limiters evict idle keys.
func (b *base) isIdle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.q.Len() == 0 && b.pol.idle(b.now())
}

// rateLease is the Releaser of a rate limiter's granted leases: Release
// does nothing (the permits are spent), and Settle settles with the
// limiter at the grant's instant, which the lease carries.
type rateLease struct{ b *base }

// ReleasePermits does nothing: a rate limiter's permits are spent.
func (r *rateLease) ReleasePermits(int) {}

// SettlePermits settles a lease whose grant instant is not known: it books
// overuse as debt and gives nothing back.
func (r *rateLease) SettlePermits(granted, actual int) { r.b.settleAt(-1, granted, actual) }

func (r *rateLease) settleAt(at int64, granted, actual int) { r.b.settleAt(at, granted, actual) }

// settler is the Releaser of a lease of this package that settles with
// the instant of the grant, which the lease carries (Lease.Settle).
type settler interface {
	settleAt(at int64, granted, actual int)
}

// settleAt settles a lease of granted permits granted at instant at
// (negative: unknown) with its actual cost, and serves the queue again:
// permits given back may serve it sooner, a debt later.
func (b *base) settleAt(at int64, granted, actual int) {
	if granted < 0 || actual < 0 {
		return
	}
	b.mu.Lock()
	t := time.Now()
	b.pol.settle(b.instant(t), at, int64(granted), int64(actual))
	if b.q.Len() > 0 {
		b.serve(t)
	}
	b.mu.Unlock()
}
