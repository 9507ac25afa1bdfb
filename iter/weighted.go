package iter

import (
	"context"
	"fmt"
	stditer "iter"

	"github.com/rategate/rategate/limiter"
)

// Weighted returns a sequence that yields the values of seq in order, each
// one only once lim has granted it cost(v) permits: a loop can so respect
// "20,000 request units per second" over items that cost different amounts,
// or, with a limiter whose permits are bytes, a byte rate.
//
// cost is called once per value, before its permits are asked for. A value
// of cost 0 takes no permits but, as limiter.Acquire(ctx, 0) does, waits
// until at least one permit could be granted. A negative cost ends the loop
// with [limiter.ErrInvalidCount], and a cost above what lim can grant at
// once (a token bucket's Burst, a window's Limit) ends it with
// [limiter.ErrExceedsLimit], at that value: neither is ever yielded. With a
// [limiter.Concurrency], the value's cost is held while the body runs on it,
// so loops sharing the limiter keep the total cost in progress under its
// Limit.
//
// The loop ends as a [Limit] loop does; use [WeightedErr] to learn why.
// A nil cost or seq yields nothing.
func Weighted[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, cost func(V) int) stditer.Seq[V] {
	return weighted(ctx, seq, lim, cost, nil)
}

// WeightedErr is [Weighted], and also returns a function that reports why
// the last loop ended, as [LimitErr] does; a refusal names the value's
// position and cost. For a nil cost or seq it reports [ErrInvalid].
func WeightedErr[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, cost func(V) int) (stditer.Seq[V], func() error) {
	var last error
	return weighted(ctx, seq, lim, cost, &last), func() error { return last }
}

// weighted is Weighted, recording why each loop ended in *last if last is
// not nil.
func weighted[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, cost func(V) int, last *error) stditer.Seq[V] {
	switch {
	case seq == nil:
		return empty[V](last, fmt.Errorf("%w: nil sequence", ErrInvalid))
	case cost == nil:
		return empty[V](last, fmt.Errorf("%w: nil cost function", ErrInvalid))
	}
	return func(yield func(V) bool) {
		g := newGate(ctx, lim)
		defer g.finish(last)
		seq(func(v V) bool {
			n := cost(v)
			if n < 0 {
				// Checked here, so that a nil (unlimited) lim refuses it too.
				g.refused(n, limiter.ErrInvalidCount)
				return false
			}
			if g.stopped() {
				return false
			}
			if g.lim == nil {
				g.item++
				return yield(v)
			}
			// As in Limit: Acquire here, the lease in a local variable.
			lease, err := g.lim.Acquire(g.ctx, n)
			if err != nil {
				g.refused(n, err)
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
