package iter

import (
	"context"
	"errors"
	"fmt"
	stditer "iter"

	"github.com/rategate/rategate/limiter"
)

// ErrInvalid is reported by the Err forms for an argument that makes a loop
// impossible: a nil sequence, a nil cost function, a batch size below 1.
// Such a loop yields nothing. Test for it with errors.Is.
var ErrInvalid = errors.New("iter: invalid argument")

// Limit returns a sequence that yields the values of seq in order, each one
// only once lim has granted it one permit: a range loop over it runs its body
// no more often than lim allows. The lease is held while the body runs and
// released when it returns, so a [limiter.Concurrency] shared with other
// goroutines bounds the bodies running at once.
//
// The loop ends when seq ends, when the body breaks out (which stops seq at
// once), when ctx is done, when lim foresees that the next permit would come
// after ctx's deadline, or when lim refuses for good (closed, queue full).
// It ends quietly: ctx.Err() after the loop tells only whether ctx ended;
// use [LimitErr] to learn why the loop ended. A nil lim means no limit; a
// nil seq yields nothing. The sequence can be ranged over more than once,
// each time anew.
func Limit[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter) stditer.Seq[V] {
	s, _ := LimitErr(ctx, seq, lim)
	return s
}

// LimitErr is [Limit], and also returns a function that reports why the last
// loop over the sequence ended: nil when seq ran out or the body broke out;
// ctx's error (or, when lim foresaw that the next grant would come after
// ctx's deadline, an error matching context.DeadlineExceeded) when ctx ended;
// otherwise lim's refusal wrapped with the value's position, matching
// limiter.ErrClosed, limiter.ErrQueueFull and so on under errors.Is. Call it
// after the loop, from the goroutine that ran it.
func LimitErr[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter) (stditer.Seq[V], func() error) {
	var last error
	errf := func() error { return last }
	if seq == nil {
		return empty[V](&last, fmt.Errorf("%w: nil sequence", ErrInvalid)), errf
	}
	return func(yield func(V) bool) {
		g := newGate(ctx, lim)
		defer g.finish(&last)
		seq(func(v V) bool {
			// g.enter(1), by hand: the compiler does not inline it.
			if g.done != nil && g.ctxDone() || g.lim != nil && !g.acquire(1) {
				return false
			}
			ok := yield(v)
			g.leave(1)
			return ok
		})
	}, errf
}

// Limit2 is [Limit] for sequences of pairs: each pair costs one permit.
func Limit2[K, V any](ctx context.Context, seq stditer.Seq2[K, V], lim limiter.Limiter) stditer.Seq2[K, V] {
	s, _ := Limit2Err(ctx, seq, lim)
	return s
}

// Limit2Err is [LimitErr] for sequences of pairs.
func Limit2Err[K, V any](ctx context.Context, seq stditer.Seq2[K, V], lim limiter.Limiter) (stditer.Seq2[K, V], func() error) {
	var last error
	errf := func() error { return last }
	if seq == nil {
		err := fmt.Errorf("%w: nil sequence", ErrInvalid)
		return func(func(K, V) bool) { last = err }, errf
	}
	return func(yield func(K, V) bool) {
		g := newGate(ctx, lim)
		defer g.finish(&last)
		seq(func(k K, v V) bool {
			// g.enter(1), by hand: the compiler does not inline it.
			if g.done != nil && g.ctxDone() || g.lim != nil && !g.acquire(1) {
				return false
			}
			ok := yield(k, v)
			g.leave(1)
			return ok
		})
	}, errf
}

// empty returns a sequence that yields nothing and reports err.
func empty[V any](last *error, err error) stditer.Seq[V] {
	return func(func(V) bool) { *last = err }
}

// gate is one loop's passage through the limiter: it waits for each value's
// permits, holds the lease while the body runs, and records why the loop
// ended.
type gate struct {
	ctx  context.Context
	done <-chan struct{} // nil for a context that is never done
	lim  limiter.Limiter // nil: no limit
	held limiter.Lease   // the lease of the value in the body, released when it returns
	item int             // values yielded so far: the position of the next one
	err  error
}

func newGate(ctx context.Context, lim limiter.Limiter) *gate {
	if ctx == nil {
		ctx = context.Background()
	}
	return &gate{ctx: ctx, done: ctx.Done(), lim: lim}
}

// stopped reports whether ctx is done, recording its error. The check of
// a context that is never done (context.Background) is inlined away.
func (g *gate) stopped() bool {
	return g.done != nil && g.ctxDone()
}

//go:noinline
func (g *gate) ctxDone() bool {
	select {
	case <-g.done:
		g.err = g.ctx.Err()
		return true
	default:
		return false
	}
}

// enter waits until the next value (or batch) may be yielded: ctx is not
// done and lim granted n permits. It returns false, with g.err set, when the
// loop must end instead.
func (g *gate) enter(n int) bool {
	return !(g.done != nil && g.ctxDone()) && (g.lim == nil || g.acquire(n))
}

func (g *gate) acquire(n int) bool {
	lease, err := g.lim.Acquire(g.ctx, n)
	if err != nil {
		g.refused(n, err)
		return false
	}
	g.held = lease
	return true
}

// refused records why n permits were refused.
func (g *gate) refused(n int, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		g.err = err // as Acquire returned it: errors.Is(err, ctx.Err()) holds
		return
	}
	g.err = fmt.Errorf("iter: value %d (%d permits): %w", g.item, n, err)
}

// leave releases the lease of the body that just returned, which had n
// values.
func (g *gate) leave(n int) {
	if g.lim != nil {
		g.release()
	}
	g.item += n
}

// release releases the lease held, if any.
func (g *gate) release() {
	l := g.held
	g.held = limiter.Lease{}
	l.Release()
}

// finish ends a loop: it releases a lease still held (the body panicked)
// and publishes why the loop ended.
func (g *gate) finish(last *error) {
	g.release()
	*last = g.err
}
