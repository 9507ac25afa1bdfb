package bench

import (
	"context"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
)

// otelMetrics returns otellimit.Metrics on an OpenTelemetry SDK meter
// provider with the default aggregation (read by a ManualReader, which
// starts no goroutine), and the provider's meter.
func otelMetrics(b *testing.B) (*otellimit.Metrics, metric.Meter) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := otellimit.New(otellimit.Options{MeterProvider: mp})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	return m, mp.Meter("bench")
}

// syncCounted is the plain way to count decisions: a synchronous SDK
// counter Add per call, with the attribute sets made once. otellimit counts
// in atomics read at collection instead; BenchmarkOtel/*-synccounter
// measures what that saves.
type syncCounted struct {
	lim              limiter.Limiter
	c                metric.Int64Counter
	granted, refused []metric.AddOption
}

func newSyncCounted(b *testing.B, lim limiter.Limiter, mt metric.Meter) *syncCounted {
	c, err := mt.Int64Counter("rategate.rate_limiting.requests", metric.WithUnit("{request}"))
	if err != nil {
		b.Fatal(err)
	}
	set := func(result string) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(
			otellimit.AttrPolicy.String("api"), otellimit.AttrResult.String(result)))}
	}
	return &syncCounted{lim: lim, c: c, granted: set("granted"), refused: set("limited")}
}

func (s *syncCounted) TryAcquire(n int) limiter.Lease {
	l := s.lim.TryAcquire(n)
	if l.Granted() {
		s.c.Add(context.Background(), 1, s.granted...)
	} else {
		s.c.Add(context.Background(), 1, s.refused...)
	}
	return l
}

// BenchmarkOtel: the cost otellimit adds to a decision, each instrumented
// case beside the same limiter uninstrumented, in one group so that -count
// interleaves them. Every call takes the path its name says (checkAll).
//
//   - tokenbucket(-otellimit, -synccounter): a granted TryAcquire(1) of
//     admitTokenBucket, bare, wrapped by otellimit, and counted with a
//     synchronous SDK counter.
//   - reject(-otellimit): a refused TryAcquire(1) of rejectTokenBucket.
//   - acquire(-otellimit): a granted Acquire(ctx, 1) of admitTokenBucket
//     (otellimit reads the clock twice and records time in queue).
//   - concurrency(-otellimit): TryAcquire(1) + Release of
//     admitConcurrency (otellimit allocates, times and records the lease).
//   - shared-tokenbucket(-otellimit): the granted TryAcquire(1) from every P
//     on one limiter (b.RunParallel): the policy's counter is shared too.
func BenchmarkOtel(b *testing.B) {
	b.Run("tokenbucket", func(b *testing.B) {
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
	b.Run("tokenbucket-otellimit", func(b *testing.B) {
		m, _ := otelMetrics(b)
		l := m.Wrap(admitTokenBucket(), "api")
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
	b.Run("tokenbucket-synccounter", func(b *testing.B) {
		_, mt := otelMetrics(b)
		l := newSyncCounted(b, admitTokenBucket(), mt)
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
	b.Run("reject", func(b *testing.B) {
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
	b.Run("reject-otellimit", func(b *testing.B) {
		m, _ := otelMetrics(b)
		l := m.Wrap(rejectTokenBucket(b), "api")
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
	b.Run("acquire", func(b *testing.B) {
		l := admitTokenBucket()
		ctx := context.Background()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			if _, err := l.Acquire(ctx, 1); err != nil {
				refused++
			}
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("acquire-otellimit", func(b *testing.B) {
		m, _ := otelMetrics(b)
		l := m.Wrap(admitTokenBucket(), "api")
		ctx := context.Background()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			if _, err := l.Acquire(ctx, 1); err != nil {
				refused++
			}
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("concurrency", func(b *testing.B) {
		l := admitConcurrency()
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			lease := l.TryAcquire(1)
			if !lease.Granted() {
				refused++
			}
			lease.Release()
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("concurrency-otellimit", func(b *testing.B) {
		m, _ := otelMetrics(b)
		l := m.Wrap(admitConcurrency(), "workers")
		b.ReportAllocs()
		var refused, n int64
		for b.Loop() {
			lease := l.TryAcquire(1)
			if !lease.Granted() {
				refused++
			}
			lease.Release()
			n++
		}
		checkAll(b, "refused", refused, n)
	})
	b.Run("shared-tokenbucket", func(b *testing.B) {
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
	b.Run("shared-tokenbucket-otellimit", func(b *testing.B) {
		m, _ := otelMetrics(b)
		l := m.Wrap(admitTokenBucket(), "api")
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
