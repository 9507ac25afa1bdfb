package adaptive

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// A model server for the adaptive limiters' acceptance tests: its capacity
// steps through stages, and it answers 429 (no headers) above it. Its
// capacity is itself a token bucket, with a burst of 50 ms of its rate.
type stage struct {
	capacity int           // requests per second
	length   time.Duration // how long the stage lasts
}

var steps = []stage{{100, 20 * time.Second}, {40, 20 * time.Second}, {200, 20 * time.Second}}

type modelServer struct {
	mu  sync.Mutex
	tb  *limiter.TokenBucket
	cur int
}

func newModelServer(t *testing.T, capacity int) *modelServer {
	tb, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(capacity, time.Second), Burst: serverBurst(capacity)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return &modelServer{tb: tb, cur: capacity}
}

func serverBurst(capacity int) int { return max(1, capacity/20) }

func (s *modelServer) set(capacity int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tb.SetRate(limiter.Per(capacity, time.Second))
	s.tb.SetBurst(serverBurst(capacity))
	s.cur = capacity
}

// serve answers one request: true for 200, false for 429.
func (s *modelServer) serve() bool { return s.tb.TryAcquire(1).Granted() }

// call is one request of a run, at the instant the server saw it.
type call struct {
	at time.Duration
	ok bool
}

// rateRun is the record of a run of the rate scenario.
type rateRun struct {
	calls []call
	rates []float64 // the limiter's rate every 10 ms
}

// runRateScenario drives lim with unbounded demand against the model
// server through the stages, each request taking latency (half to reach
// the server, half to come back), and reports each outcome on its lease.
func runRateScenario(t *testing.T, lim limiter.Limiter, rate func() float64, latency time.Duration) rateRun {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv := newModelServer(t, steps[0].capacity)
	start := time.Now()
	var (
		mu  sync.Mutex
		run rateRun
		wg  sync.WaitGroup
	)
	wg.Go(func() { // the stages, and a sample of the rate every 10 ms
		var end time.Duration
		for _, st := range steps {
			srv.set(st.capacity)
			end += st.length
			for time.Since(start) < end {
				mu.Lock()
				run.rates = append(run.rates, rate())
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}
		cancel()
	})
	for {
		lease, err := lim.Acquire(ctx, 1)
		if err != nil {
			break
		}
		wg.Go(func() {
			time.Sleep(latency / 2)
			c := call{at: time.Since(start), ok: srv.serve()}
			time.Sleep(latency - latency/2)
			if c.ok {
				lease.Report(limiter.Succeeded, latency)
			} else {
				lease.Report(limiter.Throttled, latency)
			}
			mu.Lock()
			run.calls = append(run.calls, c)
			mu.Unlock()
		})
	}
	wg.Wait()
	return run
}

// stageStats returns, over [from, to) of the run, the successes per second
// and the share of the calls that were throttled.
func (r rateRun) stats(from, to time.Duration) (okPerSec, throttled float64, n int) {
	var ok, thr int
	for _, c := range r.calls {
		if c.at < from || c.at >= to {
			continue
		}
		if c.ok {
			ok++
		} else {
			thr++
		}
	}
	n = ok + thr
	return float64(ok) / (to - from).Seconds(), float64(thr) / float64(max(n, 1)), n
}

// firstAt returns the first instant from `from` at which cond holds for the
// sampled rate, or -1.
func (r rateRun) firstAt(from time.Duration, cond func(float64) bool) time.Duration {
	for i := int(from / (10 * time.Millisecond)); i < len(r.rates); i++ {
		if cond(r.rates[i]) {
			return time.Duration(i)*10*time.Millisecond - from
		}
	}
	return -1
}
