package pool_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
	"go.uber.org/goleak"
)

func mustPool(t *testing.T, opts pool.Options) *pool.Pool {
	t.Helper()
	p, err := pool.New(opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	return p
}

func slidingLog(t *testing.T, limit int, window time.Duration) *limiter.SlidingLog {
	t.Helper()
	l, err := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: limit, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNewRejectsWorkers(t *testing.T) {
	for _, n := range []int{0, -1, -100} {
		p, err := pool.New(pool.Options{Workers: n})
		var oe *limiter.OptionError
		if p != nil || !errors.As(err, &oe) || oe.Field != "Workers" || !strings.Contains(err.Error(), "Workers") {
			t.Errorf("New(Workers: %d) = %v, %v; want nil and an *limiter.OptionError naming Workers", n, p, err)
		}
	}
}

// TestParallelFor is the seed's Parallel.For case: 10 tasks of 250 ms at 2
// per second (a sliding log of 2 per 1 s) start in pairs at 0, 1, 2, 3 and
// 4 s, and the last finishes at 4.25 s.
func TestParallelFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := mustPool(t, pool.Options{Workers: 10, Limiter: slidingLog(t, 2, time.Second)})
		var mu sync.Mutex
		var starts, finishes []time.Duration
		for range 10 {
			err := p.Go(func(ctx context.Context) error {
				mu.Lock()
				starts = append(starts, time.Since(start))
				mu.Unlock()
				time.Sleep(250 * time.Millisecond)
				mu.Lock()
				finishes = append(finishes, time.Since(start))
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if want := time.Duration(i/2) * time.Second; starts[i] != want {
				t.Errorf("task %d started at %v, want %v", i, starts[i], want)
			}
			if want := time.Duration(i/2)*time.Second + 250*time.Millisecond; finishes[i] != want {
				t.Errorf("task %d finished at %v, want %v", i, finishes[i], want)
			}
		}
		if got, want := time.Since(start), 4250*time.Millisecond; got != want {
			t.Errorf("Wait returned at %v, want %v", got, want)
		}
	})
}

// TestWorkersBound: 20 tasks of 100 ms on 3 workers run 3 at a time, in 7
// rounds, and Go blocks while all 3 are busy.
func TestWorkersBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := mustPool(t, pool.Options{Workers: 3})
		var running, peak atomic.Int64
		var goReturned []time.Duration
		for range 20 {
			if err := p.Go(func(ctx context.Context) error {
				n := running.Add(1)
				for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
				}
				time.Sleep(100 * time.Millisecond)
				running.Add(-1)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			goReturned = append(goReturned, time.Since(start))
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		if peak.Load() != 3 {
			t.Errorf("peak running %d, want exactly 3", peak.Load())
		}
		for i, at := range goReturned {
			if want := time.Duration(i/3) * 100 * time.Millisecond; at != want {
				t.Errorf("Go %d returned at %v, want %v", i, at, want)
			}
		}
		if got := time.Since(start); got != 700*time.Millisecond {
			t.Errorf("took %v, want 700ms", got)
		}
	})
}

func TestGoAfterWaitOrClose(t *testing.T) {
	for _, end := range []string{"Wait", "Close"} {
		t.Run(end, func(t *testing.T) {
			p := mustPool(t, pool.Options{Workers: 2})
			ran := false
			if err := p.Go(func(context.Context) error { ran = true; return nil }); err != nil {
				t.Fatal(err)
			}
			if end == "Wait" {
				p.Wait()
			} else {
				p.Close()
			}
			if !ran {
				t.Error("a task submitted before " + end + " did not run")
			}
			task := func(context.Context) error { t.Error("task ran after " + end); return nil }
			for name, err := range map[string]error{
				"Go":        p.Go(task),
				"GoContext": p.GoContext(t.Context(), task),
				"TryGo":     p.TryGo(task),
			} {
				if !errors.Is(err, pool.ErrClosed) || !errors.Is(err, limiter.ErrClosed) {
					t.Errorf("%s after %s: %v, want ErrClosed", name, end, err)
				}
			}
			if err := p.Wait(); err != nil {
				t.Errorf("Wait: %v", err)
			}
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
}

func TestWaitJoinsErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e1, e2 := errors.New("one"), errors.New("two")
		for _, first := range []bool{false, true} {
			p := mustPool(t, pool.Options{Workers: 4, FirstError: first})
			p.Go(func(context.Context) error { time.Sleep(time.Millisecond); return e1 })
			p.Go(func(context.Context) error { return nil })
			p.Go(func(context.Context) error { time.Sleep(2 * time.Millisecond); return e2 })
			err := p.Wait()
			if !errors.Is(err, e1) {
				t.Errorf("FirstError=%v: Wait = %v, lacks the first error", first, err)
			}
			if errors.Is(err, e2) == first {
				t.Errorf("FirstError=%v: Wait = %v; has the second error: %v", first, err, errors.Is(err, e2))
			}
			if err2 := p.Wait(); err2 != err {
				t.Errorf("second Wait = %v, want the same %v", err2, err)
			}
		}
	})
}

func TestCancelOnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		for _, cancel := range []bool{false, true} {
			start := time.Now()
			p := mustPool(t, pool.Options{Workers: 2, CancelOnError: cancel})
			var cause error
			p.Go(func(ctx context.Context) error {
				select {
				case <-ctx.Done():
					cause = context.Cause(ctx)
				case <-time.After(time.Second):
				}
				return nil
			})
			p.Go(func(context.Context) error { time.Sleep(10 * time.Millisecond); return boom })
			if err := p.Wait(); !errors.Is(err, boom) {
				t.Errorf("Wait = %v, want boom", err)
			}
			el := time.Since(start)
			if cancel && (cause != boom || el != 10*time.Millisecond) {
				t.Errorf("CancelOnError: the other task saw cause %v at %v, want boom at 10ms", cause, el)
			}
			if !cancel && (cause != nil || el != time.Second) {
				t.Errorf("without CancelOnError: the other task saw cause %v at %v, want nothing, 1s", cause, el)
			}
		}
	})
}

func TestTaskContextEndsAfterWait(t *testing.T) {
	p := mustPool(t, pool.Options{Workers: 1})
	var tctx context.Context
	p.Go(func(ctx context.Context) error { tctx = ctx; return nil })
	p.Wait()
	if tctx.Err() == nil {
		t.Error("the tasks' context is still live after Wait")
	}
}

func TestPanicComesBackAsError(t *testing.T) {
	p := mustPool(t, pool.Options{Workers: 1})
	sentinel := errors.New("sentinel")
	p.Go(func(context.Context) error { panicker("kaboom"); return nil })
	p.Go(func(context.Context) error { panic(sentinel) })
	ran := false
	if err := p.Go(func(context.Context) error { ran = true; return nil }); err != nil {
		t.Fatal(err)
	}
	err := p.Wait()
	if !ran {
		t.Error("the worker did not survive the panics")
	}
	var pe *pool.PanicError
	if !errors.As(err, &pe) || pe.Value != "kaboom" || !strings.Contains(string(pe.Stack), "panicker") {
		t.Fatalf("Wait = %v; want a PanicError with the value and a stack through panicker", err)
	}
	if !strings.Contains(err.Error(), "kaboom") {
		t.Errorf("error text lacks the panic value: %v", err)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("errors.Is does not see the panicked error: %v", err)
	}
}

//go:noinline
func panicker(v any) { panic(v) }

func TestGoexit(t *testing.T) {
	p := mustPool(t, pool.Options{Workers: 1})
	p.Go(func(context.Context) error { runtimeGoexit(); return nil })
	var ran atomic.Int64
	for range 3 {
		p.Go(func(context.Context) error { ran.Add(1); return nil })
	}
	if err := p.Wait(); !errors.Is(err, pool.ErrGoexit) {
		t.Errorf("Wait = %v, want ErrGoexit", err)
	}
	if ran.Load() != 3 {
		t.Errorf("%d tasks ran after a Goexit, want 3", ran.Load())
	}
}

func TestTryGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPool(t, pool.Options{Workers: 1, Limiter: slidingLog(t, 2, time.Second)})
		sleep := func(context.Context) error { time.Sleep(100 * time.Millisecond); return nil }
		if err := p.TryGo(sleep); err != nil {
			t.Fatalf("TryGo on an idle pool: %v", err)
		}
		if err := p.TryGo(sleep); !errors.Is(err, pool.ErrBusy) || !errors.Is(err, limiter.ErrLimited) {
			t.Errorf("TryGo with the worker busy: %v, want ErrBusy", err)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if err := p.TryGo(sleep); err != nil {
			t.Fatalf("second TryGo: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if err := p.TryGo(sleep); !errors.Is(err, limiter.ErrLimited) || errors.Is(err, pool.ErrBusy) {
			t.Errorf("TryGo over the rate: %v, want the limiter's ErrLimited", err)
		}
		p.Wait()
	})
}

