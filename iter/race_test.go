package iter_test

import (
	"context"
	stditer "iter"
	"slices"
	"sync"
	"testing"

	"github.com/rategate/rategate/iter"
	"github.com/rategate/rategate/limiter"
)

// TestConcurrentLoops: one sequence made by Limit, Limit2, Batch or
// Weighted can be ranged over by several goroutines at once, each loop
// anew, as its upstream can. Run with -race: the loops must share no
// state (the nil limiter adds no synchronisation that would hide it).
func TestConcurrentLoops(t *testing.T) {
	var lim limiter.Limiter
	vals := []int{1, 2, 3, 4, 5}
	ctx := context.Background()
	count := func(seq stditer.Seq[int]) func() int {
		return func() (n int) {
			for range seq {
				n++
			}
			return n
		}
	}
	limit2 := iter.Limit2(ctx, slices.All(vals), lim)
	batch := iter.Batch(ctx, slices.Values(vals), lim, 2)
	for name, loop := range map[string]func() int{
		"Limit":    count(iter.Limit(ctx, slices.Values(vals), lim)),
		"Weighted": count(iter.Weighted(ctx, slices.Values(vals), lim, func(int) int { return 1 })),
		"Limit2": func() (n int) {
			for range limit2 {
				n++
			}
			return n
		},
		"Batch": func() (n int) {
			for b := range batch {
				n += len(b)
			}
			return n
		},
	} {
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if n := loop(); n != len(vals) {
					t.Errorf("%s: a loop saw %d values, want %d", name, n, len(vals))
				}
			})
		}
		wg.Wait()
	}
}
