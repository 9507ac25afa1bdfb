package adaptive

import (
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// The Report path does not allocate: not for the concurrency limiter,
// whose limit changes are a semaphore's SetLimit, and not for the rate
// limiter while its rate holds. A change of rate is a TokenBucket.SetRate,
// which allocates the bucket's new configuration: once per rise of 1% or
// more, and once per decrease (TestRateReportAllocsWhileClimbing counts).
func TestReportAllocs(t *testing.T) {
	rate, err := NewRateLimiter(RateOptions{Floor: perSec(1), Initial: limiter.Per(1e9, time.Second), Ceiling: limiter.Per(1e9, time.Second), Burst: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer rate.Close()
	conc, err := NewConcurrencyLimiter(ConcurrencyOptions{Initial: 10, Ceiling: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer conc.Close()
	for _, tc := range []struct {
		name string
		lim  limiter.Limiter
		o    limiter.Outcome
	}{
		{"rate/succeeded", rate, limiter.Succeeded},
		{"rate/failed", rate, limiter.Failed},
		{"concurrency/succeeded", conc, limiter.Succeeded},
		{"concurrency/throttled", conc, limiter.Throttled},
	} {
		allocs := testing.AllocsPerRun(10000, func() {
			lease := tc.lim.TryAcquire(1)
			if !lease.Granted() {
				t.Fatalf("%s: %v", tc.name, lease.Err())
			}
			lease.Report(tc.o, time.Millisecond)
			lease.Release()
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per TryAcquire, Report and Release, want 0", tc.name, allocs)
		}
	}
}

// While the rate climbs, one report in so many changes the bucket's rate.
func TestRateReportAllocsWhileClimbing(t *testing.T) {
	lim, err := NewRateLimiter(RateOptions{Floor: perSec(1), Initial: perSec(10), Ceiling: limiter.Per(1e9, time.Second), Burst: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	const n = 20000
	leases := make([]limiter.Lease, n)
	for i := range leases {
		if leases[i] = lim.TryAcquire(1); !leases[i].Granted() {
			t.Fatal(leases[i].Err())
		}
	}
	start := perSecond(lim.Rate())
	allocs := testing.AllocsPerRun(1, func() {
		for _, l := range leases {
			l.Report(limiter.Succeeded, 0)
		}
	})
	t.Logf("%d successes took the rate from %.0f/s to %.0f/s with %.0f allocations (%.4f per report)", n, start, perSecond(lim.Rate()), allocs, allocs/n)
	if allocs/n > 0.05 {
		t.Errorf("%.0f allocations for %d reports", allocs, n)
	}
}

func BenchmarkReport(b *testing.B) {
	rate, err := NewRateLimiter(RateOptions{Floor: perSec(1), Initial: limiter.Per(1e9, time.Second), Ceiling: limiter.Per(1e9, time.Second), Burst: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer rate.Close()
	conc, err := NewConcurrencyLimiter(ConcurrencyOptions{Initial: 10, Ceiling: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer conc.Close()
	for _, bc := range []struct {
		name string
		lim  limiter.Limiter
	}{{"rate", rate}, {"concurrency", conc}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				lease := bc.lim.TryAcquire(1)
				lease.Report(limiter.Succeeded, time.Millisecond)
				lease.Release()
			}
		})
	}
}