// TestGoContextGivesUp: a caller waiting for a worker or for the limiter
// gives up when its context ends; the task never runs.
func TestGoContextGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPool(t, pool.Options{Workers: 1, Limiter: slidingLog(t, 1, time.Second)})
		p.Go(func(context.Context) error { time.Sleep(500 * time.Millisecond); return nil })
		never := func(context.Context) error { t.Error("a task whose Go failed ran"); return nil }

		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if err := p.GoContext(ctx, never); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 100*time.Millisecond {
			t.Errorf("waiting for a worker: %v after %v, want DeadlineExceeded after 100ms", err, time.Since(start))
		}
		time.Sleep(500 * time.Millisecond) // the worker is free; the limiter is not until 1 s
		start = time.Now()
		ctx2, cancel2 := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel2()
		if err := p.GoContext(ctx2, never); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) >= 400*time.Millisecond {
			t.Errorf("waiting for the limiter: %v after %v, want DeadlineExceeded within 100ms", err, time.Since(start))
		}
		if err := p.Wait(); err != nil {
			t.Error(err)
		}
	})
}

// TestGoContextAlreadyDone: GoContext and GoKey with a context that has
// already ended fail with its error, and the task never runs, even when a
// worker and a permit are at hand.
func TestGoContextAlreadyDone(t *testing.T) {
	hosts, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
		return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 10, Window: time.Second})
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer hosts.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	never := func(context.Context) error { t.Error("a task whose Go failed ran"); return nil }
	for _, lim := range []limiter.Limiter{nil, slidingLog(t, 10, time.Second)} {
		p := mustPool(t, pool.Options{Workers: 2, Limiter: lim, PerKey: hosts.For})
		if err := p.GoContext(ctx, never); !errors.Is(err, context.Canceled) {
			t.Errorf("GoContext: %v, want context.Canceled", err)
		}
		if err := p.GoKey(ctx, "a", never); !errors.Is(err, context.Canceled) {
			t.Errorf("GoKey: %v, want context.Canceled", err)
		}
		if err := p.Go(func(context.Context) error { return nil }); err != nil {
			t.Errorf("Go after the refusals: %v", err)
		}
		if err := p.Wait(); err != nil {
			t.Error(err)
		}
	}
}

// TestCloseFailsWaitingGo: Close fails Go calls waiting for a worker and for
// the limiter with ErrClosed, and cancels running tasks with cause ErrClosed.
func TestCloseFailsWaitingGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, wait := range []string{"worker", "limiter"} {
			lim := slidingLog(t, 1, time.Hour)
			p := mustPool(t, pool.Options{Workers: 1, Limiter: lim})
			var cause error
			p.Go(func(ctx context.Context) error {
				if wait == "worker" {
					<-ctx.Done()
					cause = context.Cause(ctx)
				}
				return nil
			})
			errs := make(chan error, 2)
			go func() { errs <- p.Go(func(context.Context) error { return nil }) }()
			go func() { errs <- p.GoContext(t.Context(), func(context.Context) error { return nil }) }()
			time.Sleep(time.Second)
			p.Close()
			for range 2 {
				if err := <-errs; !errors.Is(err, pool.ErrClosed) {
					t.Errorf("waiting for the %s, Go got %v at Close, want ErrClosed", wait, err)
				}
			}
			if wait == "worker" && cause != pool.ErrClosed {
				t.Errorf("running task's context cause %v, want ErrClosed", cause)
			}
		}
	})
}

// TestParentContext: when Options.Context ends, Go fails with its error.
func TestParentContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	p := mustPool(t, pool.Options{Workers: 1, Context: ctx})
	cancel()
	if err := p.Go(func(context.Context) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Go after the parent ended: %v", err)
	}
	p.Wait()
}

