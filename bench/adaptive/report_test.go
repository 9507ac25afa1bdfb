package adaptive

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	gclimit "github.com/platinummonkey/go-concurrency-limits/limit"
	gclimiter "github.com/platinummonkey/go-concurrency-limits/limiter"
	"github.com/platinummonkey/go-concurrency-limits/strategy"

	rg "github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/limiter"
)

// BenchmarkReport is the cost of one admitted call's bookkeeping: take a
// permit without waiting, report the call's outcome (a success, with its
// latency), give the permit back. Each limiter is far from its limit, so
// nothing is refused.
func BenchmarkReport(b *testing.B) {
	rate, _ := rg.NewRateLimiter(rg.RateOptions{Floor: limiter.Per(1, time.Second), Initial: limiter.Per(1e9, time.Second), Ceiling: limiter.Per(1e9, time.Second), Burst: 1000})
	defer rate.Close()
	conc, _ := rg.NewConcurrencyLimiter(rg.ConcurrencyOptions{Initial: 1000, Ceiling: 1000})
	defer conc.Close()
	lease := func(lim limiter.Limiter) func() {
		return func() {
			l := lim.TryAcquire(1)
			l.Report(limiter.Succeeded, time.Millisecond)
			l.Release()
		}
	}
	fl := adaptivelimiter.NewBuilder[any]().WithLimits(1, 1000, 1000).Build()
	ft := adaptivethrottler.NewWithDefaults[any]()
	aimd, _ := gclimiter.NewDefaultLimiter(gclimit.NewAIMDLimit("aimd", 1000, 0.9, 1, nil), 1e9, 1e9, 1e5, 100, strategy.NewSimpleStrategy(1000), gclimit.NoopLimitLogger{}, nil)
	for _, bc := range []struct {
		name string
		call func()
	}{
		{"rategate-rate", lease(rate)},
		{"rategate-concurrency", lease(conc)},
		{"failsafe-limiter", func() {
			p, ok := fl.TryAcquirePermit()
			if ok {
				p.Record()
			}
		}},
		{"failsafe-throttler", func() {
			if ft.TryAcquirePermit() {
				ft.RecordSuccess()
			}
		}},
		{"go-concurrency-limits-aimd", func() {
			if l, ok := aimd.Acquire(context.Background()); ok {
				l.OnSuccess()
			}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.call()
			}
		})
	}
}
