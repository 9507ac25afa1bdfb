package bench

// BenchmarkRedis compares one decision of redislimit with go-redis/redis_rate
// (its Allow, GCRA in Lua) against the same redis-server on loopback, beside
// a bare PING: the round trip no Redis-backed limiter can beat. The
// parallel variants run 64 goroutines against ONE key (b.SetParallelism),
// so their ns/op is wall time per decision of all goroutines together:
// 1e9/ns is decisions per second. Results: results/redis.md.
//
// The server is a real redis-server when installed (else the embedded
// miniredis, which says nothing about Redis: the benchmarks skip).

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/redislimit"
)

var (
	redisOnce sync.Once
	redisSrv  *redistest.Server
	redisErr  error
)

// redisServer starts one redis-server for every benchmark of the binary;
// it dies with the process.
func redisServer(b testing.TB) *redistest.Server {
	b.Helper()
	if redistest.ServerPath() == "" {
		b.Skip("redis-server is not installed")
	}
	redisOnce.Do(func() { redisSrv, redisErr = redistest.StartReal() })
	if redisErr != nil {
		b.Fatal(redisErr)
	}
	return redisSrv
}

// Every limiter admits every request: 10^5 permits a second, a burst of
// 10^9. Each decision still writes the limit's state, as a limiting one
// does: at 10^9 a second redis_rate's increment (10^-9 s) is below the
// precision of its float clock (seconds since 2017, 6·10^-8 s apart), so
// it never writes and its state never moves (redisRateNoWrite).
const (
	redisRate        = 100_000
	redisBurst       = 1_000_000_000
	redisRateNoWrite = 1_000_000_000
)

func redisClient(b testing.TB, ctxTimeout bool) *redis.Client {
	s := redisServer(b)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: ctxTimeout, PoolSize: 64})
	b.Cleanup(func() { c.Close() })
	return c
}

type decide func(ctx context.Context) bool

// failure is the error of the last refused lease, for the benchmarks'
// failure messages.
var failure atomic.Pointer[error]

// granted reports whether l was granted, and keeps its error when not.
func granted(l limiter.Lease) bool {
	if !l.Granted() {
		err := l.Err()
		failure.Store(&err)
	}
	return l.Granted()
}

// failed says why the last decision failed, as well as it is known.
func failed() string {
	if err := failure.Load(); err != nil {
		return fmt.Sprintf("refused or failed (last refusal: %v)", *err)
	}
	return "refused or failed"
}

// redisImpls returns the implementations the benchmarks compare, by name.
// Every limiter admits every request, so each call is one granted decision.
func redisImpls(b testing.TB) map[string]decide {
	plain := redisClient(b, false)
	bounded := redisClient(b, true)
	rr := redis_rate.NewLimiter(plain)
	rrLimit := redis_rate.Limit{Rate: redisRate, Burst: redisBurst, Period: time.Second}
	rrNoWrite := redis_rate.Limit{Rate: redisRateNoWrite, Burst: redisBurst, Period: time.Second}
	tbOpts := limiter.TokenBucketOptions{Rate: limiter.Per(redisRate, time.Second), Burst: redisBurst}
	tb := func(c *redis.Client, key string) *redislimit.TokenBucket {
		l := must(redislimit.NewTokenBucket(redislimit.Options{Client: c, Key: key}, tbOpts))
		b.Cleanup(func() { l.Close() })
		return l
	}
	tbPlain := tb(plain, "bench-plain")
	tbBounded := tb(bounded, "bench-bounded")
	chain1 := must(redislimit.Chain(tb(bounded, "{bench-chain1}a")))
	chain2 := must(redislimit.Chain(tb(bounded, "{bench-chain2}a"), tb(bounded, "{bench-chain2}b")))
	// The floor of any script: EVALSHA of a script that returns what the
	// token bucket's returns and does nothing, with the same arguments.
	nop := redis.NewScript(`return {0, 0, 0, 0}`)
	nopArgs := []any{"10", "1", "10000000000", "1"}
	return map[string]decide{
		"ping": func(ctx context.Context) bool { return bounded.Ping(ctx).Err() == nil },
		"script-floor": func(ctx context.Context) bool {
			return nop.Run(ctx, bounded, []string{"rategate:tb:{bench-nop}"}, nopArgs...).Err() == nil
		},
		"redis_rate": func(ctx context.Context) bool {
			r, err := rr.Allow(ctx, "bench-rr", rrLimit)
			return err == nil && r.Allowed > 0
		},
		"redis_rate-nowrite": func(ctx context.Context) bool {
			r, err := rr.Allow(ctx, "bench-rr-nowrite", rrNoWrite)
			return err == nil && r.Allowed > 0
		},
		// redislimit with a client that honours context deadlines
		// (ContextTimeoutEnabled): the round trip runs in the caller.
		"redislimit-tb": func(context.Context) bool { return granted(tbBounded.TryAcquire(1)) },
		// with a default client: the round trip runs in a goroutine of its
		// own, which the caller stops waiting for after Options.Timeout.
		"redislimit-tb-defaultclient": func(context.Context) bool { return granted(tbPlain.TryAcquire(1)) },
		// redislimit.Chain of one and of two token buckets: one script call.
		"chain-1": func(context.Context) bool { return granted(chain1.TryAcquire(1)) },
		"chain-2": func(context.Context) bool { return granted(chain2.TryAcquire(1)) },
	}
}

