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
	"runtime"
	"slices"
	"sync"
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

// Every limiter admits: 10^9 permits a second, a burst of 10^9.
const redisRate = 1_000_000_000

func redisClient(b testing.TB, ctxTimeout bool) *redis.Client {
	s := redisServer(b)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: ctxTimeout, PoolSize: 64})
	b.Cleanup(func() { c.Close() })
	return c
}

type decide func(ctx context.Context) bool

func redisImpls(b testing.TB) map[string]decide {
	plain := redisClient(b, false)
	bounded := redisClient(b, true)
	rr := redis_rate.NewLimiter(plain)
	rrLimit := redis_rate.Limit{Rate: redisRate, Burst: redisRate, Period: time.Second}
	tbOpts := limiter.TokenBucketOptions{Rate: limiter.Per(redisRate, time.Second), Burst: redisRate}
	tbPlain := must(redislimit.NewTokenBucket(redislimit.Options{Client: plain, Key: "bench-plain"}, tbOpts))
	tbBounded := must(redislimit.NewTokenBucket(redislimit.Options{Client: bounded, Key: "bench-bounded"}, tbOpts))
	b.Cleanup(func() { tbPlain.Close(); tbBounded.Close() })
	return map[string]decide{
		"ping": func(ctx context.Context) bool { return plain.Ping(ctx).Err() == nil },
		"redis_rate": func(ctx context.Context) bool {
			r, err := rr.Allow(ctx, "bench-rr", rrLimit)
			return err == nil && r.Allowed > 0
		},
		// redislimit with a client that honours context deadlines
		// (ContextTimeoutEnabled): the round trip runs in the caller.
		"redislimit-tb": func(context.Context) bool { return tbBounded.TryAcquire(1).Granted() },
		// with a default client: the round trip runs beside the caller,
		// who stops waiting after Options.Timeout.
		"redislimit-tb-defaultclient": func(context.Context) bool { return tbPlain.TryAcquire(1).Granted() },
	}
}

var redisOrder = []string{"ping", "redis_rate", "redislimit-tb", "redislimit-tb-defaultclient"}

// BenchmarkRedisDecision is one decision's latency on one goroutine.
func BenchmarkRedisDecision(b *testing.B) {
	impls := redisImpls(b)
	ctx := context.Background()
	for _, name := range redisOrder {
		f := impls[name]
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if !f(ctx) {
					b.Fatal("refused or failed")
				}
			}
		})
	}
}

// BenchmarkRedisShared64 is 64 goroutines deciding on one key.
func BenchmarkRedisShared64(b *testing.B) {
	impls := redisImpls(b)
	ctx := context.Background()
	for _, name := range redisOrder {
		f := impls[name]
		b.Run(name, func(b *testing.B) {
			b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !f(ctx) {
						b.Error("refused or failed")
						return
					}
				}
			})
		})
	}
}

// BenchmarkRedisPaired measures one decision of each implementation in
// turn, in one loop, so that all see the same load (a shared 2-core VM's
// load moves from second to second and skews benchmarks run one after
// another), and reports each one's median and 90th percentile latency
// in µs; ns/op is one round of all four.
func BenchmarkRedisPaired(b *testing.B) {
	impls := redisImpls(b)
	ctx := context.Background()
	lat := make([][]time.Duration, len(redisOrder))
	i := 0
	for b.Loop() {
		for k := range redisOrder {
			j := (k + i) % len(redisOrder) // rotate who goes first
			t0 := time.Now()
			if !impls[redisOrder[j]](ctx) {
				b.Fatal("refused or failed")
			}
			lat[j] = append(lat[j], time.Since(t0))
		}
		i++
	}
	for j, name := range redisOrder {
		l := lat[j]
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2])/1e3, "µs-p50-"+name)
		b.ReportMetric(float64(l[len(l)*9/10])/1e3, "µs-p90-"+name)
	}
}
