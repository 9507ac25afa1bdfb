// Package waitq is the queue of callers waiting for permits, written once
// for every limiter that queues: the six limiters of package limiter (one
// queue each), a Chain, each busy key of a KeyedTokenBucket, and
// redislimit's Partitioned.
//
// A Queue keeps its waiters in service order (oldest first, or newest
// first), caps the permits waiting, fails the waiters it must (pushed out of
// a full NewestFirst queue, past their deadline, on Close), and runs each
// waiter's wait: the waiter at the head waits, precisely (internal/precise),
// for the instant its owner says it can be served; the others wait to be
// woken. It holds no goroutine and no timer of its own.
//
// A Queue does not lock itself: its owner's mutex, given to Init, guards it,
// and every method but Wait and Waiting is called with that mutex held.
// What a waiter is granted, and when, is the owner's: it grants through
// Serve (which calls the owner's take for each waiter in order) or serves
// the head itself (Turn) and calls Leave.
package waitq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/internal/precise"
)

// Options configures a Queue.
type Options struct {
	// Limit caps the permits waiting (a waiter of zero permits counting
	// one); zero means no cap, beyond the int64 count itself.
	Limit int64
	// NewestFirst serves the newest waiter first; when the queue is over
	// Limit, the oldest waiters fail with Full to make room. By default
	// waiters are served oldest first and a newcomer that does not fit fails.
	NewestFirst bool
	// Full is the error (wrapped) of a waiter that finds no room.
	Full error
	// Timer configures the head's precise waits (its Spin and Plain).
	Timer precise.Timer
}

// closedBit marks a closed queue in its state word, above the count of
// waiters.
const closedBit = 1 << 30

// Queue is a queue of waiters; see the package documentation. The zero
// Queue is not ready for use: call Init.
type Queue struct {
	// state is read without the lock by fast paths (see Idle): the number of
	// waiters, plus closedBit once closed.
	state atomic.Int32

	mu         *sync.Mutex
	opts       Options
	head, tail *Waiter
	n          int
	queued     int64 // permits waiting
	cost       int64 // what Limit caps: permits waiting, a zero-permit waiter counting one
	wakeAt     time.Time
	poked      *Waiter   // the head last poked with wakeAt,
	pokedAt    time.Time // and that instant
	closedErr  error
}

// Waiter is one call waiting in a Queue.
type Waiter struct {
	n          int64
	deadline   time.Time // the caller's context's deadline; zero: none
	prev, next *Waiter
	wake       chan struct{} // poked: done, or heads the queue, or its instant changed
	done       bool
	err        error
	retry      time.Duration // with a deadline's error: the wait the head knew of
	// Silent marks a waiter whose grant the owner does not count (a
	// Chain's wait in its member's queue), and Stamp is the owner's record
	// of when it granted the waiter. The queue only carries them.
	Silent bool
	Stamp  int64
}

// N returns the permits w asks for.
func (w *Waiter) N() int64 { return w.n }

// RetryAfter returns, for a waiter failed because its wait would outlast
// its deadline, the wait that was known; 0 otherwise.
func (w *Waiter) RetryAfter() time.Duration { return w.retry }

// Init readies q, guarded by mu.
func (q *Queue) Init(mu *sync.Mutex, opts Options) {
	q.mu = mu
	q.opts = opts
}

// Idle reports, without the lock, that nobody waits and q is open: the
// condition for a lock-free fast path to grant ahead of the queue.
func (q *Queue) Idle() bool { return q.state.Load() == 0 }

// Waiting reports, without the lock, whether anybody waits.
func (q *Queue) Waiting() bool { return q.state.Load()&(closedBit-1) != 0 }

// Len returns the number of waiters.
func (q *Queue) Len() int { return q.n }

// Queued returns the permits the waiters ask for.
func (q *Queue) Queued() int64 { return q.queued }

// Head returns the waiter served next, or nil.
func (q *Queue) Head() *Waiter { return q.head }

// WakeAt returns when the head can be served, as the latest Serve found;
// zero when unknown or nobody waits.
func (q *Queue) WakeAt() time.Time { return q.wakeAt }

// Closed returns the error q was closed with, or nil while it is open.
func (q *Queue) Closed() error { return q.closedErr }