// TestGoKey: a crawler's per-host limit. 16 workers, 2 starts per second per
// host, a sliding log per host; one host's backlog does not slow the other.
func TestGoKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		keyed, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
			return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 2, Window: time.Second})
		}})
		if err != nil {
			t.Fatal(err)
		}
		p := mustPool(t, pool.Options{Workers: 16, PerKey: keyed.For})
		var mu sync.Mutex
		starts := map[string][]time.Duration{}
		var wg sync.WaitGroup
		for _, host := range []string{"a", "b"} {
			n := 6
			if host == "b" {
				n = 2
			}
			wg.Go(func() {
				for range n {
					p.GoKey(t.Context(), host, func(context.Context) error {
						mu.Lock()
						starts[host] = append(starts[host], time.Since(start))
						mu.Unlock()
						return nil
					})
				}
			})
		}
		wg.Wait()
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		s := time.Second
		want := map[string][]time.Duration{"a": {0, 0, s, s, 2 * s, 2 * s}, "b": {0, 0}}
		if fmt.Sprint(starts) != fmt.Sprint(want) {
			t.Errorf("starts %v, want %v", starts, want)
		}

		p2 := mustPool(t, pool.Options{Workers: 1})
		ran := false
		if err := p2.GoKey(t.Context(), "a", func(context.Context) error { ran = true; return nil }); err != nil {
			t.Errorf("GoKey without PerKey (no per-key limit): %v", err)
		}
		if err := p2.Go(nil); !errors.Is(err, pool.ErrNilTask) {
			t.Errorf("Go(nil): %v", err)
		}
		if err := p2.Wait(); err != nil || !ran {
			t.Errorf("GoKey without PerKey: Wait = %v, ran %v", err, ran)
		}
	})
}

// TestGoKeyChainsLimiters: with both Limiter and PerKey, a start needs both.
func TestGoKeyChainsLimiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		keyed, _ := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
			return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 1, Window: time.Second})
		}})
		p := mustPool(t, pool.Options{Workers: 4, Limiter: slidingLog(t, 3, time.Second), PerKey: keyed.For})
		var mu sync.Mutex
		var starts []string
		for i, key := range []string{"a", "a", "b", "c", "d"} {
			p.GoKey(t.Context(), key, func(context.Context) error {
				mu.Lock()
				starts = append(starts, fmt.Sprintf("%d%s@%v", i, key, time.Since(start)))
				mu.Unlock()
				return nil
			})
		}
		p.Wait()
		// 0a, 2b, 3c at 0 (the global 3/s); 1a waits for a's window, 4d for
		// the global window: both at 1 s. a's wait holds up no other key.
		want := "[0a@0s 1a@1s 2b@0s 3c@0s 4d@1s]"
		slices.Sort(starts)
		if got := fmt.Sprint(starts); got != want {
			t.Errorf("starts %v, want %v", got, want)
		}
	})
}

// TestConcurrencyLeaseReleased: a Concurrency limiter's lease is held while
// the task runs, so one limiter bounds two pools together.
func TestConcurrencyLeaseReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		conc, _ := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 2})
		p1 := mustPool(t, pool.Options{Workers: 2, Limiter: conc})
		p2 := mustPool(t, pool.Options{Workers: 2, Limiter: conc})
		var peak, running atomic.Int64
		task := func(context.Context) error {
			n := running.Add(1)
			for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
			}
			time.Sleep(time.Second)
			running.Add(-1)
			return nil
		}
		var wg sync.WaitGroup
		for _, p := range []*pool.Pool{p1, p2} {
			wg.Go(func() {
				for range 3 {
					p.Go(task)
				}
				p.Wait()
			})
		}
		wg.Wait()
		if peak.Load() != 2 || time.Since(start) != 3*time.Second || conc.InUse() != 0 {
			t.Errorf("peak %d, took %v, in use after %d; want 2, 3s, 0", peak.Load(), time.Since(start), conc.InUse())
		}
	})
}

// TestWaitWithConcurrentGo: Go calls racing Wait either run their task or
// fail with ErrClosed; Wait waits for those that got in.
func TestWaitWithConcurrentGo(t *testing.T) {
	for range 20 {
		p := mustPool(t, pool.Options{Workers: 2})
		var ran, accepted atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 100 {
					err := p.Go(func(context.Context) error { ran.Add(1); return nil })
					if err == nil {
						accepted.Add(1)
					} else if !errors.Is(err, pool.ErrClosed) {
						t.Error(err)
					}
				}
			})
		}
		p.Wait()
		got := ran.Load()
		wg.Wait()
		if got != accepted.Load() || ran.Load() != got {
			t.Fatalf("ran %d (then %d), accepted %d", got, ran.Load(), accepted.Load())
		}
	}
}

