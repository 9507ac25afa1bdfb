package limiter

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/internal/precise"
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
}

const closedBit = 1 << 30

// waiter is one Acquire call waiting in the queue.
type waiter struct {
	n          int
	prev, next *waiter
	ready      chan struct{} // poked when done, or when it becomes head or its wake time changes
	done       bool          // granted or failed; guarded by base.mu
	err        error
}

// base holds what every limiter shares: clock origin, queue, counters, Close.
//
// Its fields are laid out for the lock-free fast paths: what every call reads
// but rarely changes comes first; then, on cache lines of their own, the
// words every call writes (the algorithm's state word and the counters, so
// that the line a compare-and-swap takes is the one the counter needs); then
// what only the locked slow path touches.
type base struct {
	// gate is read by lock-free fast paths: zero when nobody waits and the
	// limiter is open. Low bits count waiters; closedBit marks Close.
	gate   atomic.Int32
	origin time.Time
	pol    policy
	rel    Releaser // set on granted leases; nil for rate limiters
	q      QueueOptions

	_        [64]byte
	word     atomic.Int64 // the lock-free state: GCRA's tat, Concurrency's free permits
	granted  atomic.Int64
	rejected atomic.Int64
	_        [64]byte

	mu         sync.Mutex
	head, tail *waiter // head is served next
	nwait      int
	queued     int64
	qcost      int64 // what Queue.Limit caps: permits queued, a zero-permit waiter counting one
	wakeAt     int64 // when the head could be served; -1 unknown
	pokedHead  *waiter
	pokedWake  int64
	closed     bool
}

func (b *base) init(p policy, rel Releaser, q QueueOptions) {
	b.origin = time.Now()
	b.pol = p
	b.rel = rel
	b.q = q
	b.wakeAt = -1
}

// now returns nanoseconds since the limiter was made, from the monotonic clock.
func (b *base) now() int64 { return int64(time.Since(b.origin)) }

// instant returns t in the limiter's time: nanoseconds since it was made.
func (b *base) instant(t time.Time) int64 { return int64(t.Sub(b.origin)) }

