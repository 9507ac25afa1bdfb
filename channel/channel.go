package channel

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/limiter"
)

// ErrClosed is returned by sends on a closed Chan, and by receives on a
// closed Chan whose buffer is empty. It wraps limiter.ErrClosed, so
// errors.Is(err, limiter.ErrClosed) holds as well; errors.Is(err,
// channel.ErrClosed) tells a closed Chan from a closed limiter.
var ErrClosed = fmt.Errorf("channel: closed: %w", limiter.ErrClosed)

// LimitError is TrySend's error when the limiter refuses the lease. It wraps
// the limiter's reason (limiter.ErrLimited, limiter.ErrQueueFull,
// limiter.ErrClosed, limiter.ErrExceedsLimit or limiter.ErrInvalidCount,
// matched with errors.Is) and carries its retry hint.
type LimitError struct {
	err   error
	retry time.Duration
}

// Error describes the refusal and, when known, when to retry.
func (e *LimitError) Error() string {
	if e.retry > 0 {
		return fmt.Sprintf("channel: send refused: %v (retry after %v)", e.err, e.retry)
	}
	return fmt.Sprintf("channel: send refused: %v", e.err)
}

// Unwrap returns the limiter's reason.
func (e *LimitError) Unwrap() error { return e.err }

// RetryAfter returns the limiter's hint (limiter.Lease.RetryAfter): the
// earliest wait after which the same send could be granted if nothing else
// took permits meanwhile, or 0 if that cannot be known.
func (e *LimitError) RetryAfter() time.Duration { return e.retry }

// Chan is a FIFO channel of T whose every buffered item holds a lease from
// a limiter.Limiter: a send takes the lease, and the receive that takes the
// item out releases it. See the package documentation for the model.
//
// A Chan must be made with New. Its methods are safe for concurrent use.
type Chan[T any] struct {
	lim limiter.Limiter // nil: no limit

	mu     sync.Mutex
	q      ring[T]
	held   int  // items taken out by Out views but not yet handed off
	nrecv  int  // receivers waiting on ready
	closed bool // also in cl.closed, read without the lock
	ready  chan struct{}
	drain  chan struct{} // closed by Drain, for the Out views holding an item; made on demand

	cl closing // cl.done is closed by Close
}

// New returns an open, empty Chan whose sends take their leases from lim.
// One limiter may serve many Chans (and streams, loops and pools) at once:
// a Concurrency limiter then bounds the items buffered in all of them
// together. A nil lim grants every send at once: the Chan is then an
// unbounded FIFO.
func New[T any](lim limiter.Limiter) *Chan[T] {
	return &Chan[T]{
		lim:   lim,
		ready: make(chan struct{}, 1),
		cl:    newClosing(),
	}
}

// Send sends v with a lease of one permit; it is SendN(ctx, v, 1).
func (c *Chan[T]) Send(ctx context.Context, v T) error { return c.SendN(ctx, v, 1) }

// SendN waits for a lease of n permits, in the limiter's queue order, and
// then buffers v with it. The lease is released when v is received (or
// discarded by Drain). n may be 0: the item then holds no permits, but the
// send still waits until the limiter has room for one. The weight is the
// item's own, so an item's bytes, say, can be its permits.
//
// It returns nil exactly when v was buffered. Otherwise v was not buffered
// and no permit is held: ErrClosed if the Chan is closed (also when Close
// comes while SendN waits), ctx's error if ctx ends first (errors.Is(err,
// ctx.Err()) holds; a wait the limiter knows would outlast ctx's deadline
// fails at once with context.DeadlineExceeded), or the limiter's error
// (limiter.ErrQueueFull, limiter.ErrExceedsLimit, limiter.ErrInvalidCount,
// limiter.ErrClosed).
//
// SendN first asks the limiter with TryAcquire, which grants a send that
// need not wait with no context at all. When it refuses, SendN waits in the
// limiter's Acquire with a context that is ctx, also cancelled by Close:
// for ctx context.Background or context.TODO, which have neither values,
// deadline nor cancellation, the Chan's own (done when it is closed),
// shared by every such send; otherwise one made with context.WithCancel
// and context.AfterFunc, cancelled when Acquire returns, so a limiter may
// keep it. (A limiter counts that first refusal among its Stats' Rejected.)
func (c *Chan[T]) SendN(ctx context.Context, v T, n int) error {
	mustContext(ctx)
	if c.cl.closed.Load() {
		return ErrClosed
	}
	var lease limiter.Lease
	if c.lim != nil {
		var err error
		if lease, err = c.acquire(ctx, n); err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() == nil && c.cl.closed.Load() {
				return ErrClosed
			}
			return err
		}
	} else if n < 0 {
		return fmt.Errorf("%w: %d", limiter.ErrInvalidCount, n)
	}
	return c.put(v, &lease)
}

