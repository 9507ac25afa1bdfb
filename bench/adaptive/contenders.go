package adaptive

import (
	"context"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	"github.com/platinummonkey/go-concurrency-limits/core"
	gclimit "github.com/platinummonkey/go-concurrency-limits/limit"
	gclimiter "github.com/platinummonkey/go-concurrency-limits/limiter"
	"github.com/platinummonkey/go-concurrency-limits/strategy"

	rg "github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/limiter"
)

// Entry names a contender and makes it.
type Entry struct {
	Name string
	Peer bool // a peer, not rategate (nor the ideal)
	// Deterministic: its runs come out the same every time (the plots draw
	// only those).
	Deterministic bool
	New           func() Contender
}

// RateEntries are the contenders of the rate scenario.
func RateEntries() []Entry {
	return []Entry{
		{"ideal: TokenBucket at the capacity", false, true, idealRate},
		{"rategate adaptive.RateLimiter", false, true, rategateRate},
		{"failsafe-go AdaptiveThrottler", true, false, failsafeThrottler},
		{"failsafe-go AdaptiveLimiter", true, true, failsafeLimiter},
		{"go-concurrency-limits AIMD", true, true, func() Contender { return goLimits(gclimit.NewAIMDLimit("aimd", 10, 0.9, 1, nil)) }},
		{"go-concurrency-limits Gradient2", true, true, func() Contender { return goLimits(gradient2()) }},
	}
}

// ConcurrencyEntries are the contenders of the concurrency scenario.
func ConcurrencyEntries() []Entry {
	return []Entry{
		{"ideal: Concurrency at the capacity", false, true, idealConcurrency},
		{"rategate adaptive.ConcurrencyLimiter", false, true, rategateConcurrency},
		{"failsafe-go AdaptiveLimiter", true, true, failsafeLimiter},
		{"failsafe-go AdaptiveThrottler", true, false, failsafeThrottler},
		{"go-concurrency-limits AIMD", true, true, func() Contender { return goLimits(gclimit.NewAIMDLimit("aimd", 10, 0.9, 1, nil)) }},
		{"go-concurrency-limits Gradient2", true, true, func() Contender { return goLimits(gradient2()) }},
	}
}

// leaseAdmission admits through a rategate limiter and reports on the lease.
func leaseAdmission(lim limiter.Limiter) Admission {
	return func() (func(bool, time.Duration), bool) {
		lease := lim.TryAcquire(1)
		if !lease.Granted() {
			return nil, false
		}
		return func(throttled bool, latency time.Duration) {
			o := limiter.Succeeded
			if throttled {
				o = limiter.Throttled
			}
			lease.Report(o, latency)
			lease.Release()
		}, true
	}
}

func perSecond(r limiter.Rate) float64 { return float64(r.Events()) / r.Period().Seconds() }

func idealRate() Contender {
	tb, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(Stages[0].Capacity, time.Second), Burst: 1})
	return Contender{
		Admit: leaseAdmission(tb),
		Limit: func() float64 { return perSecond(tb.Rate()) },
		Stage: func(c int) { tb.SetRate(limiter.Per(c, time.Second)) },
		Close: func() { tb.Close() },
	}
}

// RategateRateOptions are the options of the rate scenario's rategate
// contender: a floor of 1/s, a start at 10/s, a ceiling of 1000/s.
var RategateRateOptions = rg.RateOptions{
	Floor:   limiter.Per(1, time.Second),
	Initial: limiter.Per(10, time.Second),
	Ceiling: limiter.Per(1000, time.Second),
	Burst:   2,
}

func rategateRate() Contender {
	lim, err := rg.NewRateLimiter(RategateRateOptions)
	if err != nil {
		panic(err)
	}
	return Contender{
		Admit: leaseAdmission(lim),
		Limit: func() float64 { return perSecond(lim.Rate()) },
		Close: func() { lim.Close() },
	}
}

func idealConcurrency() Contender {
	sem, _ := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: Stages[0].Capacity})
	return Contender{
		Admit: leaseAdmission(sem),
		Limit: func() float64 { return float64(sem.Limit()) },
		Stage: func(c int) { sem.SetLimit(c) },
		Close: func() { sem.Close() },
	}
}

func rategateConcurrency() Contender {
	lim, err := rg.NewConcurrencyLimiter(rg.ConcurrencyOptions{Initial: 10, Ceiling: 1000})
	if err != nil {
		panic(err)
	}
	return Contender{
		Admit: leaseAdmission(lim),
		Limit: func() float64 { return float64(lim.Limit()) },
		Close: func() { lim.Close() },
	}
}

// failsafeLimiter is failsafe-go's latency-driven adaptive concurrency
// limiter with its defaults (limits 1 to 200, from 20), except a ceiling of
// 1000 like rategate's. A throttled call completes like any other (Record).
func failsafeLimiter() Contender {
	l := adaptivelimiter.NewBuilder[any]().WithLimits(1, 1000, 20).Build()
	return Contender{
		Admit: func() (func(bool, time.Duration), bool) {
			p, ok := l.TryAcquirePermit()
			if !ok {
				return nil, false
			}
			return func(bool, time.Duration) { p.Record() }, true
		},
		Limit: func() float64 { return float64(l.Limit()) },
		Close: func() {},
	}
}

// failsafeThrottler is failsafe-go's client-side throttler (Google SRE's),
// which refuses calls at random in proportion to recent failures, with its
// defaults: a failure rate threshold of 10% over 1 minute, at most 90%
// refused. A throttled call is a failure.
func failsafeThrottler() Contender {
	t := adaptivethrottler.NewWithDefaults[any]()
	return Contender{
		Admit: func() (func(bool, time.Duration), bool) {
			if !t.TryAcquirePermit() {
				return nil, false
			}
			return func(throttled bool, _ time.Duration) {
				if throttled {
					t.RecordFailure()
				} else {
					t.RecordSuccess()
				}
			}, true
		},
		Close: func() {},
	}
}

// goLimits is a go-concurrency-limits limit algorithm in its DefaultLimiter
// (sampling windows of 1 s and at least 100 calls, as its defaults) with the
// simple strategy. A throttled call is dropped (OnDropped).
func goLimits(alg core.Limit) Contender {
	l, err := gclimiter.NewDefaultLimiter(alg, 1e9, 1e9, 1e5, 100, strategy.NewSimpleStrategy(alg.EstimatedLimit()), gclimit.NoopLimitLogger{}, nil)
	if err != nil {
		panic(err)
	}
	return Contender{
		Admit: func() (func(bool, time.Duration), bool) {
			ln, ok := l.Acquire(context.Background())
			if !ok {
				return nil, false
			}
			return func(throttled bool, _ time.Duration) {
				if throttled {
					ln.OnDropped()
				} else {
					ln.OnSuccess()
				}
			}, true
		},
		Limit: func() float64 { return float64(l.EstimatedLimit()) },
		Close: func() {},
	}
}

// gradient2 is go-concurrency-limits' Gradient2 with its defaults (from 20,
// a queue of 4, smoothing 0.2, a long window of 600 samples) but the limits
// of rategate's contender: 1 to 1000.
func gradient2() core.Limit {
	l, err := gclimit.NewGradient2Limit("g2", 20, 1000, 1, func(int) int { return 4 }, 0.2, 600, gclimit.NoopLimitLogger{}, nil)
	if err != nil {
		panic(err)
	}
	return l
}
