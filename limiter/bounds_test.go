package limiter_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// loop runs an Acquire(n) loop whose body takes body, count times, and returns
// the virtual instants (since its start) at which each body started.
func loop(t *testing.T, lim Limiter, n, count int, body time.Duration) []time.Duration {
	t.Helper()
	start := time.Now()
	var at []time.Duration
	for i := range count {
		l, err := lim.Acquire(context.Background(), n)
		if err != nil {
			t.Fatalf("Acquire #%d at %v: %v", i, time.Since(start), err)
		}
		if !l.Granted() || l.Permits() != n {
			t.Fatalf("Acquire #%d: lease granted=%v permits=%d", i, l.Granted(), l.Permits())
		}
		at = append(at, time.Since(start))
		time.Sleep(body)
		l.Release()
	}
	return at
}

func wantTimes(t *testing.T, got []time.Duration, wantMS ...int) {
	t.Helper()
	want := make([]time.Duration, len(wantMS))
	for i, m := range wantMS {
		want[i] = ms(m)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("grants at %v, want %v", got, want)
	}
}

// The RateGate case: 2 per second, loop body 250 ms.
func TestSlidingLogLoopStartsAtBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sl, _ := NewSlidingLog(SlidingLogOptions{Limit: 2, Window: time.Second})
		wantTimes(t, loop(t, sl, 1, 6, ms(250)), 0, 250, 1000, 1250, 2000, 2250)
	})
}

// A window that slides: 3 per 1 s, bodies of 300 ms; every third grant waits
// for the one three back to leave the window.
func TestSlidingLogLoopOddSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sl, _ := NewSlidingLog(SlidingLogOptions{Limit: 3, Window: time.Second})
		wantTimes(t, loop(t, sl, 1, 7, ms(300)), 0, 300, 600, 1000, 1300, 1600, 2000)
	})
}

func TestTokenBucketBurstThenRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(2, time.Second), Burst: 3})
		wantTimes(t, loop(t, tb, 1, 7, 0), 0, 0, 0, 500, 1000, 1500, 2000)
		// Idle for a long time: the bucket holds Burst, not more.
		time.Sleep(time.Hour)
		wantTimes(t, loop(t, tb, 1, 5, 0), 0, 0, 0, 500, 1000)
		// Multi-permit requests wait for the deficit in permits: 2 at 2/s.
		time.Sleep(time.Hour)
		wantTimes(t, loop(t, tb, 2, 3, 0), 0, 500, 1500)
	})
}

// Rates that do not divide a second: no drift over many grants.
func TestTokenBucketExactRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(3, time.Second), Burst: 3})
		at := loop(t, tb, 1, 303, 0)
		if at[2] != 0 || at[302] != 100*time.Second {
			t.Fatalf("grants #2 and #302 at %v and %v, want 0 and 100s (3/s exactly)", at[2], at[302])
		}
		for i := 4; i < len(at); i++ {
			// one per 333.333… ms: gaps of 333 or 334 ms (ns rounded up)
			if gap := at[i] - at[i-1]; gap != 333333333 && gap != 333333334 {
				t.Fatalf("gap %d = %v", i, gap)
			}
		}
	})
}

func TestFixedWindowResetsAtAlignedBoundaries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fw, _ := NewFixedWindow(FixedWindowOptions{Limit: 3, Window: time.Second})
		time.Sleep(ms(300))
		// Windows are aligned to the limiter's creation, not to the first grant.
		at := loop(t, fw, 1, 7, 0)
		wantTimes(t, at, 0, 0, 0, 700, 700, 700, 1700)
		// Across a boundary a fixed window grants 2·Limit in a short time.
		time.Sleep(ms(1250)) // now 3250 ms after creation
		if l := fw.TryAcquire(3); !l.Granted() {
			t.Fatal("full window refused")
		}
		time.Sleep(ms(750)) // 4000: a new window
		if l := fw.TryAcquire(3); !l.Granted() {
			t.Fatal("full window refused after the boundary")
		}
	})
}