// acquire takes a lease of n permits from c.lim for SendN.
func (c *Chan[T]) acquire(ctx context.Context, n int) (limiter.Lease, error) {
	if ctx == context.Background() || ctx == context.TODO() {
		return c.lim.Acquire(c.cl.ctx, n)
	}
	if err := ctx.Err(); err != nil {
		return limiter.Lease{}, err // as Acquire would: a done context is never granted
	}
	if l := c.lim.TryAcquire(n); l.Granted() {
		return l, nil
	}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.cl.ctx, cancel)
	defer func() {
		stop()
		cancel()
	}()
	return c.lim.Acquire(wctx, n)
}

// closing is a Chan's closing as its sends see it.
type closing struct {
	closed atomic.Bool        // set by Close before ctx is cancelled: the fast check
	ctx    context.Context    // no values, no deadline; cancelled by Close
	cancel context.CancelFunc // cancels ctx
	done   <-chan struct{}    // ctx.Done(), made with the Chan
}

func newClosing() closing {
	ctx, cancel := context.WithCancel(context.Background())
	// Done is called here, so that its channel is made with the Chan
	// (outside any synctest bubble the Chan was made outside of).
	return closing{ctx: ctx, cancel: cancel, done: ctx.Done()}
}

// close marks the Chan closed, then ends the context of every waiting send.
func (cl *closing) close() {
	cl.closed.Store(true)
	cl.cancel()
}

// TrySend sends v with a lease of one permit if the limiter grants it now;
// it is TrySendN(v, 1).
func (c *Chan[T]) TrySend(v T) error { return c.TrySendN(v, 1) }

// TrySendN buffers v with a lease of n permits if the limiter grants them
// now (limiter.Limiter.TryAcquire). It never waits. It returns nil exactly
// when v was buffered; ErrClosed if the Chan is closed; and otherwise a
// *LimitError that wraps the limiter's reason (errors.Is(err,
// limiter.ErrLimited), limiter.ErrQueueFull, limiter.ErrClosed, ...) and
// whose RetryAfter method says when to try again, if the limiter knows.
func (c *Chan[T]) TrySendN(v T, n int) error {
	if c.cl.closed.Load() {
		return ErrClosed
	}
	var lease limiter.Lease
	if c.lim != nil {
		lease = c.lim.TryAcquire(n)
		if !lease.Granted() {
			return &LimitError{err: lease.Err(), retry: lease.RetryAfter()}
		}
	} else if n < 0 {
		return &LimitError{err: fmt.Errorf("%w: %d", limiter.ErrInvalidCount, n)}
	}
	return c.put(v, &lease)
}

// mustContext panics if ctx is nil. A nil Context is a programming error,
// reported as the standard library's context functions report it: with a
// panic, here at once, before a lock is taken or anything changed, so the
// Chan stays usable by whoever recovers.
func mustContext(ctx context.Context) {
	if ctx == nil {
		panic("channel: nil Context")
	}
}

// put buffers v with its lease, or releases the lease if c was closed
// meanwhile. (The lease is passed by pointer: each copy of a Lease costs.)
func (c *Chan[T]) put(v T, lease *limiter.Lease) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		lease.Release()
		return ErrClosed
	}
	c.q.push(v, lease)
	if c.nrecv > 0 {
		c.signal()
	}
	c.mu.Unlock()
	return nil
}