var (
	redisOrder  = []string{"ping", "script-floor", "redis_rate", "redislimit-tb", "chain-1", "chain-2"}
	clientOrder = []string{"ping", "redislimit-tb", "redislimit-tb-defaultclient"}
	sharedOrder = []string{"ping", "redis_rate", "redislimit-tb", "redislimit-tb-defaultclient", "chain-2"}
)

// BenchmarkRedisDecision is one decision's latency on one goroutine.
func BenchmarkRedisDecision(b *testing.B) {
	impls := redisImpls(b)
	ctx := context.Background()
	for _, name := range append(redisOrder, "redislimit-tb-defaultclient") {
		f := impls[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !f(ctx) {
					b.Fatal(failed())
				}
			}
		})
	}
}

// BenchmarkRedisShared64 is 64 goroutines deciding on one key.
func BenchmarkRedisShared64(b *testing.B) {
	impls := redisImpls(b)
	ctx := context.Background()
	for _, name := range sharedOrder {
		f := impls[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !f(ctx) {
						b.Error(failed())
						return
					}
				}
			})
		})
	}
}

// BenchmarkRedisPaired measures one decision of each implementation in
// turn (in a new random order every round), in one loop, so that all see
// the same load (a shared 2-core VM's load moves from second to second and
// skews benchmarks run one after another), and reports each one's median
// latency in µs and the ratios of medians the README quotes: redislimit's
// token bucket against PING and against redis_rate, a chain of two against
// the token bucket alone. ns/op is one round of all of them.
func BenchmarkRedisPaired(b *testing.B) {
	p50 := paired(b, redisOrder)
	b.ReportMetric(p50["redislimit-tb"]/p50["ping"], "x-tb/ping")
	b.ReportMetric(p50["redislimit-tb"]/p50["redis_rate"], "x-tb/redis_rate")
	b.ReportMetric(p50["script-floor"]/p50["ping"], "x-floor/ping")
	b.ReportMetric(p50["chain-2"]/p50["redislimit-tb"], "x-chain2/tb")
	b.ReportMetric(p50["chain-1"]/p50["redislimit-tb"], "x-chain1/tb")
}

// BenchmarkRedisPairedClient is BenchmarkRedisPaired for the token bucket
// with a client that honours context deadlines and with a default one,
// whose round trips run in goroutines of their own (kept apart: a
// goroutine that outlives its call slows whatever runs next).
func BenchmarkRedisPairedClient(b *testing.B) {
	p50 := paired(b, clientOrder)
	b.ReportMetric(p50["redislimit-tb-defaultclient"]/p50["redislimit-tb"], "x-default/ctx")
}

