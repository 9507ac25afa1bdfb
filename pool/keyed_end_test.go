package pool_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
)

// slowLimiter is a per-key limiter whose TryAcquire takes time, as a limiter
// that asks a server does (redislimit): it waits delay() before deciding,
// and then asks lim. Its Acquire is lim's.
type slowLimiter struct {
	limiter.Limiter
	delay func() time.Duration
}

func (s slowLimiter) TryAcquire(n int) limiter.Lease {
	time.Sleep(s.delay())
	return s.Limiter.TryAcquire(n)
}

// TestCloseWhileKeyTried: Close comes while a key's limiter is deciding
// (TryAcquire takes 10 ms) and then refuses with a retry hint. The task
// being tried never runs, Close and Wait return at once, and Wait reports
// the task's ErrClosed.
func TestCloseWhileKeyTried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		rate := slidingLog(t, 1, time.Hour)
		rate.TryAcquire(1) // the key's permit is spent: the next try refuses for an hour
		slow := slowLimiter{Limiter: rate, delay: func() time.Duration { return 10 * time.Millisecond }}
		p := mustPool(t, pool.Options{Workers: 2, PerKey: func(string) limiter.Limiter { return slow }})
		closed := make(chan struct{})
		time.AfterFunc(5*time.Millisecond, func() { p.Close(); close(closed) })
		var ran atomic.Bool
		p.GoKey(t.Context(), "k", func(context.Context) error { ran.Store(true); return nil })
		select {
		case <-closed:
		case <-time.After(time.Minute):
			t.Fatal("Close did not return")
		}
		err := p.Wait()
		if ran.Load() || !errors.Is(err, pool.ErrClosed) {
			t.Errorf("ran %v, Wait = %v; want not run and ErrClosed", ran.Load(), err)
		}
		if el := time.Since(start); el != 10*time.Millisecond {
			t.Errorf("Close and Wait returned at %v, want 10ms (when TryAcquire returned)", el)
		}
	})
}

// TestCloseWhileKeysTriedRealClock: the same race on the real clock, with
// a keyed token bucket whose TryAcquire takes 0-200 µs (a round trip to a
// server): one goroutine queues tasks of 50 hosts with GoKey while Close
// comes 30 ms in. In every run Close and Wait return, and every task
// either ran or is reported by Wait.
func TestCloseWhileKeysTriedRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("real clock")
	}
	keyed, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(20, time.Second), Burst: 2})
	if err != nil {
		t.Fatal(err)
	}
	perKey := func(k string) limiter.Limiter {
		return slowLimiter{Limiter: keyed.For(k), delay: func() time.Duration { return rand.N(200 * time.Microsecond) }}
	}
	for run := range 20 {
		p := mustPool(t, pool.Options{Workers: 4, PerKey: perKey})
		var ran, queued atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; i++ {
				host := string(rune('a' + i%50))
				if p.GoKey(t.Context(), host, func(context.Context) error { ran.Add(1); return nil }) != nil {
					return // closed
				}
				queued.Add(1)
			}
		})
		time.Sleep(30 * time.Millisecond)
		ended := make(chan error, 1)
		go func() {
			p.Close()
			ended <- p.Wait()
		}()
		select {
		case err = <-ended:
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: Close and Wait did not return in 10 s (%d tasks queued, %d ran)", run, queued.Load(), ran.Load())
		}
		wg.Wait()
		joined, _ := err.(interface{ Unwrap() []error })
		notRun := 0
		if joined != nil {
			notRun = len(joined.Unwrap())
		}
		if int64(notRun)+ran.Load() != queued.Load() || notRun > 0 && !errors.Is(err, pool.ErrClosed) {
			t.Fatalf("run %d: %d queued, %d ran, Wait reported %d (%v)", run, queued.Load(), ran.Load(), notRun, err)
		}
	}
}

// TestGoKeyCancelledWhileParked: a keyed task whose GoKey context ends
// while its key waits for its limiter (here for an hour) never runs, and is
// failed at once: Wait returns at the cancel with the task's error, and
// GoKey calls waiting for queue room get the room it held.
func TestGoKeyCancelledWhileParked(t *testing.T) {
	t.Run("head", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			lim := slidingLog(t, 1, time.Hour)
			p := mustPool(t, pool.Options{Workers: 2, PerKey: func(string) limiter.Limiter { return lim }})
			var ran atomic.Int64
			task := func(context.Context) error { ran.Add(1); return nil }
			p.GoKey(t.Context(), "k", task) // starts at 0, takes the hour's permit
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(time.Second, cancel)
			p.GoKey(ctx, "k", task) // waits for the hour
			err := p.Wait()
			if ran.Load() != 1 || !errors.Is(err, context.Canceled) {
				t.Errorf("ran %d, Wait = %v; want 1 ran and the cancelled task's Canceled", ran.Load(), err)
			}
			if el := time.Since(start); el != time.Second {
				t.Errorf("Wait returned at %v, want 1s (the cancel)", el)
			}
		})
	})
	t.Run("behind", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			lim := slidingLog(t, 1, time.Hour)
			p := mustPool(t, pool.Options{Workers: 1, Queue: 2, PerKey: func(string) limiter.Limiter { return lim }})
			task := func(context.Context) error { return nil }
			p.GoKey(t.Context(), "k", task) // starts at 0
			p.GoKey(t.Context(), "k", task) // waits for the hour
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(time.Second, cancel)
			p.GoKey(ctx, "k", task) // behind it: the queue is full
			if err := p.GoKey(t.Context(), "k", task); err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el != time.Second {
				t.Errorf("GoKey got room at %v, want 1s (the cancel of the task ahead)", el)
			}
			p.Close()
			if err := p.Wait(); !errors.Is(err, context.Canceled) || !errors.Is(err, pool.ErrClosed) {
				t.Errorf("Wait = %v, want the cancelled task's Canceled and the others' ErrClosed", err)
			}
		})
	})
}
