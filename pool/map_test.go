package pool_test

import (
	"context"
	"errors"
	"iter"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
)

// count yields 0, 1, …, n-1 and counts how many it has yielded.
func count(n int, read *atomic.Int64) iter.Seq[int] {
	return func(yield func(int) bool) {
		for i := range n {
			read.Add(1)
			if !yield(i) {
				return
			}
		}
	}
}

// TestMapInputOrder: results come in input order although later inputs
// finish first, and the calls run Workers at a time.
func TestMapInputOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var read atomic.Int64
		f := func(ctx context.Context, i int) (int, error) {
			time.Sleep(time.Duration(10-i) * time.Millisecond) // later ones finish sooner
			return i * i, nil
		}
		var got []int
		for r, err := range pool.Map(t.Context(), count(10, &read), f, pool.MapOptions{Workers: 10}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r)
		}
		if want := []int{0, 1, 4, 9, 16, 25, 36, 49, 64, 81}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
		if el := time.Since(start); el != 10*time.Millisecond {
			t.Errorf("took %v, want 10ms (all 10 at once)", el)
		}
	})
}

func TestMapCompletionOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var read atomic.Int64
		f := func(ctx context.Context, i int) (int, error) {
			time.Sleep(time.Duration(10-i) * time.Millisecond)
			return i, nil
		}
		var got []int
		for r, err := range pool.Map(t.Context(), count(10, &read), f, pool.MapOptions{Workers: 10, Order: pool.CompletionOrder}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, r)
		}
		if want := []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}; !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

// TestMapBoundedMemory: with a consumer that stops reading, Map reads at
// most a bounded number of inputs ahead, then waits.
func TestMapBoundedMemory(t *testing.T) {
	for _, order := range []pool.MapOrder{pool.InputOrder, pool.CompletionOrder} {
		synctest.Test(t, func(t *testing.T) {
			const workers = 3
			var read, calls atomic.Int64
			f := func(ctx context.Context, i int) (int, error) { calls.Add(1); return i, nil }
			for range pool.Map(t.Context(), count(1_000_000, &read), f, pool.MapOptions{Workers: workers, Order: order}) {
				time.Sleep(time.Hour) // a stalled consumer
				synctest.Wait()
				// In flight ≤ workers, waiting ≤ workers, one in the feeder's hand, one yielded.
				if n := read.Load(); n > 2*workers+2 {
					t.Errorf("order %d: read %d inputs ahead of a stalled consumer, want ≤ %d", order, n, 2*workers+2)
				}
				break
			}
			if calls.Load() > 2*workers+2 {
				t.Errorf("order %d: %d calls", order, calls.Load())
			}
		})
	}
}

// TestMapBreakStopsWorkers: breaking out cancels the calls' context and
// returns only after every call returned (goleak checks the rest).
func TestMapBreakStopsWorkers(t *testing.T) {
	for _, order := range []pool.MapOrder{pool.InputOrder, pool.CompletionOrder} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var read, running, cancelled atomic.Int64
			f := func(ctx context.Context, i int) (int, error) {
				if i == 0 {
					return 0, nil
				}
				running.Add(1)
				defer running.Add(-1)
				<-ctx.Done()
				cancelled.Add(1)
				return 0, ctx.Err()
			}
			for range pool.Map(t.Context(), count(1000, &read), f, pool.MapOptions{Workers: 4, Order: order}) {
				synctest.Wait()
				break
			}
			if running.Load() != 0 || cancelled.Load() == 0 || time.Since(start) != 0 {
				t.Errorf("order %d: after break, %d calls still running, %d cancelled, at %v", order, running.Load(), cancelled.Load(), time.Since(start))
			}
		})
	}
}

func TestMapErrorsAndPanics(t *testing.T) {
	for _, order := range []pool.MapOrder{pool.InputOrder, pool.CompletionOrder} {
		var read atomic.Int64
		bad := errors.New("bad")
		f := func(ctx context.Context, i int) (int, error) {
			switch i {
			case 1:
				return 0, bad
			case 2:
				panic("two")
			}
			return i, nil
		}
		var oks, bads, panics int
		for r, err := range pool.Map(t.Context(), count(4, &read), f, pool.MapOptions{Workers: 2, Order: order}) {
			var pe *pool.PanicError
			switch {
			case errors.As(err, &pe) && pe.Value == "two":
				panics++
			case errors.Is(err, bad):
				bads++
			case err == nil && (r == 0 || r == 3):
				oks++
			default:
				t.Errorf("unexpected %v, %v", r, err)
			}
		}
		if oks != 2 || bads != 1 || panics != 1 {
			t.Errorf("order %d: %d ok, %d errors, %d panics; want 2, 1, 1", order, oks, bads, panics)
		}
	}
}

