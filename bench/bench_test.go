// Package bench compares rategate's limiters with their peers:
// golang.org/x/time/rate, go.uber.org/ratelimit and golang.org/x/sync/semaphore.
//
// Benchmark names are chosen for benchstat: BenchmarkAdmit/<impl> is the cost
// of one granted non-blocking acquisition on one goroutine, BenchmarkReject/<impl>
// the cost of one refused acquisition, and the *Shared variants run the same
// operation from every P (b.RunParallel) against ONE limiter, so their ns/op is
// wall time divided by the operations of all goroutines together.
// BenchmarkAdmit/clock-since is the floor: rategate's fast path reads the
// monotonic clock once, time.Since(origin); BenchmarkClock/now is time.Now,
// which x/time/rate and uber read. BenchmarkKeyed (keyed_test.go) is a keyed
// limiter against a plain map.
//
// Run ./run.sh for the full, reproducible comparison.
package bench

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
	"go.uber.org/ratelimit"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// Admitting configurations: 10^9 permits a second with a burst of 10^9, i.e.
// one permit per nanosecond of refill and a bucket that a benchmark second
// cannot drain, so every call is granted on the same path.
const (
	hugeRate  = 1_000_000_000
	hugeBurst = 1_000_000_000
)

var (
	sinkTime time.Time
	sinkDur  time.Duration
)

// must panics on a constructor error: the configurations here are fixed.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func admitTokenBucket() *limiter.TokenBucket {
	return must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(hugeRate, time.Second), Burst: hugeBurst}))
}

func admitLeakyBucket() *limiter.LeakyBucket {
	return must(limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(hugeRate, time.Second)}))
}

func admitConcurrency() *limiter.Concurrency {
	return must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1 << 20}))
}

func admitFixedWindow() *limiter.FixedWindow {
	return must(limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: hugeBurst, Window: time.Second}))
}

func admitSlidingWindow() *limiter.SlidingWindow {
	return must(limiter.NewSlidingWindow(limiter.SlidingWindowOptions{Limit: hugeBurst, Window: time.Second, Segments: 10}))
}

// The sliding log keeps one entry per distinct grant instant in the window;
// a 1 ms window keeps the ring small (tens of thousands of entries at most).
func admitSlidingLog() *limiter.SlidingLog {
	return must(limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: hugeBurst, Window: time.Millisecond}))
}

func admitXRate() *rate.Limiter { return rate.NewLimiter(rate.Limit(hugeRate), hugeBurst) }

func admitXRateInf() *rate.Limiter { return rate.NewLimiter(rate.Inf, 1) }

// uber's Take blocks until its slot; at one slot per nanosecond the slot is
// always in the past, so Take never sleeps.
func admitUber() ratelimit.Limiter { return ratelimit.New(hugeRate, ratelimit.WithoutSlack) }

// Exhausted configurations: one permit an hour, burst 1, already taken.

func rejectTokenBucket(tb testing.TB) *limiter.TokenBucket {
	l := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 1}))
	if !l.TryAcquire(1).Granted() {
		tb.Fatal("first permit not granted")
	}
	return l
}

func rejectLeakyBucket(tb testing.TB) *limiter.LeakyBucket {
	l := must(limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(1, time.Hour)}))
	if !l.TryAcquire(1).Granted() {
		tb.Fatal("first permit not granted")
	}
	return l
}

func rejectConcurrency(tb testing.TB) *limiter.Concurrency {
	l := must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1}))
	if !l.TryAcquire(1).Granted() {
		tb.Fatal("first permit not granted")
	}
	return l
}

func rejectXRate(tb testing.TB) *rate.Limiter {
	l := rate.NewLimiter(rate.Every(time.Hour), 1)
	if !l.Allow() {
		tb.Fatal("first permit not granted")
	}
	return l
}

func rejectSemaphore(tb testing.TB) *semaphore.Weighted {
	s := semaphore.NewWeighted(1)
	if !s.TryAcquire(1) {
		tb.Fatal("first permit not granted")
	}
	return s
}

// checkAll fails the benchmark when an admit benchmark was refused (or a
// reject benchmark granted) more than one call in a thousand: the number
// would then measure a mix of paths.
func checkAll(b *testing.B, what string, wrong, total int64) {
	b.Helper()
	if total > 0 && wrong*1000 > total {
		b.Fatalf("%d of %d calls were %s", wrong, total, what)
	}
}

// Every case below is written out, with the call inline in the loop, so that
// no closure or interface call is measured along with the limiter.

// BenchmarkClock/now is time.Now, which reads the wall and the monotonic
// clock; rategate reads only the monotonic one, time.Since(origin), measured
// as BenchmarkAdmit/clock-since.
func BenchmarkClock(b *testing.B) {
	b.Run("now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkTime = time.Now()
		}
	})
}

