package bench

// BenchmarkPartitioned compares one decision of redislimit.Partitioned (a
// global rate decided locally from partitions leased in Redis) with the
// round-trip limiters on the same redis-server: redislimit.NewTokenBucket
// and go-redis/redis_rate. Every limiter admits (10^9 a second, ptRate), so
// the numbers are the cost of a decision, not of a refusal. Results:
// results/partitioned.md.
//
// TestPartitionedTraffic (run with -partitioned) measures what the local
// decisions cost in Redis calls: lease round trips per second per process,
// with how evenly saturating processes share the rate, for several
// partition counts and lease TTLs.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/redislimit"
)

// warmPartitioned returns a Partitioned limiter that already holds
// partitions, so that TryAcquire decides locally from the first call.
func warmPartitioned(b testing.TB, key string, rate, burst, parts int) *redislimit.Partitioned {
	b.Helper()
	p := must(redislimit.NewPartitioned(redislimit.Options{Client: redisClient(b, true), Key: key},
		redislimit.PartitionedOptions{Rate: limiter.Per(rate, time.Second), Burst: burst, Partitions: parts}))
	b.Cleanup(func() { p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.Acquire(ctx, 1); err != nil { // waits out a fresh server's quarantine
		b.Fatal(err)
	}
	return p
}

// ptRate is the rate and burst of BenchmarkPartitioned's limiters. (At this
// rate redis_rate does not write its state: see redisRate.)
const ptRate = 1_000_000_000

func partitionedImpls(b testing.TB) map[string]decide {
	bounded := redisClient(b, true)
	rr := redis_rate.NewLimiter(bounded)
	rrLimit := redis_rate.Limit{Rate: ptRate, Burst: ptRate, Period: time.Second}
	tb := must(redislimit.NewTokenBucket(redislimit.Options{Client: bounded, Key: "bench-pt-tb"},
		limiter.TokenBucketOptions{Rate: limiter.Per(ptRate, time.Second), Burst: ptRate}))
	b.Cleanup(func() { tb.Close() })
	pt := warmPartitioned(b, "bench-pt", ptRate, ptRate, 16)
	local := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(ptRate, time.Second), Burst: ptRate}))
	origin := time.Now()
	return map[string]decide{
		// The floor of any local decision: reading the monotonic clock.
		"clock": func(context.Context) bool { return time.Since(origin) >= 0 },
		// A local token bucket of package limiter (one process's limit).
		"limiter-tb": func(context.Context) bool { return local.TryAcquire(1).Granted() },
		"partitioned": func(ctx context.Context) bool {
			if pt.TryAcquire(1).Granted() {
				return true
			}
			// Refused only after idling (while other benchmarks ran, its
			// partitions went back): wait for a lease, then go on.
			_, err := pt.Acquire(ctx, 1)
			return err == nil
		},
		"redislimit-tb": func(context.Context) bool { return tb.TryAcquire(1).Granted() },
		"redis_rate": func(ctx context.Context) bool {
			r, err := rr.Allow(ctx, "bench-pt-rr", rrLimit)
			return err == nil && r.Allowed > 0
		},
	}
}

var partitionedOrder = []string{"clock", "limiter-tb", "partitioned", "redislimit-tb", "redis_rate"}

