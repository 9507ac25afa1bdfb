package limiter_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// workload runs three goroutines that each take one permit five times,
// holding it 120 ms, and returns the sorted grant instants.
func workload(t *testing.T, a algo, q QueueOptions) []time.Duration {
	var at []time.Duration
	synctest.Test(t, func(t *testing.T) {
		lim := mustMake(t, a, 2, q)
		start := time.Now()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				for range 5 {
					l, err := lim.Acquire(t.Context(), 1)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					at = append(at, time.Since(start))
					mu.Unlock()
					time.Sleep(ms(120))
					l.Release()
				}
			})
		}
		wg.Wait()
	})
	slices.Sort(at)
	return at
}

// Inside a synctest bubble the clock stands still while a waiter spins, so
// the spin must fall back to its timer rather than hang, and grants must
// come at the same instants as without spinning, whether the whole wait is
// within Spin or only its end.
func TestSpinInBubble(t *testing.T) {
	for _, a := range algos {
		t.Run(a.name, func(t *testing.T) {
			for _, order := range []Order{OldestFirst, NewestFirst} {
				want := workload(t, a, QueueOptions{Order: order})
				if len(want) != 15 {
					t.Fatalf("%d grants without spin, want 15", len(want))
				}
				for _, spin := range []time.Duration{time.Nanosecond, ms(50), time.Hour} {
					got := workload(t, a, QueueOptions{Spin: spin, Order: order})
					if !slices.Equal(got, want) {
						t.Fatalf("Spin %v order %d: grants at %v, want %v", spin, order, got, want)
					}
				}
				if got := workload(t, a, QueueOptions{PlainTimers: true, Order: order}); !slices.Equal(got, want) {
					t.Fatalf("PlainTimers order %d: grants at %v, want %v", order, got, want)
				}
			}
		})
	}
}

// On the real clock a spinning head waiter stops spinning when it is
// canceled or its limiter closes (no test here waits for the clock: the
// waits are an hour long).
func TestSpinStopsOnCancelAndClose(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Hour), Burst: 1,
			Queue: QueueOptions{Spin: 2 * time.Hour}})
		tb.TryAcquire(1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { _, err := tb.Acquire(ctx, 1); done <- err }()
		for tb.Stats().Waiters == 0 {
			runtime.Gosched()
		}
		want := context.Canceled
		if how == "cancel" {
			cancel()
		} else {
			tb.Close()
			want = ErrClosed
		}
		if err := <-done; !errors.Is(err, want) {
			t.Fatalf("%s: spinning waiter returned %v, want %v", how, err, want)
		}
		cancel()
	}
}

// On the real clock a spinning waiter is granted, never before its time,
// and so is one waiting on plain timers, whatever their lateness.
func TestSpinReachesWakeTime(t *testing.T) {
	for _, q := range []QueueOptions{{Spin: time.Second}, {PlainTimers: true}} {
		lb, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(1, 200*time.Microsecond), Queue: q})
		if !lb.TryAcquire(1).Granted() {
			t.Fatal("first slot refused")
		}
		for range 5 {
			start := time.Now()
			retry := lb.TryAcquire(1).RetryAfter()
			if _, err := lb.Acquire(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			if waited := time.Since(start); retry > 0 && waited < retry {
				t.Fatalf("%+v: granted after %v, before the slot %v away", q, waited, retry)
			}
		}
	}
}
