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
// nil seq yields nothing; a nil ctx panics at once (see the package
// documentation). The sequence can be ranged over more than once, each time
// anew.
func Limit[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter) stditer.Seq[V] {
	mustContext(ctx)
	return weighted(ctx, seq, lim, nil, nil)
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
	mustContext(ctx)
	var last error
	return weighted(ctx, seq, lim, nil, &last), func() error { return last }
}

// Limit2 is [Limit] for sequences of pairs: each pair costs one permit.
func Limit2[K, V any](ctx context.Context, seq stditer.Seq2[K, V], lim limiter.Limiter) stditer.Seq2[K, V] {
	mustContext(ctx)
	return limit2(ctx, seq, lim, nil)
}

// Limit2Err is [LimitErr] for sequences of pairs.
func Limit2Err[K, V any](ctx context.Context, seq stditer.Seq2[K, V], lim limiter.Limiter) (stditer.Seq2[K, V], func() error) {
	mustContext(ctx)
	var last error
	return limit2(ctx, seq, lim, &last), func() error { return last }
}

// pair is one value of a Seq2, passed through admit as a single value.
type pair[K, V any] struct {
	k K
	v V
}

// limit2 is Limit2, recording why each loop ended in *last if last is not nil.
func limit2[K, V any](ctx context.Context, seq stditer.Seq2[K, V], lim limiter.Limiter, last *error) stditer.Seq2[K, V] {
	if seq == nil {
		err := fmt.Errorf("%w: nil sequence", ErrInvalid)
		record(last, err)
		return func(func(K, V) bool) { record(last, err) }
	}
	return func(yield func(K, V) bool) {
		body := func(p pair[K, V]) bool { return yield(p.k, p.v) }
		run(ctx, lim, last, func(g *gate) {
			seq(func(k K, v V) bool {
				if g.lim == nil {
					return g.pass(1) && yield(k, v)
				}
				return admit(g, pair[K, V]{k, v}, 1, 1, body)
			})
		})
	}
}

// mustContext panics if ctx is nil. A nil Context is a programming error,
// reported as the standard library's context functions report it: with a
// panic, here at once, when the sequence is made, before anything is
// pulled from the upstream or asked of the limiter.
func mustContext(ctx context.Context) {
	if ctx == nil {
		panic("iter: nil Context")
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

// run runs one loop: it makes the loop's gate, runs loop with it, and then
// releases the lease of a body that panicked and records why the loop
// ended in *last, if last is not nil.
func run(ctx context.Context, lim limiter.Limiter, last *error, loop func(g *gate)) {
	g := newGate(ctx, lim)
	defer g.finish(last)
	loop(g)
}

// admit is the step every wrapper takes per yield when it has a limiter
// (with none, it takes gate.pass): it waits until v, which costs n permits
// and counts as values values, may pass (ctx is not done and g.lim granted
// the permits), then runs the loop body on it, holding the lease until the
// body returns. It returns the body's result, or false, with g.err set,
// when the loop must end instead.
//
// If the body panics, the loop's deferred finish releases the lease, kept
// in g.held for that. admit itself defers nothing: a deferred call would
// cost every value its frame setup, for the rare path. (The
// BenchmarkIter rows in bench/ hold the per-value cost of this shape.)
func admit[V any](g *gate, v V, n, values int, body func(V) bool) bool {
	if g.stopped() {
		return false
	}
	lease, err := g.lim.Acquire(g.ctx, n)
	if err != nil {
		g.refused(n, err)
		return false
	}
	g.held, g.holding = lease, true
	ok := body(v)
	g.holding = false
	lease.Release()
	g.item += values
	return ok
}

// gate is one loop's passage through the limiter: it checks ctx, holds the
// limiter and the lease of the value in the body, counts the values
// yielded and records why the loop ended. The per-value step is admit, or
// pass when there is no limiter.
type gate struct {
	ctx  context.Context
	done <-chan struct{} // nil for a context that is never done
	lim  limiter.Limiter // nil: no limit
	item int             // values yielded so far: the position of the next one
	err  error

	held    limiter.Lease // the lease of the value in the body, while holding
	holding bool
}

func newGate(ctx context.Context, lim limiter.Limiter) *gate {
	return &gate{ctx: ctx, done: ctx.Done(), lim: lim}
}

// stopped reports whether ctx is done, recording its error. The check of
// a context that is never done (context.Background) costs a compare.
func (g *gate) stopped() bool {
	return g.done != nil && g.ctxDone()
}

// pass lets values values through with no limiter: it reports whether ctx
// is still not done, and counts them if so.
func (g *gate) pass(values int) bool {
	if g.stopped() {
		return false
	}
	g.item += values
	return true
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

// refused records why n permits were refused.
func (g *gate) refused(n int, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		g.err = err // as Acquire returned it: errors.Is(err, ctx.Err()) holds
		return
	}
	g.err = fmt.Errorf("iter: value %d (%d permits): %w", g.item, n, err)
}

// finish ends a loop: it releases the lease of a body that panicked, and
// publishes why the loop ended, if last is not nil.
func (g *gate) finish(last *error) {
	if g.holding {
		g.holding = false
		g.held.Release() // the body panicked
	}
	record(last, g.err)
}