// BenchmarkPartitioned is one decision on one goroutine, and decisions of
// all GOMAXPROCS goroutines at once (Parallel), with decisions/s reported.
func BenchmarkPartitioned(b *testing.B) {
	impls := partitionedImpls(b)
	ctx := context.Background()
	for _, name := range partitionedOrder {
		f := impls[name]
		b.Run(name, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				if !f(ctx) {
					b.Fatal("refused or failed")
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
		})
	}
	for _, name := range partitionedOrder {
		f := impls[name]
		b.Run("Parallel/"+name, func(b *testing.B) {
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !f(ctx) {
						b.Error("refused or failed")
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
		})
	}
}

var partitionedTraffic = flag.Bool("partitioned", false, "measure Partitioned's lease traffic and fairness (TestPartitionedTraffic, about 40 s)")

// trafficCase is one configuration of TestPartitionedTraffic.
type trafficCase struct {
	name       string
	parts      int
	ttl        time.Duration
	busy, idle int // processes (limiters) with saturating demand, and without demand
}

// TestPartitionedTraffic runs 20,000 permits/s (burst 2,000) shared by
// several Partitioned limiters on one key, each standing for a process (its
// own owner and lease keeper; in one process here so that the measurement
// is cheap), for 4 s after a 2 s warm-up, and reports per limiter the lease
// round trips per second and the share of the rate, with the total
// throughput. Busy limiters take 10 permits at a time through Acquire from 2
// goroutines each.
func TestPartitionedTraffic(t *testing.T) {
	if !*partitionedTraffic {
		t.Skip("run with -partitioned")
	}
	cases := []trafficCase{
		{"4 busy, 16 partitions, TTL 1s", 16, time.Second, 4, 0},
		{"4 busy, 64 partitions, TTL 1s", 64, time.Second, 4, 0},
		{"4 busy, 4 partitions, TTL 1s", 4, time.Second, 4, 0},
		{"4 busy, 16 partitions, TTL 300ms", 16, 300 * time.Millisecond, 4, 0},
		{"4 busy, 16 partitions, TTL 5s", 16, 5 * time.Second, 4, 0},
		{"3 busy, 16 partitions, TTL 1s", 16, time.Second, 3, 0},
		{"1 busy + 2 idle, 16 partitions, TTL 1s", 16, time.Second, 1, 2},
	}
	var out strings.Builder
	fmt.Fprintln(&out, "| case | throughput (% of 20,000/s) | share per busy limiter (% of rate) | lease calls/s per busy limiter | per idle limiter | partitions held |")
	fmt.Fprintln(&out, "| --- | ---: | --- | --- | --- | --- |")
	for i, c := range cases {
		if f := os.Getenv("PARTITIONED_CASES"); f != "" && !strings.Contains(c.name, f) {
			continue
		}
		row := runTraffic(t, fmt.Sprintf("bench-pt-traffic-%d-%d", i, time.Now().UnixNano()), c)
		fmt.Fprintln(&out, row)
		t.Log(row)
	}
	fmt.Print(out.String())
	if f := os.Getenv("PARTITIONED_OUT"); f != "" {
		if err := os.WriteFile(f, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runTraffic(t *testing.T, key string, c trafficCase) string {
	const rate, burst = 20_000, 2_000
	const warm, measure = 2 * time.Second, 4 * time.Second
	n := c.busy + c.idle
	ps := make([]*redislimit.Partitioned, n)
	for i := range ps {
		ps[i] = must(redislimit.NewPartitioned(redislimit.Options{Client: redisClient(t, true), Key: key},
			redislimit.PartitionedOptions{Rate: limiter.Per(rate, time.Second), Burst: burst, Partitions: c.parts, LeaseTTL: c.ttl}))
		defer ps[i].Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	counts := make([]atomic.Int64, n)
	for i := range c.busy {
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					if _, err := ps[i].Acquire(ctx, 10); err == nil {
						counts[i].Add(10)
					}
				}
			})
		}
	}
	time.Sleep(warm)
	before := make([]int64, n)
	calls := make([]int64, n)
	for i := range ps {
		before[i], calls[i] = counts[i].Load(), ps[i].LeaseCalls()
	}
	time.Sleep(measure)
	var total int64
	shares, busyCalls, idleCalls, held := []string{}, []string{}, []string{}, []string{}
	for i := range ps {
		got := counts[i].Load() - before[i]
		total += got
		cps := float64(ps[i].LeaseCalls()-calls[i]) / measure.Seconds()
		held = append(held, fmt.Sprint(ps[i].Partitions()))
		if i < c.busy {
			shares = append(shares, fmt.Sprintf("%.1f", 100*float64(got)/(rate*measure.Seconds())))
			busyCalls = append(busyCalls, fmt.Sprintf("%.1f", cps))
		} else {
			idleCalls = append(idleCalls, fmt.Sprintf("%.1f", cps))
		}
	}
	cancel()
	wg.Wait()
	if len(idleCalls) == 0 {
		idleCalls = []string{"-"}
	}
	slices.Sort(held)
	return fmt.Sprintf("| %s | %.1f | %s | %s | %s | %s |", c.name, 100*float64(total)/(rate*measure.Seconds()),
		strings.Join(shares, ", "), strings.Join(busyCalls, ", "), strings.Join(idleCalls, ", "), strings.Join(held, ", "))
}