// signal wakes one waiting receiver. Called with c.mu held.
func (c *Chan[T]) signal() {
	select {
	case c.ready <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// Recv returns the oldest buffered item and releases its lease. If an item
// is buffered, Recv returns it at once, whether or not ctx is done; if not,
// it waits for one. It fails with ErrClosed once the Chan is closed and its
// buffer empty, and with ctx's error if ctx ends while it waits.
func (c *Chan[T]) Recv(ctx context.Context) (T, error) {
	v, lease, err := c.RecvLease(ctx)
	lease.Release()
	return v, err
}

// RecvLease is [Chan.Recv] that hands the item's lease to the caller
// instead of releasing it: the receiver reports on it what became of the
// work the item stands for ([limiter.Lease.Report], which an adaptive
// limiter learns from), then releases it, once. With a [limiter.Concurrency]
// the item so counts against the limit until the work on it is done, not
// only until it is received. On an error the lease is the zero Lease.
func (c *Chan[T]) RecvLease(ctx context.Context) (T, limiter.Lease, error) {
	mustContext(ctx)
	c.mu.Lock()
	if c.q.n > 0 && c.nrecv == 0 { // the fast path: an item, and no one to wake
		var e entry[T]
		c.q.popInto(&e)
		c.mu.Unlock()
		return e.v, e.lease, nil
	}
	c.mu.Unlock()
	e, _, err := c.take(ctx, false)
	if err != nil {
		var zero T
		return zero, limiter.Lease{}, err
	}
	return e.v, e.lease, nil
}

// take waits for the oldest entry and removes it. With hold (for an Out
// view), it counts the entry in c.held and returns the channel that the next
// Drain closes.
func (c *Chan[T]) take(ctx context.Context, hold bool) (entry[T], chan struct{}, error) {
	c.mu.Lock()
	for {
		if c.q.n > 0 {
			e := c.q.pop()
			var drain chan struct{}
			if hold {
				c.held++
				if c.drain == nil {
					c.drain = make(chan struct{})
				}
				drain = c.drain
			}
			if c.q.n > 0 && c.nrecv > 0 {
				c.signal() // pass the wake-up on: another receiver may be waiting for this one
			}
			c.mu.Unlock()
			return e, drain, nil
		}
		if c.closed {
			c.mu.Unlock()
			return entry[T]{}, nil, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			c.mu.Unlock()
			return entry[T]{}, nil, err
		}
		c.nrecv++
		c.mu.Unlock()
		select {
		case <-c.ready:
		case <-c.cl.done:
		case <-ctx.Done():
		}
		c.mu.Lock()
		c.nrecv--
	}
}

// TryRecv returns the oldest buffered item and true, releasing its lease,
// if an item is buffered; otherwise the zero T and false. It never waits.
func (c *Chan[T]) TryRecv() (T, bool) {
	c.mu.Lock()
	if c.q.n == 0 {
		c.mu.Unlock()
		var zero T
		return zero, false
	}
	e := c.q.pop()
	c.mu.Unlock()
	e.lease.Release()
	return e.v, true
}

// All returns an iterator over the received items, oldest first: each step
// is a Recv (which releases the item's lease before the loop body runs). The
// loop ends when the Chan is closed and drained, or when ctx is done (checked
// before each item); breaking out of it leaves the remaining items buffered.
// Check ctx.Err() after the loop to tell the two endings apart.
func (c *Chan[T]) All(ctx context.Context) iter.Seq[T] {
	mustContext(ctx)
	return func(yield func(T) bool) {
		for ctx.Err() == nil {
			v, err := c.Recv(ctx)
			if err != nil || !yield(v) {
				return
			}
		}
	}
}

// Len returns the number of items buffered: sent and not yet received or
// discarded, including the item each Out view holds ready for its hand-off.
// It equals the number of leases the Chan holds, except during a send or
// receive in progress.
func (c *Chan[T]) Len() int {
	c.mu.Lock()
	n := c.q.n + c.held
	c.mu.Unlock()
	return n
}

// Close closes the Chan. Later sends fail with ErrClosed, and so do sends
// waiting in the limiter, at once: their waits end and they hold no permit.
// Items already buffered stay buffered, each holding its lease, until
// received (receivers drain them, then get ErrClosed) or discarded by Drain.
// Close never discards items: call Drain after it when no one will receive
// them, so that their leases go back to the limiter. Close returns nil, also
// when called again.
func (c *Chan[T]) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.cl.close()
	c.mu.Unlock()
	return nil
}

// Drain discards every buffered item, releasing each one's lease once, and
// returns how many it discarded. An item an Out view holds for its hand-off
// is not counted: the view discards it (releasing its lease) unless a
// receiver has taken it first. Drain works on an open Chan too, but a Chan
// that nobody will receive from any more should be closed first, or new
// sends refill it. Close followed by Drain releases every lease the Chan
// holds or will hold: the usual cleanup is
//
//	defer func() { c.Close(); c.Drain() }()
func (c *Chan[T]) Drain() int {
	c.mu.Lock()
	q := c.q
	c.q = ring[T]{}
	if c.drain != nil {
		close(c.drain)
		c.drain = nil
	}
	c.mu.Unlock()
	n := q.n
	for i := range n {
		q.buf[(q.head+i)&(len(q.buf)-1)].lease.Release()
	}
	return n
}
