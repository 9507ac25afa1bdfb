package iter

import (
	"context"
	"fmt"
	stditer "iter"

	"github.com/rategate/rategate/limiter"
)

// Batch returns a sequence that gathers the values of seq, in order, into
// slices of k values (the last one may be shorter) and yields each slice
// only once lim has granted it one permit per value in it. A loop that
// writes records in batches so keeps to a per-record rate; pair it with a
// limiter that refills in small steps to smooth bursts: a token bucket of
// Rate 100/s and Burst 20 with k = 20 releases 20 records every 200 ms
// rather than 100 at once each second.
//
// Each slice is newly allocated and belongs to the loop body. The lease of
// a slice is held while the body runs on it (see [Limit]). k must not exceed
// what lim can grant at once (a token bucket's Burst, a window's Limit):
// otherwise the loop ends with [limiter.ErrExceedsLimit] at the first slice
// larger than that.
//
// The loop ends as a [Limit] loop does; values gathered into a slice that
// is not yielded (ctx ended, lim refused) are dropped. When ctx ends while
// a slice is being gathered, the loop ends at the next value, without
// pulling more from seq. Use
// [BatchErr] to learn why the loop ended. A k below 1 or a nil seq yields
// nothing; a nil ctx panics at once.
func Batch[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, k int) stditer.Seq[[]V] {
	mustContext(ctx)
	return batch(ctx, seq, lim, k, nil)
}

// BatchErr is [Batch], and also returns a function that reports why the last
// loop ended, as [LimitErr] does; a refusal names the position of the
// slice's first value. For a k below 1 or a nil seq it reports [ErrInvalid].
func BatchErr[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, k int) (stditer.Seq[[]V], func() error) {
	mustContext(ctx)
	var last error
	return batch(ctx, seq, lim, k, &last), func() error { return last }
}

// batch is Batch, recording why each loop ended in *last if last is not nil.
func batch[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, k int, last *error) stditer.Seq[[]V] {
	switch {
	case seq == nil:
		return empty[[]V](last, fmt.Errorf("%w: nil sequence", ErrInvalid))
	case k < 1:
		return empty[[]V](last, fmt.Errorf("%w: batch size %d, must be at least 1", ErrInvalid, k))
	}
	return func(yield func([]V) bool) {
		run(ctx, lim, last, func(g *gate) { gather(g, seq, k, yield) })
	}
}

// gather runs one Batch loop: it gathers seq's values into slices of k and
// passes each through admit, at one permit per value.
func gather[V any](g *gate, seq stditer.Seq[V], k int, yield func([]V) bool) {
	// The first slice's capacity is k, unless k is so large that seq may
	// well hold fewer values (append grows it then); once a slice has
	// filled, the next ones are made to hold k.
	size := min(k, 1024)
	var buf []V
	flush := func() bool {
		b := buf
		buf = nil
		if g.lim == nil {
			return g.pass(len(b)) && yield(b)
		}
		return admit(g, b, len(b), len(b), yield)
	}
	ended := false // the loop ended before seq did
	seq(func(v V) bool {
		if g.stopped() {
			ended = true
			return false
		}
		if buf == nil {
			buf = make([]V, 0, size)
		}
		buf = append(buf, v)
		if len(buf) < k {
			return true
		}
		size = k
		ended = !flush()
		return !ended
	})
	if !ended && len(buf) > 0 {
		flush()
	}
}