// paired runs the implementations named in order in turn, in a new random
// order every round, and reports and returns each one's median latency in
// µs.
func paired(b *testing.B, names []string) map[string]float64 {
	impls := redisImpls(b)
	ctx := context.Background()
	lat := make([][]time.Duration, len(names))
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	for b.Loop() {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, j := range order {
			t0 := time.Now()
			if !impls[names[j]](ctx) {
				b.Fatal(failed())
			}
			lat[j] = append(lat[j], time.Since(t0))
		}
	}
	p50 := map[string]float64{}
	for j, name := range names {
		l := lat[j]
		slices.Sort(l)
		p50[name] = float64(l[len(l)/2]) / 1e3
		b.ReportMetric(p50[name], "µs-p50-"+name)
	}
	return p50
}

// BenchmarkRedisShared64Paired is BenchmarkRedisShared64 in turns: each
// round runs, for each implementation in turn (in a random order), 64
// goroutines that make 16 decisions each on one key, and times the round's
// wall clock; it reports each one's median decisions per second over the
// rounds, and redislimit's token bucket against redis_rate. ns/op is one
// round of all of them.
func BenchmarkRedisShared64Paired(b *testing.B) {
	impls := redisImpls(b)
	ctx := context.Background()
	const workers, each = 64, 16
	rates := make([][]float64, len(sharedOrder))
	order := make([]int, len(sharedOrder))
	for i := range order {
		order[i] = i
	}
	for b.Loop() {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, j := range order {
			f := impls[sharedOrder[j]]
			var wg sync.WaitGroup
			t0 := time.Now()
			for range workers {
				wg.Go(func() {
					for range each {
						if !f(ctx) {
							b.Error(failed())
							return
						}
					}
				})
			}
			wg.Wait()
			rates[j] = append(rates[j], workers*each/time.Since(t0).Seconds())
		}
	}
	med := map[string]float64{}
	for j, name := range sharedOrder {
		r := rates[j]
		slices.Sort(r)
		med[name] = r[len(r)/2]
		b.ReportMetric(med[name], "decisions/s-"+name)
	}
	b.ReportMetric(med["redislimit-tb"]/med["redis_rate"], "x-tb/redis_rate")
	b.ReportMetric(med["redislimit-tb-defaultclient"]/med["redis_rate"], "x-tbdefault/redis_rate")
}

// BenchmarkRedisBound is what bounding one round trip costs the client:
// the context.WithTimeout (and its cancel) that redislimit runs every
// script call under, so that Options.Timeout ends every wait inside the
// client. redis_rate's Allow runs under the caller's context alone.
func BenchmarkRedisBound(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, cancel := context.WithTimeout(context.Background(), redislimit.DefaultTimeout)
		cancel()
	}
}

var redisCost = flag.Bool("redis.cost", false, "run TestRedisScriptCost: Redis's own time per script call (INFO commandstats)")

// TestRedisScriptCost measures what each implementation's script costs
// Redis itself (INFO commandstats: microseconds per EVALSHA), the best of 3
// batches of 5,000 calls each: the part of a decision's round trip no
// client can save.
func TestRedisScriptCost(t *testing.T) {
	if !*redisCost {
		t.Skip("-redis.cost not set")
	}
	impls := redisImpls(t)
	c := redisClient(t, true)
	ctx := context.Background()
	for _, name := range []string{"script-floor", "redis_rate", "redis_rate-nowrite", "redislimit-tb", "chain-1", "chain-2"} {
		best := math.Inf(1)
		for range 3 {
			if err := c.ConfigResetStat(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			for range 5000 {
				if !impls[name](ctx) {
					t.Fatal(failed())
				}
			}
			stats, err := c.Info(ctx, "commandstats").Result()
			if err != nil {
				t.Fatal(err)
			}
			best = min(best, evalshaMicros(stats))
		}
		t.Logf("%-14s %.2f µs of Redis's time per call", name, best)
	}
}

// evalshaMicros reads EVALSHA's usec_per_call from INFO commandstats.
func evalshaMicros(stats string) float64 {
	for line := range strings.Lines(stats) {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		_, rest, _ := strings.Cut(line, "usec_per_call=")
		v, _ := strconv.ParseFloat(strings.SplitN(rest, ",", 2)[0], 64)
		return v
	}
	return math.NaN()
}