func (b *base) grant(n int) Lease {
	b.granted.Add(1)
	return grantedLease(b.rel, n)
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
	if b.closed {
		b.mu.Unlock()
		return b.reject(reasonClosed, 0)
	}
	if b.nwait > 0 {
		b.mu.Unlock()
		return b.reject(reasonLimited, 0)
	}
	ok, retry := b.pol.take(b.now(), n)
	b.mu.Unlock()
	if ok {
		return b.grant(n)
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
	if ctx == nil {
		panic("limiter: nil Context")
	}
	if n < 0 {
		return b.reject(reasonInvalid, 0), b.requestErr(reasonInvalid, n)
	}
	b.mu.Lock()
	now := b.now()
	if l, decided, err := b.decideNow(ctx, n, now); decided {
		b.mu.Unlock()
		return l, err
	}
	// A waiter is allocated per wait (not pooled: its channel belongs to the
	// synctest bubble, if any, that made it).
	w := &waiter{n: n, ready: make(chan struct{}, 1)}
	b.push(w)
	b.dispatch(now)
	b.mu.Unlock()
	return b.wait(ctx, w)
}

// decideNow decides, under b.mu, an Acquire of n >= 0 permits at now that
// need not wait: refused at once (impossible, ctx done, closed, past its
// deadline, queue full) or granted now. decided is false when the request
// must wait in the queue, where there is room for it.
func (b *base) decideNow(ctx context.Context, n int, now int64) (l Lease, decided bool, err error) {
	// Under the lock: SetLimit changes a window's limit under it, and a
	// request that a lowered limit made impossible must fail here rather
	// than queue after SetLimit's kick and wait forever.
	if int64(n) > b.pol.maxRequest() {
		return b.reject(reasonExceeds, 0), true, b.requestErr(reasonExceeds, n)
	}
	if err := ctx.Err(); err != nil {
		b.rejected.Add(1)
		return ctxDenied(err), true, err
	}
	if b.closed {
		return b.reject(reasonClosed, 0), true, ErrClosed
	}
	if l, ok, err := b.takeNow(ctx, n, now); ok || err != nil {
		return l, true, err
	}
	if err := b.makeRoom(n); err != nil {
		return b.reject(reasonQueueFull, 0), true, err
	}
	return Lease{}, false, nil
}

// takeNow grants n permits at now when the request may be served ahead of
// the queue: nobody waits, or it would head a NewestFirst queue and be
// served first (pushing out nobody), so its wait is its own. Otherwise, or
// when the state refuses, it fails the request with an error wrapping
// context.DeadlineExceeded if the wait it knows of would end after ctx's
// deadline.
func (b *base) takeNow(ctx context.Context, n int, now int64) (l Lease, ok bool, err error) {
	first := b.nwait == 0 || b.q.Order == NewestFirst
	if !first && b.wakeAt < 0 {
		return Lease{}, false, nil // the queue's wait is not known
	}
	retry := b.wakeAt - now
	if first {
		if ok, retry = b.pol.take(now, n); ok {
			return b.grant(n), true, nil
		}
	}
	if err := pastDeadline(ctx, time.Duration(retry)); err != nil {
		return b.reject(reasonDeadline, retry), false, err
	}
	return Lease{}, false, nil
}

// makeRoom makes room in the queue for a waiter of n permits, or returns an
// error wrapping ErrQueueFull. Queue.Limit caps the permits queued (a
// zero-permit waiter counting one); with no cap the queue still holds at
// most MaxInt64, so that its count cannot wrap. OldestFirst refuses the
// newcomer; NewestFirst fails the oldest waiters until it fits.
func (b *base) makeRoom(n int) error {
	lim := int64(b.q.Limit)
	if lim == 0 {
		lim = math.MaxInt64
	} else if int64(n) > lim {
		return fmt.Errorf("%w: %d permits asked, queue holds at most %d", ErrQueueFull, n, lim)
	}
	cost := max(int64(n), 1)
	// cost > lim-qcost, not qcost+cost > lim: the sum wraps for a cap near
	// MaxInt. cost <= lim, so the loop ends with the queue empty at worst.
	for cost > lim-b.qcost {
		if b.q.Order == OldestFirst {
			return ErrQueueFull
		}
		b.fail(b.tail, ErrQueueFull)
	}
	return nil
}

// pastDeadline returns an error wrapping context.DeadlineExceeded when a
// wait of d would end after ctx's deadline, and nil otherwise.
func pastDeadline(ctx context.Context, d time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && d > 0 && time.Until(dl) < d {
		return fmt.Errorf("limiter: the wait of %v would end after the context deadline: %w", d, context.DeadlineExceeded)
	}
	return nil
}

func (b *base) push(w *waiter) {
	if b.head == nil {
		b.head, b.tail = w, w
	} else if b.q.Order == NewestFirst {
		w.next = b.head
		b.head.prev = w
		b.head = w
	} else {
		w.prev = b.tail
		b.tail.next = w
		b.tail = w
	}
	b.nwait++
	b.queued += int64(w.n)
	b.qcost += max(int64(w.n), 1)
	b.gate.Add(1)
}

func (b *base) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		b.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		b.tail = w.prev
	}
	w.prev, w.next = nil, nil
	b.nwait--
	b.queued -= int64(w.n)
	b.qcost -= max(int64(w.n), 1)
	b.gate.Add(-1)
	if b.pokedHead == w {
		b.pokedHead = nil
	}
}

func poke(w *waiter) { signal(w.ready) }

// signal wakes whoever waits on c, a channel with a buffer of one: a signal
// is never lost (one is kept until it is received) nor waited for.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// fail removes w from the queue and wakes it with err.
func (b *base) fail(w *waiter, err error) {
	b.remove(w)
	w.done, w.err = true, err
	b.rejected.Add(1)
	poke(w)
}