// Take decides whether a request of n permits at now is served ahead of the
// queue, and how it fails at once. It is what an Acquire does before it
// waits: take is the owner's decision (granted, or the wait until it could
// be; a negative wait is unknown).
//
// A request is served at once when nobody waits, or in a NewestFirst
// queue, whose newcomer would head the queue and be served first (pushing
// out nobody), and take grants it. It fails at once when the queue is
// closed, when the wait it knows of (its own, or the head's in an
// oldest-first queue) ends after ctx's deadline, or when there is no room.
// Otherwise it joins the queue: w is its Waiter, to pass to Wait.
//
// granted reports a grant at once; err, a failure at once, with retry the
// wait it knew of (for a deadline) or 0.
func (q *Queue) Take(ctx context.Context, now time.Time, n int64, take func(n int64) (bool, time.Duration)) (w *Waiter, granted bool, retry time.Duration, err error) {
	if q.closedErr != nil {
		return nil, false, 0, q.closedErr
	}
	first := q.n == 0 || q.opts.NewestFirst
	retry = -1
	if !q.wakeAt.IsZero() {
		retry = q.wakeAt.Sub(now)
	}
	if first && take != nil {
		if granted, retry = take(n); granted {
			return nil, true, 0, nil
		}
	}
	if first || retry >= 0 {
		if err := pastDeadline(ctx, now, retry); err != nil {
			return nil, false, retry, err
		}
	}
	if err := q.makeRoom(n); err != nil {
		return nil, false, 0, err
	}
	w = q.push(ctx, n)
	if first && retry >= 0 && q.head == w {
		q.wakeAt = now.Add(retry) // take said when this head can be served
	}
	return w, false, 0, nil
}

// pastDeadline returns an error wrapping context.DeadlineExceeded when a
// wait of d from now would end after ctx's deadline, and nil otherwise
// (also for d <= 0, an unknown or no wait).
func pastDeadline(ctx context.Context, now time.Time, d time.Duration) error {
	if dl, ok := ctx.Deadline(); ok && d > 0 && dl.Sub(now) < d {
		return deadlineErr(d)
	}
	return nil
}

func deadlineErr(d time.Duration) error {
	return fmt.Errorf("the wait of %v would end after the context deadline: %w", d, context.DeadlineExceeded)
}

// makeRoom makes room for a waiter of n permits, or returns an error
// wrapping Options.Full. With no cap the queue still holds at most
// MaxInt64, so that its count cannot wrap. Oldest first refuses the
// newcomer; newest first fails the oldest waiters until it fits.
func (q *Queue) makeRoom(n int64) error {
	lim := q.opts.Limit
	if lim == 0 {
		lim = 1<<63 - 1
	} else if n > lim {
		return fmt.Errorf("%w: %d permits asked, queue holds at most %d", q.opts.Full, n, lim)
	}
	cost := max(n, 1)
	// cost > lim-cost, not q.cost+cost > lim: the sum wraps for a cap near
	// MaxInt64. cost <= lim, so the loop ends with the queue empty at worst.
	for cost > lim-q.cost {
		if !q.opts.NewestFirst {
			return q.opts.Full
		}
		q.Fail(q.tail, q.opts.Full)
	}
	return nil
}

// push queues a new waiter of n permits in service order.
func (q *Queue) push(ctx context.Context, n int64) *Waiter {
	w := &Waiter{n: n, wake: make(chan struct{}, 1)}
	w.deadline, _ = ctx.Deadline()
	switch {
	case q.head == nil:
		q.head, q.tail = w, w
	case q.opts.NewestFirst:
		w.next = q.head
		q.head.prev = w
		q.head = w
	default:
		w.prev = q.tail
		q.tail.next = w
		q.tail = w
	}
	q.n++
	q.queued += n
	q.cost += max(n, 1)
	q.state.Add(1)
	if q.head == w {
		q.wakeAt = time.Time{} // the new head's own wait is not known yet
	}
	return w
}

// remove takes w out of the queue; if w headed it, the next waiter becomes
// the head and is poked to serve itself.
func (q *Queue) remove(w *Waiter) {
	wasHead := q.head == w
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
	q.n--
	q.queued -= w.n
	q.cost -= max(w.n, 1)
	q.state.Add(-1)
	if q.poked == w {
		q.poked = nil
	}
	if wasHead {
		q.wakeAt = time.Time{}
		if q.head != nil {
			poke(q.head)
		}
	}
}

