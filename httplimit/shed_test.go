package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// queueHandler is a handler whose latency rises past its capacity:
// workers serve one request at a time each, for serviceTime (±10%, a
// fixed sequence), in first-come order; requests beyond the workers queue.
type queueHandler struct {
	workers *limiter.Concurrency
	mu      sync.Mutex
	n       int
}

const serviceTime = 100 * time.Millisecond

func (q *queueHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lease, err := q.workers.Acquire(r.Context(), 1)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	defer lease.Release()
	q.mu.Lock()
	q.n++
	jitter := time.Duration(q.n*7919%21-10) * serviceTime / 100 // -10% to +10%
	q.mu.Unlock()
	time.Sleep(serviceTime + jitter)
}

// The middleware sheds load with an adaptive.ConcurrencyLimiter as Shed:
// in front of a handler of 40 workers, then 20, 15 s each, with requests
// arriving at 1.5 times what the workers serve, the requests in flight
// stay within 20% of the workers (on average, and in 95% of the 10 ms
// samples, from 5 s into each stage), the p99 latency of those served
// within twice the unloaded 100 ms, and the requests shed are answered
// 503 with Retry-After and no RateLimit field. Without Shed, the queue
// grows and the latency with it.
func TestShedFollowsCapacity(t *testing.T) {
	stages := []int{40, 20}
	const stage = 15 * time.Second
	for _, shed := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			workers, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: stages[0]})
			if err != nil {
				t.Fatal(err)
			}
			var o httplimit.Options
			var lim *adaptive.ConcurrencyLimiter
			if shed {
				lim, err = adaptive.NewConcurrencyLimiter(adaptive.ConcurrencyOptions{Initial: 10, Ceiling: 1000})
				if err != nil {
					t.Fatal(err)
				}
				o.Shed = lim
			}
			var inFlight sync.WaitGroup
			var mu sync.Mutex
			var samples []int
			var lat []time.Duration
			var at []time.Duration
			shedOK := true
			h := mustNew(t, o).Wrap(&queueHandler{workers: workers})
			start := time.Now()
			ctx, cancel := context.WithCancel(t.Context())
			in := 0
			go func() {
				for i, n := range stages {
					workers.SetLimit(n)
					for time.Since(start) < time.Duration(i+1)*stage {
						mu.Lock()
						samples = append(samples, in)
						mu.Unlock()
						time.Sleep(10 * time.Millisecond)
					}
				}
				cancel()
			}()
			for ctx.Err() == nil {
				cur := stages[min(int(time.Since(start)/stage), len(stages)-1)]
				time.Sleep(time.Second / time.Duration(cur*3/2*int(time.Second/serviceTime)))
				inFlight.Go(func() {
					mu.Lock()
					in++
					mu.Unlock()
					rec := httptest.NewRecorder()
					t0 := time.Now()
					h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
					mu.Lock()
					defer mu.Unlock()
					in--
					switch rec.Code {
					case http.StatusOK:
						lat = append(lat, time.Since(t0))
						at = append(at, time.Since(start))
					case http.StatusServiceUnavailable:
						shedOK = shedOK && rec.Header().Get("Retry-After") == "1" && rec.Header().Get("RateLimit") == ""
					}
				})
			}
			inFlight.Wait()
			for i, n := range stages {
				from, to := time.Duration(i)*stage+5*time.Second, time.Duration(i+1)*stage
				var sum, within, count int
				for j := int(from / (10 * time.Millisecond)); j < len(samples) && j < int(to/(10*time.Millisecond)); j++ {
					sum += samples[j]
					count++
					if v := float64(samples[j]); v >= 0.8*float64(n) && v <= 1.2*float64(n) {
						within++
					}
				}
				var ls []time.Duration
				for j, a := range at {
					if a >= from && a < to {
						ls = append(ls, lat[j])
					}
				}
				slices.Sort(ls)
				p99 := ls[len(ls)*99/100]
				mean := float64(sum) / float64(count)
				t.Logf("Shed %v, %d workers: %.1f in flight on average (%.0f%% of samples within 20%%), p99 latency %v, %d served", shed, n, mean, 100*float64(within)/float64(count), p99, len(ls))
				if !shed {
					if p99 < 4*serviceTime {
						t.Errorf("without Shed: p99 %v; want the queue to grow", p99)
					}
					continue
				}
				if mean < 0.8*float64(n) || mean > 1.2*float64(n) || within*100 < 95*count {
					t.Errorf("%d workers: %.1f in flight on average, %d of %d samples within 20%%; want the mean and 95%% within", n, mean, within, count)
				}
				if p99 > 2*serviceTime {
					t.Errorf("%d workers: p99 latency %v, over twice the unloaded %v", n, p99, serviceTime)
				}
			}
			if !shedOK {
				t.Error("a request shed without Retry-After: 1, or with a RateLimit field")
			}
			if lim != nil {
				lim.Close()
			}
			workers.Close()
		})
	}
}

