// Package adaptive runs rategate's adaptive limiters and their peers
// through the same scenarios, on testing/synctest's virtual clock, so that
// the runs are deterministic and take seconds whatever the machine:
//
//   - Rate: a service whose capacity steps 100/s, 40/s, 200/s (20 s each),
//     as a token bucket with a burst of 50 ms of its rate, answering 429
//     above it, each call taking 20 ms. Calls arrive at 400/s (twice the
//     highest capacity); the limiter under test admits or refuses each at
//     once, and refused calls are not sent.
//   - Concurrency: a service with 100, 40, then 200 workers (20 s each),
//     each call taking 100 ms ±10% of a worker, first come first served;
//     past the workers calls queue and their latency rises. Calls arrive at
//     1.5 times what the workers serve; refused calls are shed.
//
// The tests in this package run every contender, print the table of
// results (with -update, write it to ../results/adaptive.md) and check that
// rategate does at least as well as each peer; bench/plots draws
// docs/adaptive.svg from the same runs.
package adaptive

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/rategate/rategate/limiter"
)

// Stage is a span of a scenario with one capacity.
type Stage struct {
	Capacity int // calls per second (rate) or workers (concurrency)
	Length   time.Duration
}

// Stages is the capacity schedule of both scenarios.
var Stages = []Stage{{100, 20 * time.Second}, {40, 20 * time.Second}, {200, 20 * time.Second}}

// Scenario constants.
const (
	Arrivals    = 400                      // calls per second offered in the rate scenario
	Latency     = 20100 * time.Microsecond // of every call in the rate scenario (off the 2.5 ms grid of arrivals)
	ServiceTime = 100 * time.Millisecond   // of a worker, per call, in the concurrency scenario (±10%)
	Sample      = 10 * time.Millisecond    // between samples of a contender's limit
	// Arrivals come every 2.5 ms; the service takes a call 10.3 ms after
	// it, and its reply arrives 20.1 ms after it; samples are taken 1.25 ms
	// into the 2.5 ms: no two of these ever fall on one instant, so the
	// order of events, and the run, are the same every time.
	sampleOffset = 1250 * time.Microsecond
)

// End is the length of a scenario of stages.
func End(stages []Stage) time.Duration {
	var d time.Duration
	for _, s := range stages {
		d += s.Length
	}
	return d
}

// Admission is the way a contender admits a call: ok reports whether it
// was admitted, and done, for an admitted call, reports its outcome and
// latency (and gives back what the contender lent).
type Admission func() (done func(throttled bool, latency time.Duration), ok bool)

// Contender is a limiter under test, made fresh for each run (in the run's
// bubble). Limit, if not nil, returns its limit (a rate per second, or a
// concurrency) for the plots; Stage, if not nil, is told each new capacity
// (only the ideal, which knows it, uses it); Close ends it.
type Contender struct {
	Admit Admission
	Limit func() float64
	Stage func(capacity int)
	Close func()
}

// Call is one call of a run, at the instant the service took it.
type Call struct {
	At        time.Duration
	Throttled bool          // rate scenario: answered 429
	Latency   time.Duration // concurrency scenario: from admission to reply
}

// Run is the record of one run.
type Run struct {
	Stages []Stage
	Calls  []Call
	Limits []float64 // the contender's limit every Sample, from sampleOffset
	Shed   int       // calls refused by the contender
}

// RunRate runs the rate scenario through stages against c, in the
// caller's synctest bubble.
func RunRate(c Contender, stages []Stage) Run { return RunRateLatency(c, stages, Latency) }

// RunRateLatency is RunRate with calls that take latency: the service
// takes each call 250 µs past half of it (10.3 ms into Latency's 20.1 ms).
// A latency a multiple of 2.5 ms and 0.1 ms (as Latency is) keeps every
// event off the instants of the others.
func RunRateLatency(c Contender, stages []Stage, latency time.Duration) Run {
	outbound := latency/2 + 250*time.Microsecond
	start := time.Now()
	srv, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(stages[0].Capacity, time.Second), Burst: serviceBurst(stages[0].Capacity)})
	defer srv.Close()
	var (
		mu  sync.Mutex
		run = Run{Stages: stages}
		wg  sync.WaitGroup
	)
	wg.Go(func() { run.Limits = sampleLimits(start, c.Limit, &mu, End(stages)) })
	every := time.Second / Arrivals
	next, stage := time.Duration(0), 0
	for at := time.Duration(0); at < End(stages); at += every {
		time.Sleep(at - time.Since(start))
		if at >= next { // the next stage, in this goroutine: before this arrival
			s := stages[stage]
			srv.SetRate(limiter.Per(s.Capacity, time.Second))
			srv.SetBurst(serviceBurst(s.Capacity))
			if c.Stage != nil {
				c.Stage(s.Capacity)
			}
			next += s.Length
			stage++
		}
		done, ok := c.Admit()
		if !ok {
			mu.Lock()
			run.Shed++
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			time.Sleep(outbound)
			call := Call{At: time.Since(start), Throttled: !srv.TryAcquire(1).Granted(), Latency: latency}
			time.Sleep(latency - outbound)
			done(call.Throttled, latency)
			mu.Lock()
			run.Calls = append(run.Calls, call)
			mu.Unlock()
		})
	}
	wg.Wait()
	c.Close()
	return run
}

func serviceBurst(capacity int) int { return max(1, capacity/20) }

