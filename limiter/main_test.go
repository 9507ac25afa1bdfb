package limiter_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	. "github.com/rategate/rategate/limiter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLimiter is what every limiter of the package offers beyond Limiter.
type testLimiter interface {
	Limiter
	Stats() Stats
	Close() error
}

// algo builds one of the six limiters so that, with limit L, at most L
// permits are granted at once (burst, per-window limit or concurrency limit)
// and, after they are taken at 0, one permit is free again at 1/L s (token
// bucket, pacer), at 1 s (windows), or when released (concurrency).
type algo struct {
	name        string
	make        func(limit int, q QueueOptions) (testLimiter, error)
	concurrency bool // permits come back by Release, not with time
	pacer       bool // grants one request at a time, whatever its size
}

var algos = []algo{
	{name: "TokenBucket", make: func(limit int, q QueueOptions) (testLimiter, error) {
		return NewTokenBucket(TokenBucketOptions{Rate: Per(limit, time.Second), Burst: limit, Queue: q})
	}},
	{name: "FixedWindow", make: func(limit int, q QueueOptions) (testLimiter, error) {
		return NewFixedWindow(FixedWindowOptions{Limit: limit, Window: time.Second, Queue: q})
	}},
	{name: "SlidingWindow", make: func(limit int, q QueueOptions) (testLimiter, error) {
		return NewSlidingWindow(SlidingWindowOptions{Limit: limit, Window: time.Second, Segments: 4, Queue: q})
	}},
	{name: "SlidingLog", make: func(limit int, q QueueOptions) (testLimiter, error) {
		return NewSlidingLog(SlidingLogOptions{Limit: limit, Window: time.Second, Queue: q})
	}},
	{name: "LeakyBucket", pacer: true, make: func(limit int, q QueueOptions) (testLimiter, error) {
		return NewLeakyBucket(LeakyBucketOptions{Rate: Per(limit, time.Second), Queue: q})
	}},
	{name: "Concurrency", concurrency: true, make: func(limit int, q QueueOptions) (testLimiter, error) {
		return NewConcurrency(ConcurrencyOptions{Limit: limit, Queue: q})
	}},
}

func mustMake(t *testing.T, a algo, limit int, q QueueOptions) testLimiter {
	t.Helper()
	l, err := a.make(limit, q)
	if err != nil {
		t.Fatalf("%s(%d, %+v): %v", a.name, limit, q, err)
	}
	return l
}

// forEach runs f as a subtest per algorithm, inside a synctest bubble.
func forEach(t *testing.T, f func(t *testing.T, a algo)) {
	for _, a := range algos {
		t.Run(a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { f(t, a) })
		})
	}
}

// outcome is what one Acquire call ended with, and when (virtual time since
// the start of its test).
type outcome struct {
	id    int
	at    time.Duration
	lease Lease
	err   error
}

// recorder collects outcomes from waiter goroutines.
type recorder struct {
	start time.Time
	wg    sync.WaitGroup
	mu    sync.Mutex
	got   []outcome
}

// newRecorder returns a recorder whose goroutines the test waits for at its
// end (pass them t.Context() so that a failed test ends them too).
func newRecorder(t *testing.T) *recorder {
	r := &recorder{start: time.Now()}
	t.Cleanup(r.wg.Wait)
	return r
}

func (r *recorder) since() time.Duration { return time.Since(r.start) }

// acquire starts a goroutine that calls lim.Acquire(ctx, n), records the
// outcome under id, then holds a granted lease for hold and releases it.
// It returns once the goroutine is blocked (queued) or done.
func (r *recorder) acquire(ctx context.Context, lim Limiter, id, n int, hold time.Duration) {
	r.wg.Go(func() {
		l, err := lim.Acquire(ctx, n)
		r.mu.Lock()
		r.got = append(r.got, outcome{id: id, at: r.since(), lease: l, err: err})
		r.mu.Unlock()
		if err == nil {
			time.Sleep(hold)
			l.Release()
		}
	})
	synctest.Wait()
}

func (r *recorder) outcomes() []outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outcome(nil), r.got...)
}

func (r *recorder) find(t *testing.T, id int) outcome {
	t.Helper()
	for _, o := range r.outcomes() {
		if o.id == id {
			return o
		}
	}
	t.Fatalf("waiter %d has not returned", id)
	return outcome{}
}

// done reports whether waiter id has returned.
func (r *recorder) done(id int) bool {
	for _, o := range r.outcomes() {
		if o.id == id {
			return true
		}
	}
	return false
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func synctestRun(t *testing.T, f func(t *testing.T)) { t.Helper(); synctest.Test(t, f) }

func synctestWait() { synctest.Wait() }
