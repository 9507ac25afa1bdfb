package adaptive

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// A model of a server whose latency rises past its capacity: capacity
// workers, each serving one call at a time for serviceTime (±10%, drawn
// per call), in first-come order; calls beyond capacity queue for a worker.
// Its capacity steps through the same stages as the rate scenario's.
const serviceTime = 100 * time.Millisecond

type queueServer struct {
	workers *limiter.Concurrency
	mu      sync.Mutex
	rnd     *rand.Rand
}

func newQueueServer(t *testing.T, capacity int) *queueServer {
	w, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: capacity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return &queueServer{workers: w, rnd: rand.New(rand.NewPCG(1, 2))}
}

// serve waits for a worker, works, and returns.
func (s *queueServer) serve() {
	lease, err := s.workers.Acquire(context.Background(), 1)
	if err != nil {
		panic(err) // the workers are closed only after every call returned
	}
	s.mu.Lock()
	d := time.Duration(float64(serviceTime) * (0.9 + 0.2*s.rnd.Float64()))
	s.mu.Unlock()
	time.Sleep(d)
	lease.Release()
}

// queueRun is the record of a run of a concurrency scenario.
type queueRun struct {
	done     []queueCall     // completed calls
	inFlight []int           // calls in flight every 10 ms
	limits   []int           // the limit every 10 ms
	shed     []time.Duration // when calls were refused (server scenario)
}

type queueCall struct {
	at      time.Duration // completion
	latency time.Duration
}

// runQueueScenario drives lim against the queueing server through the
// stages. With arrivals zero, demand is unbounded and every call waits in
// lim.Acquire (a client); otherwise calls arrive at arrivals(capacity) per
// second, and those lim.TryAcquire refuses are shed (a server).
func runQueueScenario(t *testing.T, lim interface {
	limiter.Limiter
	InUse() int
	Limit() int
}, arrivals func(capacity int) int) queueRun {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv := newQueueServer(t, steps[0].capacity)
	start := time.Now()
	var (
		mu  sync.Mutex
		run queueRun
		wg  sync.WaitGroup
		cur = steps[0].capacity
	)
	wg.Go(func() {
		var end time.Duration
		for _, st := range steps {
			srv.workers.SetLimit(st.capacity)
			mu.Lock()
			cur = st.capacity
			mu.Unlock()
			end += st.length
			for time.Since(start) < end {
				mu.Lock()
				run.inFlight = append(run.inFlight, lim.InUse())
				run.limits = append(run.limits, lim.Limit())
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}
		cancel()
	})
	call := func(lease limiter.Lease) {
		t0 := time.Now()
		srv.serve()
		lat := time.Since(t0)
		lease.Report(limiter.Succeeded, lat)
		lease.Release()
		mu.Lock()
		run.done = append(run.done, queueCall{at: time.Since(start), latency: lat})
		mu.Unlock()
	}
	for ctx.Err() == nil {
		if arrivals == nil {
			lease, err := lim.Acquire(ctx, 1)
			if err != nil {
				break
			}
			wg.Go(func() { call(lease) })
			continue
		}
		mu.Lock()
		every := time.Second / time.Duration(arrivals(cur))
		mu.Unlock()
		time.Sleep(every)
		if lease := lim.TryAcquire(1); lease.Granted() {
			wg.Go(func() { call(lease) })
		} else {
			mu.Lock()
			run.shed = append(run.shed, time.Since(start))
			mu.Unlock()
		}
	}
	wg.Wait()
	return run
}

// window returns, over [from, to), the mean of the calls in flight, the
// share of the 10 ms samples within 20% of capacity, and the 99th
// percentile latency of the calls completed.
func (r queueRun) window(from, to time.Duration, capacity int) (mean, within float64, p99 time.Duration) {
	var sum, in, n int
	for i := int(from / (10 * time.Millisecond)); i < len(r.inFlight) && time.Duration(i)*10*time.Millisecond < to; i++ {
		v := r.inFlight[i]
		sum += v
		n++
		if float64(v) >= 0.8*float64(capacity) && float64(v) <= 1.2*float64(capacity) {
			in++
		}
	}
	var lats []time.Duration
	for _, c := range r.done {
		if c.at >= from && c.at < to {
			lats = append(lats, c.latency)
		}
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		p99 = lats[len(lats)*99/100]
	}
	return float64(sum) / float64(max(n, 1)), float64(in) / float64(max(n, 1)), p99
}