// dispatch grants queued requests in order while the state allows, then
// records when the head could be served and wakes the head if that changed.
func (b *base) dispatch(now int64) {
	for w := b.head; w != nil; w = b.head {
		ok, retry := b.pol.take(now, w.n)
		if !ok {
			if retry >= 0 {
				b.wakeAt = now + retry
			} else {
				b.wakeAt = -1
			}
			if b.pokedHead != w || b.pokedWake != b.wakeAt {
				b.pokedHead, b.pokedWake = w, b.wakeAt
				poke(w)
			}
			return
		}
		b.remove(w)
		w.done = true
		b.granted.Add(1)
		poke(w)
	}
	b.wakeAt = -1
}

// kick re-runs dispatch after a change of limits or a release.
func (b *base) kick() {
	b.mu.Lock()
	if b.nwait > 0 {
		// Requests that can no longer ever be granted fail now rather than wait forever.
		max := b.pol.maxRequest()
		for w := b.head; w != nil; {
			next := w.next
			if int64(w.n) > max {
				b.fail(w, fmt.Errorf("%w: %d permits asked, the limit is now %d", ErrExceedsLimit, w.n, max))
			}
			w = next
		}
		b.dispatch(b.now())
	}
	b.mu.Unlock()
}

// wait blocks until w is granted or failed, or ctx ends. Only the head of the
// queue waits for an instant, and only while the state says when it can be
// served; it waits precisely (a timer, then a short spin: see
// internal/precise), so that its grant is booked at that instant, not when a
// late timer fires. QueueOptions.Spin, when set, fixes the spin's length.
func (b *base) wait(ctx context.Context, w *waiter) (Lease, error) {
	pt := precise.Timer{Spin: b.q.Spin}
	defer pt.Stop()
	for {
		b.mu.Lock()
		if w.done {
			b.mu.Unlock()
			return b.finish(w)
		}
		var at time.Time
		if b.head == w && b.wakeAt >= 0 {
			if now := b.now(); b.wakeAt <= now {
				b.dispatch(now)
				b.mu.Unlock()
				continue
			}
			at = b.origin.Add(time.Duration(b.wakeAt))
		}
		b.mu.Unlock()
		switch pt.Until(ctx, w.ready, at, 0) {
		case precise.Done:
			return b.cancel(ctx, w)
		case precise.Reached:
			b.mu.Lock()
			b.dispatch(b.now())
			b.mu.Unlock()
		}
	}
}

func (b *base) finish(w *waiter) (Lease, error) {
	n, err := w.n, w.err
	if err != nil {
		return Denied(err, 0), err
	}
	return grantedLease(b.rel, n), nil
}

// cancel removes w after its context ended. A grant that won the race is
// kept and returned: the permits were granted at a real instant.
func (b *base) cancel(ctx context.Context, w *waiter) (Lease, error) {
	b.mu.Lock()
	if w.done {
		b.mu.Unlock()
		return b.finish(w)
	}
	b.remove(w)
	b.rejected.Add(1)
	if b.head != nil {
		b.dispatch(b.now())
	}
	b.mu.Unlock()
	return ctxDenied(ctx.Err()), ctx.Err()
}

// close fails every waiter with ErrClosed and makes later calls fail.
func (b *base) close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.gate.Add(closedBit)
	for b.head != nil {
		b.fail(b.head, ErrClosed)
	}
	b.wakeAt = -1
	return nil
}

func (b *base) stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{
		Available: max(b.pol.available(b.now()), 0),
		Queued:    b.queued,
		Waiters:   b.nwait,
		Granted:   b.granted.Load() + b.uncounted(),
		Rejected:  b.rejected.Load(),
	}
}

// uncounted returns the grants a lock-free state word counts that the
// granted counter does not yet (see gcra). The caller holds b.mu.
func (b *base) uncounted() int64 {
	if g, ok := b.pol.(*gcra); ok {
		return g.uncounted()
	}
	return 0
}

// isIdle reports whether the limiter is as if new: nobody waits and its
// state has recovered. Keyed limiters evict idle keys.
func (b *base) isIdle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nwait == 0 && b.pol.idle(b.now())
}
