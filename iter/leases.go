package iter

import (
	"context"
	"fmt"
	stditer "iter"

	"github.com/rategate/rategate/limiter"
)

// Leases is [Limit] with each value's lease beside it, so that the loop
// body can tell the limiter what became of its work: an adaptive limiter
// (package adaptive) learns from [limiter.Lease.Report] how fast, or how
// many at once, the other side takes the calls. As with Limit, each value
// costs one permit, and its lease is held while the body runs and released
// when the body returns: the body reports on it, and must neither release
// nor settle it.
//
//	for url, lease := range iter.Leases(ctx, urls, lim) {
//		start := time.Now()
//		err := fetch(ctx, url) // wraps limiter.ErrThrottled on a 429
//		lease.Report(limiter.OutcomeOf(err), time.Since(start))
//	}
//
// With a nil lim, each lease is the zero Lease, on which Report does
// nothing. The loop ends as a Limit loop does; use [LeasesErr] to learn why.
// Reporting allocates nothing.
func Leases[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter) stditer.Seq2[V, limiter.Lease] {
	mustContext(ctx)
	return leases(ctx, seq, lim, nil)
}

// LeasesErr is [Leases], and also returns a function that reports why the
// last loop over the sequence ended, as [LimitErr] does.
func LeasesErr[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter) (stditer.Seq2[V, limiter.Lease], func() error) {
	mustContext(ctx)
	var last error
	return leases(ctx, seq, lim, &last), func() error { return last }
}

// leases is Leases, recording why each loop ended in *last if last is not
// nil.
func leases[V any](ctx context.Context, seq stditer.Seq[V], lim limiter.Limiter, last *error) stditer.Seq2[V, limiter.Lease] {
	if seq == nil {
		err := fmt.Errorf("%w: nil sequence", ErrInvalid)
		record(last, err)
		return func(func(V, limiter.Lease) bool) { record(last, err) }
	}
	return func(yield func(V, limiter.Lease) bool) {
		run(ctx, lim, last, func(g *gate) {
			// admit sets g.held to the value's lease before it runs the body.
			body := func(v V) bool { return yield(v, g.held) }
			seq(func(v V) bool {
				if g.lim == nil {
					return g.pass(1) && yield(v, limiter.Lease{})
				}
				return admit(g, v, 1, 1, body)
			})
		})
	}
}
