package limiter_test

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// Many goroutines hammer one semaphore with TryAcquire, Acquire (some
// canceled) and Release: in use never exceeds the limit, the counters add
// up, and every permit comes back.
func TestHammerConcurrency(t *testing.T) {
	const limit, workers, rounds = 5, 16, 400
	c, _ := NewConcurrency(ConcurrencyOptions{Limit: limit})
	var inUse, peak, granted, refused atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range rounds {
				n := 1 + rng.IntN(3)
				var l Lease
				var err error
				switch i % 3 {
				case 0:
					l = c.TryAcquire(n)
					err = l.Err()
				case 1:
					l, err = c.Acquire(context.Background(), n)
				case 2:
					ctx, cancel := context.WithCancel(context.Background())
					if rng.IntN(2) == 0 {
						cancel() // sometimes before, sometimes racing the wait
					} else {
						go cancel()
					}
					l, err = c.Acquire(ctx, n)
					cancel()
				}
				if err != nil {
					if !errors.Is(err, ErrLimited) && !errors.Is(err, context.Canceled) {
						t.Errorf("unexpected error %v", err)
					}
					refused.Add(1)
					continue
				}
				granted.Add(1)
				atomicMax(&peak, inUse.Add(int64(n)))
				if got := c.InUse(); got > limit {
					t.Errorf("InUse %d > %d", got, limit)
				}
				inUse.Add(-int64(n))
				l.Release()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Fatalf("peak in use %d > %d", p, limit)
	}
	st := c.Stats()
	if st.Granted != granted.Load() || st.Rejected != refused.Load() || st.Available != limit || st.Waiters != 0 || c.InUse() != 0 {
		t.Fatalf("Stats %+v, InUse %d; counted %d granted, %d refused", st, c.InUse(), granted.Load(), refused.Load())
	}
}

// The lock-free TryAcquire of the token bucket and the pacer, hammered at one
// instant: exactly the burst is granted, never one more.
func TestHammerFastPathAtOneInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(10, time.Second), Burst: 25})
		lb, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(10, time.Second)})
		cc, _ := NewConcurrency(ConcurrencyOptions{Limit: 25})
		for round := range 3 {
			var tbN, lbN, ccN atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for range 50 {
						if tb.TryAcquire(1).Granted() {
							tbN.Add(1)
						}
						if lb.TryAcquire(1).Granted() {
							lbN.Add(1)
						}
						if cc.TryAcquire(1).Granted() {
							ccN.Add(1)
						}
					}
				})
			}
			wg.Wait()
			wantTB := int64(25)
			if round > 0 {
				wantTB = 10 // refilled for 1 s at 10/s
			}
			if tbN.Load() != wantTB || lbN.Load() != 1 || ccN.Load() != 25 {
				t.Fatalf("round %d: granted bucket %d (want %d), pacer %d (want 1), semaphore %d (want 25)",
					round, tbN.Load(), wantTB, lbN.Load(), ccN.Load())
			}
			cc.ReleasePermits(25)
			time.Sleep(time.Second)
		}
		if st := tb.Stats(); st.Granted != 45 || st.Rejected != 3*800-45 {
			t.Fatalf("bucket Stats %+v", st)
		}
	})
}

type grantAt struct {
	at time.Duration
	n  int
}

