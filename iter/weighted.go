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
// A nil cost or seq yields nothing; a nil ctx panics at once.
func Weighted[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, cost func(V) int) stditer.Seq[V] {
	mustContext(ctx)
	if cost == nil {
		return empty[V](nil, nil)
	}
	return weighted(ctx, seq, lim, cost, nil)
}

// WeightedErr is [Weighted], and also returns a function that reports why
// the last loop ended, as [LimitErr] does; a refusal names the value's
// position and cost. For a nil cost or seq it reports [ErrInvalid].
func WeightedErr[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, cost func(V) int) (stditer.Seq[V], func() error) {
	mustContext(ctx)
	var last error
	if cost == nil {
		return empty[V](&last, fmt.Errorf("%w: nil cost function", ErrInvalid)), func() error { return last }
	}
	return weighted(ctx, seq, lim, cost, &last), func() error { return last }
}

// weighted is Weighted, and with a nil cost Limit (one permit per value);
// it records why each loop ended in *last if last is not nil.
func weighted[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, cost func(V) int, last *error) stditer.Seq[V] {
	if seq == nil {
		return empty[V](last, fmt.Errorf("%w: nil sequence", ErrInvalid))
	}
	return func(yield func(V) bool) {
		run(ctx, lim, last, func(g *gate) {
			seq(func(v V) bool {
				n := 1
				if cost != nil {
					if n = cost(v); n < 0 {
						// Checked here, so that a nil (unlimited) lim refuses it too.
						g.refused(n, limiter.ErrInvalidCount)
						return false
					}
				}
				if g.lim == nil {
					return g.pass(1) && yield(v)
				}
				return admit(g, v, n, 1, yield)
			})
		})
	}
}