// TestQueue: with Queue, Go returns once its task is queued; the queue is
// bounded; TryGo fails with ErrBusy only when it is full.
func TestQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := mustPool(t, pool.Options{Workers: 1, Queue: 2})
		var starts []time.Duration
		task := func(context.Context) error {
			starts = append(starts, time.Since(start))
			time.Sleep(time.Second)
			return nil
		}
		var returned []time.Duration
		for range 4 {
			if err := p.Go(task); err != nil {
				t.Fatal(err)
			}
			returned = append(returned, time.Since(start))
		}
		s := time.Second
		if want := []time.Duration{0, 0, 0, s}; !slices.Equal(returned, want) {
			t.Errorf("Go returned at %v, want %v (1 running + 2 queued, then wait)", returned, want)
		}
		if err := p.TryGo(task); !errors.Is(err, pool.ErrBusy) {
			t.Errorf("TryGo with the queue full: %v, want ErrBusy", err)
		}
		p.Wait()
		if want := []time.Duration{0, s, 2 * s, 3 * s}; !slices.Equal(starts, want) {
			t.Errorf("starts %v, want %v", starts, want)
		}
		var oe *limiter.OptionError
		if _, err := pool.New(pool.Options{Workers: 1, Queue: -1}); !errors.As(err, &oe) || oe.Field != "Queue" {
			t.Errorf("Queue -1: %v, want an *limiter.OptionError naming Queue", err)
		}
	})
}

// TestQueueLimiter: with Queue the worker passes the limiter, so the starts
// keep the limiter's bound as without it (the Parallel.For case), while Go
// returns at once.
func TestQueueLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		p := mustPool(t, pool.Options{Workers: 4, Queue: 6, Limiter: slidingLog(t, 2, time.Second)})
		var mu sync.Mutex
		var starts []time.Duration
		for range 10 {
			p.Go(func(context.Context) error {
				mu.Lock()
				starts = append(starts, time.Since(start))
				mu.Unlock()
				time.Sleep(250 * time.Millisecond)
				return nil
			})
		}
		if el := time.Since(start); el != 0 {
			t.Errorf("Go of 10 tasks into a queue of 6 with 4 workers took %v", el)
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		s := time.Second
		if want := []time.Duration{0, 0, s, s, 2 * s, 2 * s, 3 * s, 3 * s, 4 * s, 4 * s}; !slices.Equal(starts, want) {
			t.Errorf("starts %v, want %v", starts, want)
		}
	})
}

// TestQueueClose: queued tasks that have not started when Close comes never
// run; Wait reports each with ErrClosed.
func TestQueueClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := mustPool(t, pool.Options{Workers: 1, Queue: 3})
		var ran atomic.Int64
		for range 4 {
			p.Go(func(ctx context.Context) error {
				ran.Add(1)
				<-ctx.Done()
				return nil
			})
		}
		time.Sleep(time.Second)
		p.Close()
		err := p.Wait()
		joined, _ := err.(interface{ Unwrap() []error })
		if ran.Load() != 1 || joined == nil || len(joined.Unwrap()) != 3 || !errors.Is(err, pool.ErrClosed) {
			t.Errorf("ran %d, Wait = %v; want 1 ran and 3 ErrClosed", ran.Load(), err)
		}
	})
}

// chanCtx is a context that is not one of package context's own, so that a
// context derived from it watches it with a goroutine until one of them ends.
type chanCtx struct {
	context.Context
	done chan struct{}
}

func (c *chanCtx) Done() <-chan struct{} { return c.done }

// TestWaitReleasesParentContext: after Wait, the pool holds nothing on
// Options.Context: a long-lived parent (a server's) does not keep a goroutine
// or a child context per pool that was waited for.
func TestWaitReleasesParentContext(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	parent := &chanCtx{Context: context.Background(), done: make(chan struct{})}
	defer close(parent.done)
	p := mustPool(t, pool.Options{Workers: 2, Context: parent})
	if err := p.Go(func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, opt)
}