// poke wakes w's wait; a poke is never lost (one is kept until received)
// nor waited for.
func poke(w *Waiter) {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Grant removes w, which the owner granted, and wakes it.
func (q *Queue) Grant(w *Waiter) {
	q.remove(w)
	w.done = true
	poke(w)
}

// Fail removes w and wakes it with err.
func (q *Queue) Fail(w *Waiter, err error) {
	q.remove(w)
	w.done, w.err = true, err
	poke(w)
}

// Leave removes w if it is still queued (a caller that served itself at the
// head, or gave up). The next waiter, if w headed the queue, is woken.
func (q *Queue) Leave(w *Waiter) {
	if !w.done {
		q.remove(w)
		w.done = true
	}
}

// FailEach fails, with the error errFor returns, every waiter for which
// errFor returns one (the requests a lowered limit made impossible).
func (q *Queue) FailEach(errFor func(n int64) error) {
	for w := q.head; w != nil; {
		next := w.next
		if err := errFor(w.n); err != nil {
			q.Fail(w, err)
		}
		w = next
	}
}

// Close fails every waiter with err, and makes Take fail with err from
// then on. Closing again does nothing.
func (q *Queue) Close(err error) {
	if q.closedErr != nil {
		return
	}
	q.closedErr = err
	q.state.Add(closedBit)
	for q.head != nil {
		q.Fail(q.head, err)
	}
}

// Serve grants waiters in service order while take grants them, at now.
// At the first it cannot grant it stops: it fails that head if the wait
// take reports (the head's own) would end after the head's deadline, and
// serves the next; otherwise it records when the head can be served
// (WakeAt; a negative wait is unknown) and pokes the head if that changed,
// so that it waits for the new instant.
func (q *Queue) Serve(now time.Time, take func(w *Waiter) (bool, time.Duration)) {
	for w := q.head; w != nil; w = q.head {
		ok, retry := take(w)
		if ok {
			q.Grant(w)
			continue
		}
		if !w.deadline.IsZero() && retry > 0 && w.deadline.Sub(now) < retry {
			w.retry = retry
			q.Fail(w, deadlineErr(retry))
			continue
		}
		q.wakeAt = time.Time{}
		if retry >= 0 {
			q.wakeAt = now.Add(retry)
		}
		if q.poked != w || !q.pokedAt.Equal(q.wakeAt) {
			q.poked, q.pokedAt = w, q.wakeAt
			poke(w)
		}
		return
	}
	q.wakeAt = time.Time{}
}

// Wait waits until w is done, or ctx ends, and returns w's error: nil when
// granted. It is called without the lock.
//
// While w heads the queue, Wait calls serve with the lock held: serve
// grants or fails waiters (w among them) through Serve, Grant or Fail.
// Until w is done Wait then waits, precisely, for WakeAt, or to be woken.
// A nil serve is a turn: Wait returns nil as soon as w heads the queue,
// still queued; the caller serves itself, then calls Leave.
//
// When ctx ends first, w leaves the queue and Wait returns ctx's error, unless
// w was granted first: a grant that won the race is kept (its permits were
// granted at a real instant), and Wait returns nil.
func (q *Queue) Wait(ctx context.Context, w *Waiter, serve func(now time.Time)) error {
	pt := q.opts.Timer
	defer pt.Stop()
	for {
		q.mu.Lock()
		var at time.Time
		if !w.done && q.head == w {
			if serve == nil {
				q.mu.Unlock()
				return nil
			}
			serve(time.Now())
			at = q.wakeAt
		}
		if w.done {
			q.mu.Unlock()
			return w.err
		}
		q.mu.Unlock()
		if pt.Until(ctx, w.wake, at, 0) == precise.Done {
			return q.cancel(ctx, w)
		}
	}
}

// cancel removes w after its context ended, unless it is done.
func (q *Queue) cancel(ctx context.Context, w *Waiter) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.done {
		return w.err
	}
	q.remove(w)
	w.done = true
	return ctx.Err()
}