// RunConcurrency runs the concurrency scenario through stages against c,
// in the caller's synctest bubble.
func RunConcurrency(c Contender, stages []Stage) Run {
	start := time.Now()
	workers, _ := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: stages[0].Capacity})
	defer workers.Close()
	rnd := rand.New(rand.NewPCG(1, 2))
	var (
		mu  sync.Mutex
		run = Run{Stages: stages}
		wg  sync.WaitGroup
	)
	wg.Go(func() { run.Limits = sampleLimits(start, c.Limit, &mu, End(stages)) })
	var at time.Duration
	for _, s := range stages {
		workers.SetLimit(s.Capacity)
		if c.Stage != nil {
			c.Stage(s.Capacity)
		}
		// Arrivals at 1.5 times what the workers serve, on a grid of
		// whole microseconds.
		every := ServiceTime / time.Duration(s.Capacity*3/2)
		for end := at + s.Length; at < end; at += every {
			time.Sleep(at - time.Since(start))
			done, ok := c.Admit()
			if !ok {
				mu.Lock()
				run.Shed++
				mu.Unlock()
				continue
			}
			mu.Lock()
			service := time.Duration(float64(ServiceTime) * (0.9 + 0.2*rnd.Float64()))
			mu.Unlock()
			wg.Go(func() {
				t0 := time.Now()
				lease, err := workers.Acquire(context.Background(), 1)
				if err != nil {
					panic(err) // the workers close after every call returned
				}
				time.Sleep(service)
				lease.Release()
				lat := time.Since(t0)
				done(false, lat)
				mu.Lock()
				run.Calls = append(run.Calls, Call{At: time.Since(start), Latency: lat})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	c.Close()
	return run
}

// sampleLimits samples limit every Sample until end.
func sampleLimits(start time.Time, limit func() float64, mu *sync.Mutex, end time.Duration) []float64 {
	var out []float64
	for at := sampleOffset; at < end; at += Sample {
		time.Sleep(at - time.Since(start))
		if limit != nil {
			mu.Lock()
			out = append(out, limit())
			mu.Unlock()
		}
	}
	return out
}

// RateStats is what a rate run measured over one span.
type RateStats struct {
	Share     float64 // calls that succeeded, per second, over the capacity
	Throttled float64 // share of the calls sent that were throttled
	Sent      int
}

// RateOver measures the rate run over [from, to).
func (r Run) RateOver(from, to time.Duration, capacity int) RateStats {
	var ok, thr int
	for _, c := range r.Calls {
		if c.At < from || c.At >= to {
			continue
		}
		if c.Throttled {
			thr++
		} else {
			ok++
		}
	}
	return RateStats{
		Share:     float64(ok) / (to - from).Seconds() / float64(capacity),
		Throttled: float64(thr) / float64(max(ok+thr, 1)),
		Sent:      ok + thr,
	}
}

// SentRate returns, every Sample, the calls the service took over the
// last window: the rate a contender let through.
func (r Run) SentRate(window time.Duration) []float64 {
	var at []time.Duration
	for _, c := range r.Calls {
		at = append(at, c.At)
	}
	slices.Sort(at)
	var out []float64
	lo, hi := 0, 0
	for t := sampleOffset; t < End(r.Stages); t += Sample {
		for hi < len(at) && at[hi] <= t {
			hi++
		}
		for lo < hi && at[lo] <= t-window {
			lo++
		}
		out = append(out, float64(hi-lo)/window.Seconds())
	}
	return out
}

// FirstSample returns how long after from the series first satisfies cond,
// or -1.
func FirstSample(series []float64, from time.Duration, cond func(float64) bool) time.Duration {
	for i, v := range series {
		at := sampleOffset + time.Duration(i)*Sample
		if at >= from && cond(v) {
			return at - from
		}
	}
	return -1
}

// ConcurrencyStats is what a concurrency run measured over one span.
type ConcurrencyStats struct {
	Goodput float64       // calls completed within twice the unloaded latency, per second, over what the workers serve
	Slow    float64       // share of the completed calls slower than twice the unloaded latency
	P99     time.Duration // latency of the completed calls
}

// ConcurrencyOver measures the concurrency run over [from, to).
func (r Run) ConcurrencyOver(from, to time.Duration, capacity int) ConcurrencyStats {
	var lats []time.Duration
	good := 0
	for _, c := range r.Calls {
		if c.At < from || c.At >= to {
			continue
		}
		lats = append(lats, c.Latency)
		if c.Latency <= 2*ServiceTime {
			good++
		}
	}
	slices.Sort(lats)
	var st ConcurrencyStats
	if len(lats) > 0 {
		st.P99 = lats[len(lats)*99/100]
		st.Slow = 1 - float64(good)/float64(len(lats))
	}
	st.Goodput = float64(good) / (to - from).Seconds() / (float64(capacity) / ServiceTime.Seconds())
	return st
}

// InFlight returns, every Sample, the calls in flight (admitted, not yet
// replied), from the run's calls.
func (r Run) InFlight() []float64 {
	type ev struct {
		at time.Duration
		d  int
	}
	var evs []ev
	for _, c := range r.Calls {
		evs = append(evs, ev{c.At - c.Latency, +1}, ev{c.At, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int { return int(a.at - b.at) })
	var out []float64
	n, i := 0, 0
	for t := sampleOffset; t < End(r.Stages); t += Sample {
		for ; i < len(evs) && evs[i].at <= t; i++ {
			n += evs[i].d
		}
		out = append(out, float64(n))
	}
	return out
}
