package limiter_test

import (
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// heapAlloc returns the bytes of live heap objects after a collection.
func heapAlloc() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A sliding log's memory follows the grants in its window: a window after
// 1<<17 grants at distinct instants have left it, the log holds what one
// grant needs, not the 2 MB the full log took.
func TestSlidingLogMemoryFollowsGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grants = 1 << 17
		lim, err := NewSlidingLog(SlidingLogOptions{Limit: grants, Window: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		before := heapAlloc()
		for range grants {
			if !lim.TryAcquire(1).Granted() {
				t.Fatal("refused below the limit")
			}
			time.Sleep(time.Microsecond)
		}
		if full := heapAlloc() - before; full < grants*8 {
			t.Fatalf("the full log takes %d bytes, want at least %d: the test measures nothing", full, grants*8)
		}
		// The log gives its memory back once it has stayed small for a
		// window (a log that fills again within a window keeps it).
		for range 2 {
			time.Sleep(time.Second)
			if !lim.TryAcquire(1).Granted() {
				t.Fatal("refused after the window passed")
			}
		}
		if held := heapAlloc() - before; held > 64<<10 {
			t.Fatalf("%d bytes held after %d grants left the window, want at most 64 KiB", held, grants)
		}
		runtime.KeepAlive(lim)
	})
}

// A sliding window's memory follows the segments holding grants, not the
// number of segments.
func TestSlidingWindowMemoryFollowsSegments(t *testing.T) {
	before := heapAlloc()
	lim, err := NewSlidingWindow(SlidingWindowOptions{Limit: 10, Window: time.Hour, Segments: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	lim.TryAcquire(1)
	if held := heapAlloc() - before; held > 64<<10 {
		t.Fatalf("a window of 1<<20 segments with one grant holds %d bytes, want at most 64 KiB", held)
	}
	runtime.KeepAlive(lim)
}

// refusedCost returns the least mean wall time, over 5 rounds of 100, of a
// refused call of try.
func refusedCost(t *testing.T, try func() Lease) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range 5 {
		start := time.Now()
		for range 100 {
			if try().Granted() {
				t.Fatal("granted; the test wants refusals")
			}
		}
		best = min(best, time.Since(start)/100)
	}
	return best
}

// A refused request does not walk the log: with 1<<18 grants in a sliding
// log, the refusal of a request that must wait for all of them to leave
// takes a binary search. The bound is some hundred times what a search
// costs and a tenth of what a walk did, so only a walk fails it.
func TestSlidingLogRefusalCost(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a log of 1<<18 grants")
	}
	const grants = 1 << 18
	lim, err := NewSlidingLog(SlidingLogOptions{Limit: 2 * grants, Window: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for range grants {
		lim.TryAcquire(1) // on the real clock: mostly one entry each
	}
	if cost := refusedCost(t, func() Lease { return lim.TryAcquire(2 * grants) }); cost > 100*time.Microsecond {
		t.Fatalf("a refused TryAcquire costs %v with %d grants in the log: it walks the log", cost, grants)
	}
}

// A refused request costs the same with 1<<20 segments as with 4: it does
// not walk the segments.
func TestSlidingWindowRefusalCost(t *testing.T) {
	lim, err := NewSlidingWindow(SlidingWindowOptions{Limit: 1, Window: time.Hour, Segments: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	lim.TryAcquire(1)
	if cost := refusedCost(t, func() Lease { return lim.TryAcquire(1) }); cost > 50*time.Microsecond {
		t.Fatalf("a refused TryAcquire costs %v with 1<<20 segments: it walks the segments", cost)
	}
}

// Benchmarks of a refused decision in a large window, to compare with the
// walks they replaced (see README).

func BenchmarkSlidingLogRefused2M(b *testing.B) {
	const grants = 2 << 20
	lim, err := NewSlidingLog(SlidingLogOptions{Limit: 2 * grants, Window: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for range grants {
		lim.TryAcquire(1)
	}
	b.ReportAllocs()
	for b.Loop() {
		if lim.TryAcquire(2 * grants).Granted() {
			b.Fatal("granted")
		}
	}
}

func BenchmarkSlidingWindowRefused1MSegments(b *testing.B) {
	lim, err := NewSlidingWindow(SlidingWindowOptions{Limit: 1, Window: time.Hour, Segments: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	lim.TryAcquire(1)
	b.ReportAllocs()
	for b.Loop() {
		if lim.TryAcquire(1).Granted() {
			b.Fatal("granted")
		}
	}
}

// The common case beside them: grants in a steady stream, each one added to
// the log and the oldest expired.

func BenchmarkSlidingLogGranted(b *testing.B) {
	lim, err := NewSlidingLog(SlidingLogOptions{Limit: 1 << 40, Window: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		lim.TryAcquire(1)
	}
}

func BenchmarkSlidingWindowGranted(b *testing.B) {
	lim, err := NewSlidingWindow(SlidingWindowOptions{Limit: 1 << 40, Window: time.Millisecond, Segments: 64})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		lim.TryAcquire(1)
	}
}