func TestMapInvalidAndCancelled(t *testing.T) {
	var read atomic.Int64
	f := func(ctx context.Context, i int) (int, error) { return i, nil }
	n := 0
	for _, err := range pool.Map(t.Context(), count(3, &read), f, pool.MapOptions{}) {
		var oe *limiter.OptionError
		if !errors.As(err, &oe) || oe.Field != "Workers" {
			t.Errorf("Workers 0: %v", err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("Workers 0 yielded %d pairs, want 1", n)
	}
	n = 0
	for _, err := range pool.MapKey(t.Context(), count(3, &read), nil, f, pool.MapOptions{Workers: 1, Order: 7}) {
		var oe *limiter.OptionError
		if !errors.As(err, &oe) || oe.Field != "Order" {
			t.Errorf("Order 7: %v", err)
		}
		n++
	}
	if n != 1 {
		t.Errorf("Order 7 yielded %d pairs, want 1", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for _, order := range []pool.MapOrder{pool.InputOrder, pool.CompletionOrder} {
		var errs []error
		for _, err := range pool.Map(ctx, count(3, &read), f, pool.MapOptions{Workers: 1, Order: order}) {
			errs = append(errs, err)
		}
		if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
			t.Errorf("cancelled ctx: %v, want one context.Canceled", errs)
		}
	}
}

// TestMapLimiter: the calls start no faster than the limiter allows.
func TestMapLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var read atomic.Int64
		f := func(ctx context.Context, i int) (time.Duration, error) { return time.Since(start), nil }
		var got []time.Duration
		for at, err := range pool.Map(t.Context(), count(5, &read), f, pool.MapOptions{Workers: 5, Limiter: slidingLog(t, 2, time.Second)}) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, at)
		}
		s := time.Second
		if want := []time.Duration{0, 0, s, s, 2 * s}; !slices.Equal(got, want) {
			t.Errorf("starts %v, want %v", got, want)
		}
	})
}

// TestMapGoexit: a call that ends with runtime.Goexit (t.FailNow, for one)
// yields ErrGoexit for its value, and the iterator still ends, in both
// orders.
func TestMapGoexit(t *testing.T) {
	for _, order := range []pool.MapOrder{pool.InputOrder, pool.CompletionOrder} {
		synctest.Test(t, func(t *testing.T) {
			var read atomic.Int64
			f := func(ctx context.Context, i int) (int, error) {
				if i == 1 {
					runtimeGoexit()
				}
				return i, nil
			}
			var got []int
			goexits := 0
			for r, err := range pool.Map(t.Context(), count(3, &read), f, pool.MapOptions{Workers: 2, Order: order}) {
				switch {
				case errors.Is(err, pool.ErrGoexit):
					goexits++
				case err != nil:
					t.Errorf("order %d: %v", order, err)
				default:
					got = append(got, r)
				}
			}
			slices.Sort(got)
			if goexits != 1 || !slices.Equal(got, []int{0, 2}) {
				t.Errorf("order %d: results %v and %d ErrGoexit, want [0 2] and 1", order, got, goexits)
			}
		})
	}
}

// TestMapStartErrorIsLast: when a call cannot start (here the limiter is
// closed), that error is the last pair, after the result of a call that was
// already running, in both orders.
func TestMapStartErrorIsLast(t *testing.T) {
	for _, order := range []pool.MapOrder{pool.InputOrder, pool.CompletionOrder} {
		synctest.Test(t, func(t *testing.T) {
			var read atomic.Int64
			lim := slidingLog(t, 100, time.Second)
			f := func(ctx context.Context, i int) (int, error) {
				switch i {
				case 0:
					time.Sleep(time.Second)
				case 1:
					lim.Close()
				}
				return i, nil
			}
			var errs []error
			for _, err := range pool.Map(t.Context(), count(5, &read), f, pool.MapOptions{Workers: 2, Limiter: lim, Order: order}) {
				errs = append(errs, err)
			}
			if len(errs) != 3 || errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], limiter.ErrClosed) {
				t.Errorf("order %d: errors %v, want nil, nil, ErrClosed", order, errs)
			}
		})
	}
}

// TestMapKeySmallHeap: a MapKey over a few values allocates for those
// values, not for the DefaultKeyQueue values it may read ahead.
func TestMapKeySmallHeap(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector inflates the heap")
	}
	f := func(_ context.Context, i int) (int, error) { return i, nil }
	run := func() {
		for _, err := range pool.MapKey(t.Context(), slices.Values([]int{1, 2, 3, 4, 5, 6, 7, 8}), func(int) string { return "k" }, f, pool.MapOptions{Workers: 2}) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	run()
	const runs = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		run()
	}
	runtime.ReadMemStats(&after)
	perCall := (after.TotalAlloc - before.TotalAlloc) / runs
	t.Logf("%d bytes a call", perCall)
	if perCall > 16<<10 {
		t.Errorf("MapKey over 8 values allocated %d bytes a call, want under 16 KiB", perCall)
	}
}
