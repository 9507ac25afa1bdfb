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
	return limit(ctx, seq, lim, nil)
}

// LimitErr is [Limit], and also returns a function that reports why the last
// loop over the sequence ended: nil when seq ran out or the body broke out;
// ctx's error (or, when lim foresaw that the next grant would come after
// ctx's deadline, an error matching context.DeadlineExceeded) when ctx ended;
// otherwise lim's refusal wrapped with the value's position, matching
// limiter.ErrClosed, limiter.ErrQueueFull and so on under errors.Is. Call it
// after the loop, from the goroutine that ran it. The sequence and its
// function share that one result: goroutines that range at once should each
// call LimitErr for a pair of their own (the plain forms, which report
// nothing, can be shared).
func LimitErr[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter) (stditer.Seq[V], func() error) {
	var last error
	return limit(ctx, seq, lim, &last), func() error { return last }
}

// limit is Limit, recording why each loop ended in *last if last is not nil.
func limit[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, last *error) stditer.Seq[V] {
	if seq == nil {
		return empty[V](last, fmt.Errorf("%w: nil sequence", ErrInvalid))
	}
	return func(yield func(V) bool) {
		g := newGate(ctx, lim)
		defer g.finish(last)
		seq(func(v V) bool {
			if g.done != nil && g.ctxDone() {
				return false
			}
			if g.lim == nil {
				g.item++
				return yield(v)
			}
			// Acquire is called here rather than in a method of g: a
			// Lease returned through a function that is not inlined is
			// copied back 16 bytes at a time after its fields were stored
			// one by one, a store-forwarding stall of some 15 ns.
			lease, err := g.lim.Acquire(g.ctx, 1)
			if err != nil {
				g.refused(1, err)
				return false
			}
			released := false
			defer func() {
				if !released {
					lease.Release() // the body panicked
				}
			}()
			ok := yield(v)
			released = true
			lease.Release()
			g.item++
			return ok
		})
	}
}

// Limit2 is [Limit] for sequences of pairs: each pair costs one permit.
func Limit2[K, V any](ctx context.Context, seq stditer.Seq2[K, V], lim limiter.Limiter) stditer.Seq2[K, V] {
	return limit2(ctx, seq, lim, nil)
}

// Limit2Err is [LimitErr] for sequences of pairs.
func Limit2Err[K, V any](ctx context.Context, seq stditer.Seq2[K, V], lim limiter.Limiter) (stditer.Seq2[K, V], func() error) {
	var last error
	return limit2(ctx, seq, lim, &last), func() error { return last }
}

// limit2 is Limit2, recording why each loop ended in *last if last is not nil.
func limit2[K, V any](ctx context.Context, seq stditer.Seq2[K, V], lim limiter.Limiter, last *error) stditer.Seq2[K, V] {
	if seq == nil {
		err := fmt.Errorf("%w: nil sequence", ErrInvalid)
		record(last, err)
		return func(func(K, V) bool) { record(last, err) }
	}
	return func(yield func(K, V) bool) {
		g := newGate(ctx, lim)
		defer g.finish(last)
		seq(func(k K, v V) bool {
			if g.done != nil && g.ctxDone() {
				return false
			}
			if g.lim == nil {
				g.item++
				return yield(k, v)
			}
			// Acquire is called here rather than in a method of g: a
			// Lease returned through a function that is not inlined is
			// copied back 16 bytes at a time after its fields were stored
			// one by one, a store-forwarding stall of some 15 ns.
			lease, err := g.lim.Acquire(g.ctx, 1)
			if err != nil {
				g.refused(1, err)
				return false
			}
			released := false
			defer func() {
				if !released {
					lease.Release() // the body panicked
				}
			}()
			ok := yield(k, v)
			released = true
			lease.Release()
			g.item++
			return ok
		})
	}
}

// empty returns a sequence that yields nothing and records err, at once
// (so that an Err form's function reports an invalid argument before any
// loop) and after each loop.
func empty[V any](last *error, err error) stditer.Seq[V] {
	record(last, err)
	return func(func(V) bool) { record(last, err) }
}

// record stores why a loop ended in *last, if the loop has an Err form's
// function to report it (last is not nil).
func record(last *error, err error) {
	if last != nil {
		*last = err
	}
}

// gate is one loop's passage through the limiter: it checks ctx, waits for
// each value's permits and records why the loop ended.
//
// The lease of the value in the body is kept by the caller, in a local
// variable released when the body returns (and by a deferred call if the
// body panics), not in the gate: a Lease copied into the heap right after
// Acquire returned it costs a store-forwarding stall (its fields are stored
// one by one, then read back 16 bytes at a time). For the same reason the
// per-value paths of Limit, Limit2 and Weighted call Acquire themselves;
// Batch, which asks once per slice, uses pass and yield.
type gate struct {
	ctx  context.Context
	done <-chan struct{} // nil for a context that is never done
	lim  limiter.Limiter // nil: no limit
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
// a context that is never done (context.Background) costs a compare.
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

// acquire waits for n permits from g.lim. It returns false, with g.err set,
// when they are refused and the loop must end.
func (g *gate) acquire(n int) (limiter.Lease, bool) {
	lease, err := g.lim.Acquire(g.ctx, n)
	if err != nil {
		g.refused(n, err)
		return limiter.Lease{}, false
	}
	return lease, true
}

// pass waits until a value (or a batch) costing n permits may be yielded:
// ctx is not done and g.lim (if any) granted them. It returns false, with
// g.err set, when the loop must end instead.
func (g *gate) pass(n int) (limiter.Lease, bool) {
	if g.stopped() {
		return limiter.Lease{}, false
	}
	if g.lim == nil {
		return limiter.Lease{}, true
	}
	return g.acquire(n)
}

// yield runs the loop body on what just passed, holding its lease until the
// body returns or panics, and counts its n values.
func (g *gate) yield(lease limiter.Lease, n int, body func() bool) bool {
	released := false
	defer func() {
		if !released {
			lease.Release() // the body panicked
		}
	}()
	ok := body()
	released = true
	lease.Release()
	g.item += n
	return ok
}

// refused records why n permits were refused.
func (g *gate) refused(n int, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		g.err = err // as Acquire returned it: errors.Is(err, ctx.Err()) holds
		return
	}
	g.err = fmt.Errorf("iter: value %d (%d permits): %w", g.item, n, err)
}

// finish ends a loop: it publishes why the loop ended, if last is not nil.
func (g *gate) finish(last *error) {
	record(last, g.err)
}