// 4 per second in 4 segments of 250 ms: permits come back as the segment
// they were granted in leaves the window.
func TestSlidingWindowSegments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sw, _ := NewSlidingWindow(SlidingWindowOptions{Limit: 4, Window: time.Second, Segments: 4})
		start := time.Now()
		grant := func(n int) {
			t.Helper()
			if l := sw.TryAcquire(n); !l.Granted() {
				t.Fatalf("TryAcquire(%d) at %v refused: %v, retry %v", n, time.Since(start), l.Err(), l.RetryAfter())
			}
		}
		grant(1)            // segment 0
		time.Sleep(ms(300)) // segment 1
		grant(1)            //
		time.Sleep(ms(300)) // 600: segment 2
		grant(2)            // the window is full
		time.Sleep(ms(100)) // 700
		if l := sw.TryAcquire(1); l.Granted() || l.RetryAfter() != ms(300) {
			t.Fatalf("TryAcquire at 700ms: granted %v retry %v; want refused, 300ms (segment 0 leaves at 1000)", l.Granted(), l.RetryAfter())
		}
		// 2 permits wait for segment 1 to leave too (1250); 3 for segment 2 (1500).
		if l := sw.TryAcquire(2); l.RetryAfter() != ms(550) {
			t.Fatalf("TryAcquire(2) retry %v, want 550ms", l.RetryAfter())
		}
		if l := sw.TryAcquire(3); l.RetryAfter() != ms(800) {
			t.Fatalf("TryAcquire(3) retry %v, want 800ms", l.RetryAfter())
		}
		at := loop(t, sw, 1, 5, 0)
		// From 700 ms: 1000 (segment 0 leaves), 1250 (segment 1), 1500 twice
		// (segment 2 held 2), then 2000 (segment 4, used at 1000, leaves).
		wantTimes(t, at, 300, 550, 800, 800, 1300)
	})
}

// Segment boundaries at ⌈i·Window/Segments⌉ when the window does not divide evenly.
func TestSlidingWindowUnevenSegments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sw, _ := NewSlidingWindow(SlidingWindowOptions{Limit: 1, Window: time.Second, Segments: 3})
		if !sw.TryAcquire(1).Granted() {
			t.Fatal("first refused")
		}
		// segment 3 starts at ⌈3·1s/3⌉ = 1s; segment 1 at 333333334 ns
		if l := sw.TryAcquire(1); l.RetryAfter() != time.Second {
			t.Fatalf("retry %v, want 1s", l.RetryAfter())
		}
		time.Sleep(time.Second)
		if !sw.TryAcquire(1).Granted() {
			t.Fatal("refused at 1s")
		}
		time.Sleep(333333333) // 1333333333: still in segment 3
		if l := sw.TryAcquire(1); l.Granted() || l.RetryAfter() != time.Second-333333333 {
			t.Fatalf("at 1333333333ns: granted %v retry %v", l.Granted(), l.RetryAfter())
		}

		// A grant in segment 1 leaves at the start of segment 4, 1333333334 ns.
		sw2, _ := NewSlidingWindow(SlidingWindowOptions{Limit: 1, Window: time.Second, Segments: 3})
		time.Sleep(ms(400))
		if !sw2.TryAcquire(1).Granted() {
			t.Fatal("refused at 400ms")
		}
		time.Sleep(ms(100))
		if l := sw2.TryAcquire(1); l.RetryAfter() != 833333334 {
			t.Fatalf("at 500ms: retry %v, want 833333334ns", l.RetryAfter())
		}
		time.Sleep(833333333)
		if l := sw2.TryAcquire(1); l.Granted() || l.RetryAfter() != 1 {
			t.Fatalf("1ns before segment 4: granted %v retry %v", l.Granted(), l.RetryAfter())
		}
		time.Sleep(time.Nanosecond)
		if l := sw2.TryAcquire(1); !l.Granted() {
			t.Fatalf("at segment 4: refused, retry %v", l.RetryAfter())
		}
	})
}

// A pacer spaces grants by k/Rate after a k-permit grant, and never bursts.
func TestLeakyBucketSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lb, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(10, time.Second)})
		start := time.Now()
		var at []time.Duration
		for _, k := range []int{3, 1, 2, 5, 1} {
			if _, err := lb.Acquire(context.Background(), k); err != nil {
				t.Fatal(err)
			}
			at = append(at, time.Since(start))
		}
		wantTimes(t, at, 0, 300, 400, 600, 1100)
		// Idle: one slot, not a burst.
		time.Sleep(time.Hour)
		if !lb.TryAcquire(1).Granted() {
			t.Fatal("idle pacer refused")
		}
		if l := lb.TryAcquire(1); l.Granted() || l.RetryAfter() != ms(100) {
			t.Fatalf("second grant after idling: granted %v retry %v; want refused, 100ms", l.Granted(), l.RetryAfter())
		}
	})
}

func TestConcurrencyInUseNeverAboveLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit = 3
		c, _ := NewConcurrency(ConcurrencyOptions{Limit: limit})
		var inUse, peak, grants atomic.Int64
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				for j := range 5 {
					n := 1 + (i+j)%limit
					l, err := c.Acquire(context.Background(), n)
					if err != nil {
						t.Errorf("Acquire: %v", err)
						return
					}
					atomicMax(&peak, inUse.Add(int64(n)))
					if got := c.InUse(); got > limit {
						t.Errorf("InUse %d > %d", got, limit)
					}
					grants.Add(1)
					time.Sleep(time.Duration(1+(i*7+j*3)%5) * time.Millisecond)
					inUse.Add(-int64(n))
					l.Release()
				}
			})
		}
		wg.Wait()
		if p := peak.Load(); p > limit || p < limit {
			t.Fatalf("peak in use %d, want exactly %d (never above, and reached)", p, limit)
		}
		if grants.Load() != 50 || c.InUse() != 0 || c.Stats().Available != limit {
			t.Fatalf("grants %d, InUse %d, Available %d", grants.Load(), c.InUse(), c.Stats().Available)
		}
	})
}

// Saturating demand: every algorithm grants exactly at its bound, never over.
func TestSaturationAtTheBound(t *testing.T) {
	const limit = 3
	for _, tc := range []struct {
		a     algo
		total int
	}{
		{algos[0], 3 + 16}, // TokenBucket: 3, then one per 333… ms up to 5.4 s
		{algos[1], 3 * 6},  // FixedWindow: windows 0…5
		{algos[2], 3 * 6},  // SlidingWindow: 3 at 0, 1, …, 5 s
		{algos[3], 3 * 6},  // SlidingLog
		{algos[4], 1 + 16}, // LeakyBucket 3/s: 0, 333…, … 5333… ms
		{algos[5], 3 * 6},  // Concurrency, leases held 1 s
	} {
		t.Run(tc.a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := mustMake(t, tc.a, limit, QueueOptions{})
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), ms(5400))
				defer cancel()
				var mu sync.Mutex
				var at []time.Duration
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						for {
							l, err := lim.Acquire(ctx, 1)
							if err != nil {
								return
							}
							mu.Lock()
							at = append(at, time.Since(start))
							mu.Unlock()
							if tc.a.concurrency {
								time.Sleep(time.Second)
								l.Release()
							}
						}
					})
				}
				wg.Wait()
				slices.Sort(at)
				if len(at) != tc.total {
					t.Fatalf("%d grants %v, want %d", len(at), at, tc.total)
				}
				checkBound(t, tc.a.name, limit, at)
			})
		})
	}
}

// checkBound checks 1-permit grant instants against the algorithm's bound
// (with limit L per second, and for concurrency leases held 1 s).
func checkBound(t *testing.T, name string, limit int, at []time.Duration) {
	t.Helper()
	count := func(from, to time.Duration) int { // grants in [from, to)
		n := 0
		for _, a := range at {
			if a >= from && a < to {
				n++
			}
		}
		return n
	}
	for i, ti := range at {
		switch name {
		case "TokenBucket":
			for _, tj := range at[i:] {
				// grants in [ti, tj] ≤ Burst + rate·(tj-ti)
				if n, max := count(ti, tj+1), limit+int(int64(limit)*int64(tj-ti)/int64(time.Second)); n > max {
					t.Fatalf("%d grants in [%v, %v], bound %d", n, ti, tj, max)
				}
			}
		case "FixedWindow", "SlidingWindow", "SlidingLog", "Concurrency":
			// With 1 s windows (or 1 s holds) every window of 1 s holds at most L.
			if n := count(ti, ti+time.Second); n > limit {
				t.Fatalf("%d grants in [%v, %v+1s)", n, ti, ti)
			}
		case "LeakyBucket":
			if i > 0 && ti-at[i-1] < time.Second/time.Duration(limit) {
				t.Fatalf("grants %v and %v closer than 1/%d s", at[i-1], ti, limit)
			}
		}
	}
}

func atomicMax(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}
