package adaptive

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
)

func perSec(n int) limiter.Rate { return limiter.Per(n, time.Second) }

func newRate(t *testing.T, opts RateOptions) *RateLimiter {
	t.Helper()
	lim, err := NewRateLimiter(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	return lim
}

func grant(t *testing.T, lim limiter.Limiter) limiter.Lease {
	t.Helper()
	lease, err := lim.Acquire(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

func TestRateThrottledLowersAtOnce(t *testing.T) {
	lim := newRate(t, RateOptions{Floor: perSec(1), Initial: perSec(100), Ceiling: perSec(1000), Burst: 10})
	a, b := grant(t, lim), grant(t, lim)
	a.Report(limiter.Throttled, 0)
	after := lim.Rate()
	if compareRates(after, perSec(90)) > 0 {
		t.Fatalf("rate %v after a throttle, want at most 90%% of 100/s", after)
	}
	// b was granted before the decrease: its throttle was answered by it.
	b.Report(limiter.Throttled, 0)
	if compareRates(lim.Rate(), after) != 0 {
		t.Fatalf("a throttle of a lease granted before the decrease moved the rate: %v, then %v", after, lim.Rate())
	}
	// c was granted after it: the decrease was not enough.
	c := grant(t, lim)
	c.Report(limiter.Throttled, 0)
	if compareRates(lim.Rate(), after) >= 0 {
		t.Fatalf("a throttle of a lease granted after the decrease left the rate at %v", lim.Rate())
	}
}

func TestRateIgnoresFailedAndUnknown(t *testing.T) {
	lim := newRate(t, RateOptions{Floor: perSec(1), Initial: perSec(100), Ceiling: perSec(1000), Burst: 10})
	before := lim.Rate()
	for _, o := range []limiter.Outcome{limiter.Failed, limiter.Unknown, limiter.Failed, limiter.Unknown} {
		grant(t, lim).Report(o, time.Millisecond)
	}
	if compareRates(lim.Rate(), before) != 0 {
		t.Fatalf("Failed and Unknown moved the rate from %v to %v", before, lim.Rate())
	}
	// Reports on leases that were not granted do nothing either.
	lim.TryAcquire(11).Report(limiter.Throttled, 0)
	var zero limiter.Lease
	zero.Report(limiter.Throttled, 0)
	if compareRates(lim.Rate(), before) != 0 {
		t.Fatalf("a report on a lease not granted moved the rate from %v to %v", before, lim.Rate())
	}
}

// Successes alone take the rate to the ceiling, exactly, and throttles
// alone to the floor, exactly; never past either.
func TestRateFloorAndCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		floor, ceil := limiter.Per(3, time.Second), limiter.Per(250, time.Second)
		lim := newRate(t, RateOptions{Floor: floor, Initial: perSec(20), Ceiling: ceil})
		for range 3000 {
			grant(t, lim).Report(limiter.Succeeded, time.Millisecond)
			if compareRates(lim.Rate(), ceil) > 0 {
				t.Fatalf("rate %v above the ceiling %v", lim.Rate(), ceil)
			}
		}
		if compareRates(lim.Rate(), ceil) != 0 {
			t.Fatalf("after 3000 successes the rate is %v, want the ceiling %v", lim.Rate(), ceil)
		}
		for range 100 {
			grant(t, lim).Report(limiter.Throttled, time.Millisecond)
			if compareRates(lim.Rate(), floor) < 0 {
				t.Fatalf("rate %v below the floor %v", lim.Rate(), floor)
			}
		}
		if compareRates(lim.Rate(), floor) != 0 {
			t.Fatalf("after 100 throttles the rate is %v, want the floor %v", lim.Rate(), floor)
		}
	})
}

// A caller that uses a small part of the rate does not push it up as one
// that uses it all does: growth is counted in successes.
func TestRateClimbsWithUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := newRate(t, RateOptions{Floor: perSec(1), Initial: perSec(10), Ceiling: perSec(10000)})
		idle := newRate(t, RateOptions{Floor: perSec(1), Initial: perSec(10), Ceiling: perSec(10000)})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		for {
			lease, err := busy.Acquire(ctx, 1)
			if err != nil {
				break
			}
			lease.Report(limiter.Succeeded, 0)
		}
		for range 4 { // 2 calls a second
			grant(t, idle).Report(limiter.Succeeded, 0)
			time.Sleep(500 * time.Millisecond)
		}
		b, i := perSecond(busy.Rate()), perSecond(idle.Rate())
		if b < 100 || i != 10 {
			t.Fatalf("after 2 s: busy caller's rate %.1f/s (want ≥ 100/s: 5 doublings), idle caller's %.1f/s (want 10/s)", b, i)
		}
	})
}