// Goroutines mixing TryAcquire and Acquire of 1 to 3 permits with random
// pauses and deadlines, on every algorithm: the bound holds for the
// weighted grants, and Stats agrees with what the callers saw.
func TestHammerBounds(t *testing.T) {
	const limit = 5
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, limit, QueueOptions{})
		start := time.Now()
		var mu sync.Mutex
		var grants []grantAt
		var refused atomic.Int64
		var inUse, peak atomic.Int64
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), 2))
				for i := range 40 {
					n := 1 + rng.IntN(3)
					var l Lease
					var err error
					if i%2 == 0 {
						l = lim.TryAcquire(n)
						err = l.Err()
					} else {
						ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rng.IntN(2000))*time.Millisecond)
						l, err = lim.Acquire(ctx, n)
						cancel()
					}
					if err != nil {
						refused.Add(1)
					} else {
						atomicMax(&peak, inUse.Add(int64(n)))
						mu.Lock()
						grants = append(grants, grantAt{time.Since(start), n})
						mu.Unlock()
					}
					time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
					if err == nil {
						inUse.Add(-int64(n))
						l.Release()
					}
				}
			})
		}
		wg.Wait()
		slices.SortStableFunc(grants, func(x, y grantAt) int { return cmp.Compare(x.at, y.at) })
		if len(grants) < 40 {
			t.Fatalf("only %d grants", len(grants))
		}
		if st := lim.Stats(); st.Granted != int64(len(grants)) || st.Rejected != refused.Load() {
			t.Fatalf("Stats %+v; callers saw %d granted, %d refused", st, len(grants), refused.Load())
		}
		sum := func(from, to time.Duration) int { // permits granted in [from, to)
			s := 0
			for _, g := range grants {
				if g.at >= from && g.at < to {
					s += g.n
				}
			}
			return s
		}
		sec := time.Second
		switch a.name {
		case "TokenBucket": // ≤ Burst + Rate·t over every [ti, tj]
			for i, gi := range grants {
				for _, gj := range grants[i:] {
					d := gj.at - gi.at
					if s := sum(gi.at, gj.at+1); int64(s-limit)*int64(sec) > int64(limit)*int64(d) {
						t.Fatalf("%d permits in [%v, %v]", s, gi.at, gj.at)
					}
				}
			}
		case "FixedWindow": // ≤ Limit per aligned window
			for _, g := range grants {
				w := g.at.Truncate(sec)
				if s := sum(w, w+sec); s > limit {
					t.Fatalf("%d permits in the window at %v", s, w)
				}
			}
		case "SlidingWindow": // ≤ Limit in every 4 consecutive 250 ms segments
			seg := sec / 4
			for _, g := range grants {
				first := g.at.Truncate(seg)
				for k := range 4 {
					from := first - time.Duration(k)*seg
					if s := sum(from, from+sec); s > limit {
						t.Fatalf("%d permits in the segment window at %v", s, from)
					}
				}
			}
		case "SlidingLog": // ≤ Limit in ANY window of 1 s
			for _, g := range grants {
				if s := sum(g.at, g.at+sec); s > limit {
					t.Fatalf("%d permits in [%v, %v+1s)", s, g.at, g.at)
				}
			}
		case "LeakyBucket": // consecutive grants ≥ k/Rate apart
			for i := 1; i < len(grants); i++ {
				prev := grants[i-1]
				if gap := grants[i].at - prev.at; gap*limit < time.Duration(prev.n)*sec {
					t.Fatalf("grant of %d at %v, next at %v", prev.n, prev.at, grants[i].at)
				}
			}
		case "Concurrency":
			if p := peak.Load(); p > limit {
				t.Fatalf("peak in use %d > %d", p, limit)
			}
		}
	})
}

// SetLimit racing TryAcquire and Acquire: no data race, and a request that a
// lowered limit makes impossible fails with ErrExceedsLimit rather than wait
// forever (the test would deadlock).
func TestSetLimitRacesAcquire(t *testing.T) {
	for _, a := range algos {
		if a.name == "TokenBucket" || a.pacer {
			continue
		}
		t.Run(a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := mustMake(t, a, 3, QueueOptions{}).(limitSetter)
				var wg sync.WaitGroup
				wg.Go(func() {
					for i := range 200 {
						lim.SetLimit(1 + i%5)
						time.Sleep(3 * time.Millisecond)
					}
					lim.SetLimit(1)
				})
				for w := range 4 {
					wg.Go(func() {
						for j := range 40 {
							n := 1 + (w+j)%4
							l, err := lim.Acquire(t.Context(), n)
							if err != nil && !errors.Is(err, ErrExceedsLimit) {
								t.Errorf("Acquire(%d): %v", n, err)
							}
							l2 := lim.TryAcquire(n)
							if err := l2.Err(); err != nil && !errors.Is(err, ErrExceedsLimit) && !errors.Is(err, ErrLimited) {
								t.Errorf("TryAcquire(%d): %v", n, err)
							}
							time.Sleep(time.Millisecond)
							l.Release()
							l2.Release()
						}
					})
				}
				wg.Wait()
			})
		})
	}
}

// Releases racing SetLimit lose no permits: once every lease is back, the
// whole limit is free. (Capping a release at a limit read between
// SetLimit's two stores used to lose permits for good.) Releasing a lease
// twice does not grow the semaphore beyond its limit.
func TestConcurrencyReleaseRacesSetLimit(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencyOptions{Limit: 4})
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 100000 {
			c.SetLimit(1 + i%4)
		}
		stop.Store(true)
	})
	for range 3 {
		wg.Go(func() {
			for !stop.Load() {
				if l := c.TryAcquire(1); l.Granted() {
					l.Release()
				}
			}
		})
	}
	wg.Wait()
	c.SetLimit(4)
	if c.InUse() != 0 || c.Stats().Available != 4 {
		t.Fatalf("all released: InUse %d, Available %d; want 0 and 4", c.InUse(), c.Stats().Available)
	}
	l := c.TryAcquire(2)
	l.Release()
	l.Release()
	if c.InUse() != 0 || c.Stats().Available != 4 {
		t.Fatalf("after a double Release: InUse %d, Available %d; want 0 and 4", c.InUse(), c.Stats().Available)
	}
}
