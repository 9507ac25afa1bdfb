package pool_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
)

// reportRecorder is a limiter whose leases record what the pool reports on
// them: the outcome and latency of each task, and whether the lease was
// still held when the report came.
type reportRecorder struct {
	mu      sync.Mutex
	reports []string
	held    int // leases granted and not released
}

type recordedLease struct{ r *reportRecorder }

func (r *reportRecorder) TryAcquire(n int) limiter.Lease {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held++
	return limiter.NewLease(n, recordedLease{r})
}

func (r *reportRecorder) Acquire(_ context.Context, n int) (limiter.Lease, error) {
	return r.TryAcquire(n), nil
}

func (l recordedLease) ReleasePermits(int) {
	l.r.mu.Lock()
	l.r.held--
	l.r.mu.Unlock()
}

func (l recordedLease) ReportOutcome(n int, o limiter.Outcome, latency time.Duration) {
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	l.r.reports = append(l.r.reports, fmt.Sprintf("%v %v held=%v", latency, o, l.r.held > 0))
}

func (r *reportRecorder) sorted() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.reports))
}

// outcomeTasks are tasks of distinct durations with each ending a report
// can have, and the reports the pool must make for them: a task's outcome
// (limiter.OutcomeOf its error) and its duration, on a lease still held.
var outcomeTasks = []struct {
	d   time.Duration
	err error
	pan bool
}{
	{1 * time.Second, nil, false},
	{2 * time.Second, fmt.Errorf("GET /: 429: %w", limiter.ErrThrottled), false},
	{3 * time.Second, errors.New("GET /: 404"), false},
	{4 * time.Second, fmt.Errorf("gave up: %w", context.Canceled), false},
	{5 * time.Second, nil, true},
}

var outcomeReports = []string{"1s succeeded held=true", "2s throttled held=true", "3s failed held=true", "4s unknown held=true", "5s failed held=true"}

func outcomeTask(i int) func(context.Context) error {
	tk := outcomeTasks[i]
	return func(context.Context) error {
		time.Sleep(tk.d)
		if tk.pan {
			panic("boom")
		}
		return tk.err
	}
}

// TestOutcomesReported: when a task started through a limiter returns, the
// pool reports its outcome (limiter.OutcomeOf of its error; a panic is
// Failed) and its duration on the task's lease, before releasing it: with
// Go, in the queued mode, with GoKey (on the pool's Limiter and the key's,
// through their Chain).
func TestOutcomesReported(t *testing.T) {
	submit := map[string]func(t *testing.T, p *pool.Pool, i int){
		"Go":    func(t *testing.T, p *pool.Pool, i int) { p.Go(outcomeTask(i)) },
		"GoKey": func(t *testing.T, p *pool.Pool, i int) { p.GoKey(t.Context(), "k", outcomeTask(i)) },
	}
	for _, tc := range []struct {
		name   string
		queue  int
		submit string
		perKey bool
	}{
		{"Go", 0, "Go", false},
		{"Queue", 2, "Go", false},
		{"GoKey", 0, "GoKey", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				global, key := &reportRecorder{}, &reportRecorder{}
				opts := pool.Options{Workers: len(outcomeTasks), Queue: tc.queue, Limiter: global}
				if tc.perKey {
					opts.PerKey = func(string) limiter.Limiter { return key }
				}
				p := mustPool(t, opts)
				for i := range outcomeTasks {
					submit[tc.submit](t, p, i)
				}
				p.Wait()
				if got := global.sorted(); !slices.Equal(got, outcomeReports) {
					t.Errorf("Limiter's reports %q, want %q", got, outcomeReports)
				}
				if got := key.sorted(); tc.perKey && !slices.Equal(got, outcomeReports) {
					t.Errorf("PerKey's reports %q, want %q", got, outcomeReports)
				}
			})
		})
	}
}

// TestMapOutcomesReported: Map and MapKey report the outcome of the error
// f returned, and f's duration, on the lease of each call.
func TestMapOutcomesReported(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		t.Run(fmt.Sprint("keyed=", keyed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &reportRecorder{}
				f := func(ctx context.Context, i int) (int, error) { return i, outcomeTask(i)(ctx) }
				opts := pool.MapOptions{Workers: len(outcomeTasks), Limiter: rec}
				seq := pool.Map(t.Context(), slices.Values([]int{0, 1, 2, 3, 4}), f, opts)
				if keyed {
					opts.Limiter, opts.PerKey = nil, func(string) limiter.Limiter { return rec }
					seq = pool.MapKey(t.Context(), slices.Values([]int{0, 1, 2, 3, 4}), func(int) string { return "k" }, f, opts)
				}
				for range seq {
				}
				if got := rec.sorted(); !slices.Equal(got, outcomeReports) {
					t.Errorf("reports %q, want %q", got, outcomeReports)
				}
			})
		})
	}
}

// countingReporter is a limiter whose leases count the reports on them
// without allocating, for TestNoAllocsPerTask.
type countingReporter struct{ reports atomic.Int64 }

func (c *countingReporter) TryAcquire(n int) limiter.Lease { return limiter.NewLease(n, c) }
func (c *countingReporter) Acquire(_ context.Context, n int) (limiter.Lease, error) {
	return limiter.NewLease(n, c), nil
}
func (c *countingReporter) ReleasePermits(int)                                {}
func (c *countingReporter) ReportOutcome(int, limiter.Outcome, time.Duration) { c.reports.Add(1) }