// BenchmarkAdmit: one goroutine, every call granted.
func BenchmarkAdmit(b *testing.B) {
	b.Run("clock-since", func(b *testing.B) {
		origin := time.Now()
		b.ReportAllocs()
		for b.Loop() {
			sinkDur = time.Since(origin)
		}
	})
	b.Run("clock-cas", func(b *testing.B) {
		// The floor of a lock-free bucket: one clock read and one
		// compare-and-swap of the state word.
		origin := time.Now()
		var word atomic.Int64
		b.ReportAllocs()
		for b.Loop() {
			now := int64(time.Since(origin))
			old := word.Load()
			word.CompareAndSwap(old, max(old, now)+1)
		}
	})
	b.Run("rategate-tokenbucket", func(b *testing.B) {
		l := admitTokenBucket()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			if !l.TryAcquire(1).Granted() {
				refused++
			}
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("xrate", func(b *testing.B) {
		l := admitXRate()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			if !l.Allow() {
				refused++
			}
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("xrate-inf", func(b *testing.B) {
		l := admitXRateInf()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			if !l.Allow() {
				refused++
			}
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("uber", func(b *testing.B) {
		l := admitUber()
		b.ReportAllocs()
		for b.Loop() {
			sinkTime = l.Take()
		}
	})
	b.Run("rategate-concurrency", func(b *testing.B) {
		l := admitConcurrency()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			ls := l.TryAcquire(1)
			if !ls.Granted() {
				refused++
			}
			ls.Release()
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("semaphore", func(b *testing.B) {
		s := semaphore.NewWeighted(1 << 20)
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			if s.TryAcquire(1) {
				s.Release(1)
			} else {
				refused++
			}
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("rategate-leakybucket", func(b *testing.B) {
		l := admitLeakyBucket()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			if !l.TryAcquire(1).Granted() {
				refused++
			}
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("rategate-fixedwindow", func(b *testing.B) {
		l := admitFixedWindow()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			if !l.TryAcquire(1).Granted() {
				refused++
			}
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("rategate-slidingwindow", func(b *testing.B) {
		l := admitSlidingWindow()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			if !l.TryAcquire(1).Granted() {
				refused++
			}
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("rategate-slidinglog", func(b *testing.B) {
		l := admitSlidingLog()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			if !l.TryAcquire(1).Granted() {
				refused++
			}
			n++
		}
		checkAll(b, "refused", refused, n)
	})
}

// BenchmarkAdmitShared: every P calls ONE limiter, every call granted.
// ns/op is wall time over the calls of all goroutines: with -cpu 2, two
// perfectly independent 40 ns calls report 20 ns/op.
func BenchmarkAdmitShared(b *testing.B) {
	b.Run("clock-since", func(b *testing.B) {
		origin := time.Now()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var d time.Duration
			for pb.Next() {
				d += time.Since(origin)
			}
			sinkDur = d
		})
	})
	b.Run("rategate-tokenbucket", func(b *testing.B) {
		l := admitTokenBucket()
		b.ReportAllocs()
		var refused atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var r int64
			for pb.Next() {
				if !l.TryAcquire(1).Granted() {
					r++
				}
			}
			refused.Add(r)
		})
		checkAll(b, "refused", refused.Load(), int64(b.N))
	})
	b.Run("xrate", func(b *testing.B) {
		l := admitXRate()
		b.ReportAllocs()
		var refused atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var r int64
			for pb.Next() {
				if !l.Allow() {
					r++
				}
			}
			refused.Add(r)
		})
		checkAll(b, "refused", refused.Load(), int64(b.N))
	})
	b.Run("xrate-inf", func(b *testing.B) {
		l := admitXRateInf()
		b.ReportAllocs()
		var refused atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var r int64
			for pb.Next() {
				if !l.Allow() {
					r++
				}
			}
			refused.Add(r)
		})
		checkAll(b, "refused", refused.Load(), int64(b.N))
	})
	b.Run("uber", func(b *testing.B) {
		l := admitUber()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var t time.Time
			for pb.Next() {
				t = l.Take()
			}
			sinkTime = t
		})
	})
	b.Run("rategate-concurrency", func(b *testing.B) {
		l := admitConcurrency()
		b.ReportAllocs()
		var refused atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var r int64
			for pb.Next() {
				ls := l.TryAcquire(1)
				if !ls.Granted() {
					r++
				}
				ls.Release()
			}
			refused.Add(r)
		})
		checkAll(b, "refused", refused.Load(), int64(b.N))
	})
	b.Run("semaphore", func(b *testing.B) {
		s := semaphore.NewWeighted(1 << 20)
		b.ReportAllocs()
		var refused atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var r int64
			for pb.Next() {
				if s.TryAcquire(1) {
					s.Release(1)
				} else {
					r++
				}
			}
			refused.Add(r)
		})
		checkAll(b, "refused", refused.Load(), int64(b.N))
	})
	// No leaky bucket here: a pacer at one permit per nanosecond rightly
	// refuses a caller that reads the same nanosecond as the last grant.
	// The sliding log stands for the three locked windows (FixedWindow and
	// SlidingWindow take the same mutex path; see BenchmarkAdmit).
	b.Run("rategate-slidinglog", func(b *testing.B) {
		l := admitSlidingLog()
		b.ReportAllocs()
		var refused atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var r int64
			for pb.Next() {
				if !l.TryAcquire(1).Granted() {
					r++
				}
			}
			refused.Add(r)
		})
		checkAll(b, "refused", refused.Load(), int64(b.N))
	})
}