func TestRateChainForwardsReports(t *testing.T) {
	lim := newRate(t, RateOptions{Floor: perSec(1), Initial: perSec(100), Ceiling: perSec(1000), Burst: 5})
	other, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: perSec(1000), Burst: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ch := limiter.Chain(other, lim)
	lease := ch.TryAcquire(1)
	if !lease.Granted() {
		t.Fatal(lease.Err())
	}
	lease.Report(limiter.Throttled, 0)
	if compareRates(lim.Rate(), perSec(100)) >= 0 {
		t.Fatalf("a throttle reported on a chain's lease left the rate at %v", lim.Rate())
	}
}

func TestRateClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newRate(t, RateOptions{Floor: perSec(1), Ceiling: perSec(10)})
		lease := grant(t, lim)
		errc := make(chan error)
		go func() { _, err := lim.Acquire(context.Background(), 1); errc <- err }()
		synctest.Wait()
		if st := lim.Stats(); st.Waiters != 1 || st.Granted != 1 {
			t.Fatalf("Stats %+v, want 1 waiter and 1 granted", st)
		}
		lim.Close()
		if err := <-errc; !errors.Is(err, limiter.ErrClosed) {
			t.Fatalf("waiter got %v, want ErrClosed", err)
		}
		if l := lim.TryAcquire(1); !errors.Is(l.Err(), limiter.ErrClosed) {
			t.Fatalf("TryAcquire after Close: %v, want ErrClosed", l.Err())
		}
		lease.Report(limiter.Succeeded, 0) // still taken, no panic
		lease.Release()
	})
}

func newConc(t *testing.T, opts ConcurrencyOptions) *ConcurrencyLimiter {
	t.Helper()
	lim, err := NewConcurrencyLimiter(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	return lim
}

func TestConcurrencyThrottledAndRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newConc(t, ConcurrencyOptions{Floor: 2, Initial: 20, Ceiling: 100})
		var leases []limiter.Lease
		for range 20 {
			leases = append(leases, grant(t, lim))
		}
		if l := lim.TryAcquire(1); l.Granted() {
			t.Fatal("granted a 21st permit at limit 20")
		}
		time.Sleep(time.Millisecond)
		leases[0].Report(limiter.Throttled, time.Millisecond)
		if lim.Limit() != 18 {
			t.Fatalf("limit %d after a throttle, want 18 (a tenth less)", lim.Limit())
		}
		leases[1].Report(limiter.Throttled, time.Millisecond) // at the same instant: admitted before the cut
		if lim.Limit() != 18 {
			t.Fatalf("limit %d after a second throttle at once, want 18", lim.Limit())
		}
		for _, l := range leases {
			l.Release()
		}
		if lim.InUse() != 0 {
			t.Fatalf("%d in use after every release", lim.InUse())
		}
		for range 100 {
			time.Sleep(time.Second)
			l := grant(t, lim)
			l.Report(limiter.Throttled, time.Millisecond)
			l.Release()
		}
		if lim.Limit() != 2 {
			t.Fatalf("limit %d after 100 throttles, want the floor 2", lim.Limit())
		}
	})
}

// Calls that never queue take the limit to the ceiling and no further.
func TestConcurrencyCeiling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newConc(t, ConcurrencyOptions{Initial: 4, Ceiling: 300})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			lease, err := lim.Acquire(ctx, 1)
			if err != nil {
				break
			}
			if lim.InUse() > lim.Limit() || lim.Limit() > 300 {
				t.Fatalf("%d in use, limit %d, ceiling 300", lim.InUse(), lim.Limit())
			}
			wg.Go(func() {
				time.Sleep(10 * time.Millisecond)
				lease.Report(limiter.Succeeded, 10*time.Millisecond)
				lease.Release()
			})
		}
		if lim.Limit() != 300 {
			t.Fatalf("limit %d after 10 s without queueing, want the ceiling 300", lim.Limit())
		}
	})
}

// The rate set in the bucket is never above the controller's, never outside
// [Floor, Ceiling], and within 0.1% of it (1,000 events or more per second,
// minute, hour or day).
func TestRateRounding(t *testing.T) {
	floor, ceil := limiter.Per(1, 24*time.Hour), limiter.Per(5e9, time.Second)
	lim := newRate(t, RateOptions{Floor: floor, Ceiling: ceil})
	for r := perSecond(floor); r < 2*perSecond(ceil); r *= 1.37 {
		got := lim.rounded(r)
		g := perSecond(got)
		if compareRates(got, floor) < 0 || compareRates(got, ceil) > 0 {
			t.Fatalf("rounded(%g) = %v, outside [%v, %v]", r, got, floor, ceil)
		}
		switch {
		case r >= perSecond(ceil):
			if compareRates(got, ceil) != 0 {
				t.Fatalf("rounded(%g) = %v, want the ceiling", r, got)
			}
		case r*86400 < 1:
			if compareRates(got, floor) != 0 {
				t.Fatalf("rounded(%g) = %v, want the floor", r, got)
			}
		case g > r*(1+1e-12) || (r*86400 >= 1000 && g < r*0.999):
			t.Fatalf("rounded(%g) = %v (%g/s): above it, or more than 0.1%% under", r, got, g)
		}
	}
}
