package bench

// BenchmarkIter is the per-value cost of package iter's range loops: one op
// is one value passing through a loop over an endless sequence, so ns/op is
// ns per value and allocs/op is allocations per value (the few made when the
// loop starts are outside the timed loop). iter/bare is the floor, a plain
// range-over-func loop; iter/Limit-nil and its siblings use no limiter (nil:
// no limit), iter/Limit-noop a Limiter that grants everything without a clock
// or an atomic, and the others this module's limiters configured never to
// refuse. acquire-loop/* is the hand-written loop that Limit replaces:
// lim.Acquire, the body, lease.Release; acquire-returned-noop is the same
// loop with the Lease handed back through a function that is not inlined.
//
// iter's Limit, Limit2, Weighted and Batch share one per-value step (admit,
// in iter/iter.go). Its shape was chosen on these rows, CPU time per value
// (perf stat task-clock, 1e7 values, GOMAXPROCS 1, medians of 7 runs
// alternated between builds, 2 vCPUs shared with other work) against the
// earlier iter that wrote the step out three times:
//
//	row                    three copies   admit
//	Limit-nil                  10.5        10.9
//	Limit-nil-background        6.2         7.3
//	Limit-noop                 23.1        19.9
//	Limit-concurrency          43.9        43.6
//	Limit-tokenbucket          81.1        75.2
//	Limit2-nil                 10.8        12.9
//	Limit2-noop                27.7        25.0
//	Weighted-nil               16.1        16.4
//	Weighted-noop              19.5        19.3
//	Batch100-nil               19.6        20.3
//
// (ns per value; repeated runs move each figure by 1-3 ns). A helper with a
// deferred Release cost 2-5 ns more per value with a limiter, and 2-3 ns
// more with none while the unlimited path went through it too. The Lease
// handed back through a call that is not inlined, the shape the three
// copies avoided, is real: acquire-returned-noop 26-29 ns against
// acquire-loop-noop 15-16 ns.

import (
	"context"
	"testing"

	"github.com/rategate/rategate/iter"
	"github.com/rategate/rategate/limiter"
)

// iterNaturals is an endless sequence: 0, 1, 2, …
func iterNaturals(yield func(int) bool) {
	for i := 0; ; i++ {
		if !yield(i) {
			return
		}
	}
}

func iterNaturalPairs(yield func(int, int) bool) {
	for i := 0; ; i++ {
		if !yield(i, i) {
			return
		}
	}
}

// iterNoop grants every request at once: the cheapest possible Limiter, the
// floor for any limiter passed to iter.
type iterNoop struct{}

func (iterNoop) TryAcquire(n int) limiter.Lease { return limiter.NewLease(n, nil) }
func (iterNoop) Acquire(_ context.Context, n int) (limiter.Lease, error) {
	return limiter.NewLease(n, nil), nil
}

var iterSink int

// iterAcquire returns lim's lease through a call that is not inlined.
//
//go:noinline
func iterAcquire(ctx context.Context, lim limiter.Limiter, n int) (limiter.Lease, bool) {
	lease, err := lim.Acquire(ctx, n)
	if err != nil {
		return limiter.Lease{}, false
	}
	return lease, true
}

func BenchmarkIter(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		sum := 0
		for v := range iterNaturals {
			sum += v
			if !b.Loop() {
				break
			}
		}
		iterSink = sum
	})
	limits := []struct {
		name string
		lim  func() limiter.Limiter
	}{
		{"nil", func() limiter.Limiter { return nil }},
		{"noop", func() limiter.Limiter { return iterNoop{} }},
		{"concurrency", func() limiter.Limiter { return admitConcurrency() }},
		{"tokenbucket", func() limiter.Limiter { return admitTokenBucket() }},
	}
	for _, l := range limits {
		b.Run("Limit-"+l.name, func(b *testing.B) {
			sum := 0
			for v := range iter.Limit(b.Context(), iterNaturals, l.lim()) {
				sum += v
				if !b.Loop() {
					break
				}
			}
			iterSink = sum
		})
	}
	b.Run("Limit-nil-background", func(b *testing.B) {
		// context.Background is never done: no per-value check of ctx.
		sum := 0
		for v := range iter.Limit(context.Background(), iterNaturals, nil) {
			sum += v
			if !b.Loop() {
				break
			}
		}
		iterSink = sum
	})
	b.Run("Limit2-nil", func(b *testing.B) {
		sum := 0
		for k, v := range iter.Limit2(b.Context(), iterNaturalPairs, nil) {
			sum += k + v
			if !b.Loop() {
				break
			}
		}
		iterSink = sum
	})
	b.Run("Weighted-nil", func(b *testing.B) {
		sum := 0
		for v := range iter.Weighted(b.Context(), iterNaturals, nil, func(int) int { return 1 }) {
			sum += v
			if !b.Loop() {
				break
			}
		}
		iterSink = sum
	})
	b.Run("Batch100-nil", func(b *testing.B) {
		// One op is one value: the loop body runs once per 100.
		sum, n := 0, 0
		for batch := range iter.Batch(b.Context(), iterNaturals, nil, 100) {
			for _, v := range batch {
				sum += v
				if !b.Loop() {
					iterSink = sum
					return
				}
				n++
			}
		}
	})
	b.Run("Limit2-noop", func(b *testing.B) {
		sum := 0
		for k, v := range iter.Limit2(b.Context(), iterNaturalPairs, iterNoop{}) {
			sum += k + v
			if !b.Loop() {
				break
			}
		}
		iterSink = sum
	})
	b.Run("Weighted-noop", func(b *testing.B) {
		sum := 0
		for v := range iter.Weighted(b.Context(), iterNaturals, iterNoop{}, func(int) int { return 1 }) {
			sum += v
			if !b.Loop() {
				break
			}
		}
		iterSink = sum
	})
	// acquire-returned-* is the hand-written loop with Acquire behind a
	// function that is not inlined and returns the Lease: the shape an
	// earlier iter avoided by writing its per-value step three times, for a
	// stall it attributed to copying the returned Lease. Beside
	// acquire-loop-* it measures that copy.
	for _, l := range limits[1:2] {
		b.Run("acquire-returned-"+l.name, func(b *testing.B) {
			lim, ctx := l.lim(), b.Context()
			sum := 0
			for v := range iterNaturals {
				lease, ok := iterAcquire(ctx, lim, 1)
				if !ok {
					b.Fatal("refused")
				}
				sum += v
				lease.Release()
				if !b.Loop() {
					break
				}
			}
			iterSink = sum
		})
	}
	for _, l := range limits[1:] {
		b.Run("acquire-loop-"+l.name, func(b *testing.B) {
			lim, ctx := l.lim(), b.Context()
			sum := 0
			for v := range iterNaturals {
				lease, err := lim.Acquire(ctx, 1)
				if err != nil {
					b.Fatal(err)
				}
				sum += v
				lease.Release()
				if !b.Loop() {
					break
				}
			}
			iterSink = sum
		})
	}
}