// BenchmarkReject: one goroutine, every call refused.
func BenchmarkReject(b *testing.B) {
	b.Run("rategate-tokenbucket", func(b *testing.B) {
		l := rejectTokenBucket(b)
		b.ReportAllocs()
		var granted, n int64
		for b.Loop() {
			if l.TryAcquire(1).Granted() {
				granted++
			}
			n++
		}
		checkAll(b, "granted", granted, n)
	})
	b.Run("xrate", func(b *testing.B) {
		l := rejectXRate(b)
		b.ReportAllocs()
		var granted, n int64
		for b.Loop() {
			if l.Allow() {
				granted++
			}
			n++
		}
		checkAll(b, "granted", granted, n)
	})
	b.Run("rategate-leakybucket", func(b *testing.B) {
		l := rejectLeakyBucket(b)
		b.ReportAllocs()
		var granted, n int64
		for b.Loop() {
			if l.TryAcquire(1).Granted() {
				granted++
			}
			n++
		}
		checkAll(b, "granted", granted, n)
	})
	b.Run("rategate-concurrency", func(b *testing.B) {
		l := rejectConcurrency(b)
		b.ReportAllocs()
		var granted, n int64
		for b.Loop() {
			if l.TryAcquire(1).Granted() {
				granted++
			}
			n++
		}
		checkAll(b, "granted", granted, n)
	})
	b.Run("semaphore", func(b *testing.B) {
		s := rejectSemaphore(b)
		b.ReportAllocs()
		var granted, n int64
		for b.Loop() {
			if s.TryAcquire(1) {
				granted++
			}
			n++
		}
		checkAll(b, "granted", granted, n)
	})
}

// BenchmarkRejectShared: every P calls ONE exhausted limiter.
func BenchmarkRejectShared(b *testing.B) {
	b.Run("rategate-tokenbucket", func(b *testing.B) {
		l := rejectTokenBucket(b)
		b.ReportAllocs()
		var granted atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var g int64
			for pb.Next() {
				if l.TryAcquire(1).Granted() {
					g++
				}
			}
			granted.Add(g)
		})
		checkAll(b, "granted", granted.Load(), int64(b.N))
	})
	b.Run("xrate", func(b *testing.B) {
		l := rejectXRate(b)
		b.ReportAllocs()
		var granted atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var g int64
			for pb.Next() {
				if l.Allow() {
					g++
				}
			}
			granted.Add(g)
		})
		checkAll(b, "granted", granted.Load(), int64(b.N))
	})
	b.Run("rategate-leakybucket", func(b *testing.B) {
		l := rejectLeakyBucket(b)
		b.ReportAllocs()
		var granted atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var g int64
			for pb.Next() {
				if l.TryAcquire(1).Granted() {
					g++
				}
			}
			granted.Add(g)
		})
		checkAll(b, "granted", granted.Load(), int64(b.N))
	})
	b.Run("rategate-concurrency", func(b *testing.B) {
		l := rejectConcurrency(b)
		b.ReportAllocs()
		var granted atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var g int64
			for pb.Next() {
				if l.TryAcquire(1).Granted() {
					g++
				}
			}
			granted.Add(g)
		})
		checkAll(b, "granted", granted.Load(), int64(b.N))
	})
	b.Run("semaphore", func(b *testing.B) {
		s := rejectSemaphore(b)
		b.ReportAllocs()
		var granted atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			var g int64
			for pb.Next() {
				if s.TryAcquire(1) {
					g++
				}
			}
			granted.Add(g)
		})
		checkAll(b, "granted", granted.Load(), int64(b.N))
	})
}

// TestLeaseRetryAfter checks the reject configurations say when to retry,
// so that the reject benchmarks measure a fully formed refusal.
func TestLeaseRetryAfter(t *testing.T) {
	l := rejectTokenBucket(t)
	ls := l.TryAcquire(1)
	if ls.Granted() || ls.RetryAfter() <= 0 || ls.RetryAfter() > time.Hour {
		t.Fatalf("exhausted bucket: granted=%v retry=%v", ls.Granted(), ls.RetryAfter())
	}
	if math.Abs(float64(ls.RetryAfter()-time.Hour)) > float64(time.Minute) {
		t.Fatalf("retry after %v, want about an hour", ls.RetryAfter())
	}
}