// Each request served reports its outcome and latency to its leases: the
// handler's 429 and 503 are Throttled, another 5xx Failed, anything else
// (a 404 too) Succeeded; a Keyed quota's lease is reported to only with
// Shed.
func TestReportsHandlerOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &outcomes{}
		status := http.StatusOK
		handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			time.Sleep(30 * time.Millisecond)
			if status != http.StatusOK {
				w.WriteHeader(status)
			}
		})
		h := mustNew(t, httplimit.Options{Limiter: rec}).Wrap(handler)
		for _, status = range []int{200, 404, 429, 503, 500} {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}
		want := []limiter.Outcome{limiter.Succeeded, limiter.Succeeded, limiter.Throttled, limiter.Throttled, limiter.Failed}
		if !slices.Equal(rec.got, want) || rec.latency != 30*time.Millisecond {
			t.Errorf("reported %v (last latency %v), want %v, 30ms", rec.got, rec.latency, want)
		}
		shed := &outcomes{}
		h = mustNew(t, httplimit.Options{Keyed: keyedOf{rec}, Shed: shed}).Wrap(handler)
		status = http.StatusServiceUnavailable
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		if len(shed.got) != 1 || shed.got[0] != limiter.Throttled || len(rec.got) != 6 {
			t.Errorf("with Shed: %v to Shed, %v to Keyed", shed.got, rec.got)
		}
	})
}

// A request Shed refuses is answered 503 with Retry-After, its decision
// is Shed, and it takes no more of Shed.
func TestShedRefusal(t *testing.T) {
	full, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	held := full.TryAcquire(1)
	var d httplimit.Decision
	h := mustNew(t, httplimit.Options{Shed: full, OnDecision: func(_ *http.Request, dd httplimit.Decision) { d = dd }}).Wrap(ok)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || d.Outcome != httplimit.Shed || d.Status != 503 || !errors.Is(d.Err, limiter.ErrLimited) {
		t.Errorf("%d Retry-After %q, decision %+v; want 503, 1, Shed", w.Code, w.Header().Get("Retry-After"), d)
	}
	held.Release()
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusOK || full.Stats().Available != 1 {
		t.Errorf("%d, %d available; want 200, the permit back", w.Code, full.Stats().Available)
	}
	if httplimit.Shed.String() != "shed" {
		t.Error(httplimit.Shed.String())
	}
}

// outcomes is a limiter that grants everything and records what its
// leases are told.
type outcomes struct {
	mu      sync.Mutex
	got     []limiter.Outcome
	latency time.Duration
}

func (o *outcomes) TryAcquire(n int) limiter.Lease { return limiter.NewLease(n, o) }
func (o *outcomes) Acquire(_ context.Context, n int) (limiter.Lease, error) {
	return o.TryAcquire(n), nil
}
func (o *outcomes) ReleasePermits(int) {}
func (o *outcomes) ReportOutcome(_ int, out limiter.Outcome, latency time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, out)
	o.latency = latency
}

// keyedOf is a KeyedLimiter of one limiter for every key.
type keyedOf struct{ l limiter.Limiter }

func (k keyedOf) TryAcquire(_ string, n int) limiter.Lease { return k.l.TryAcquire(n) }
func (k keyedOf) Acquire(ctx context.Context, _ string, n int) (limiter.Lease, error) {
	return k.l.Acquire(ctx, n)
}
