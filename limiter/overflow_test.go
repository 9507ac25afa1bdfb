package limiter_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// windowAlgos are the limiters whose bound is a count per window.
var windowAlgos = []struct {
	name string
	make func(limit int, w time.Duration, q QueueOptions) (testLimiter, error)
}{
	{"FixedWindow", func(limit int, w time.Duration, q QueueOptions) (testLimiter, error) {
		return NewFixedWindow(FixedWindowOptions{Limit: limit, Window: w, Queue: q})
	}},
	{"SlidingWindow", func(limit int, w time.Duration, q QueueOptions) (testLimiter, error) {
		return NewSlidingWindow(SlidingWindowOptions{Limit: limit, Window: w, Segments: 4, Queue: q})
	}},
	{"SlidingLog", func(limit int, w time.Duration, q QueueOptions) (testLimiter, error) {
		return NewSlidingLog(SlidingLogOptions{Limit: limit, Window: w, Queue: q})
	}},
}

// A limit of MaxInt is a limit: once MaxInt-1 permits are taken, 1 more is
// granted and 2 are not (count+need must not wrap).
func TestMaxIntLimit(t *testing.T) {
	for _, a := range windowAlgos {
		t.Run(a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, err := a.make(math.MaxInt, time.Second, QueueOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !lim.TryAcquire(math.MaxInt - 1).Granted() {
					t.Fatal("TryAcquire(MaxInt-1) on a new limiter refused")
				}
				if l := lim.TryAcquire(2); l.Granted() || l.RetryAfter() <= 0 {
					t.Fatalf("TryAcquire(2) with 1 permit left: granted %v, retry %v", l.Granted(), l.RetryAfter())
				}
				if !lim.TryAcquire(1).Granted() {
					t.Fatal("TryAcquire(1) with 1 permit left refused")
				}
				for _, n := range []int{1, math.MaxInt} {
					if lim.TryAcquire(n).Granted() {
						t.Fatalf("TryAcquire(%d) granted past a limit of MaxInt", n)
					}
				}
				if st := lim.Stats(); st.Available != 0 || st.Granted != 2 {
					t.Fatalf("Stats = %+v, want nothing available and 2 granted", st)
				}
				time.Sleep(time.Second)
				if !lim.TryAcquire(math.MaxInt).Granted() {
					t.Fatal("TryAcquire(MaxInt) after a window refused")
				}
			})
		})
	}
}

// A queue cap near MaxInt is a cap: the permits queued are counted without
// wrapping, and a waiter that would take them past the cap fails at once
// (OldestFirst) or pushes out the oldest (NewestFirst). With no cap, the
// count still cannot wrap: a queue holds at most MaxInt64 permits.
func TestQueueCapNearMaxInt(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    QueueOptions
	}{
		{"OldestFirst cap MaxInt", QueueOptions{Limit: math.MaxInt}},
		{"OldestFirst cap MaxInt-1", QueueOptions{Limit: math.MaxInt - 1}},
		{"NewestFirst cap MaxInt", QueueOptions{Limit: math.MaxInt, Order: NewestFirst}},
		{"no cap", QueueOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testQueueCapNearMaxInt(t, tc.q) })
		})
	}
}

func testQueueCapNearMaxInt(t *testing.T, q QueueOptions) {
	lim, err := NewConcurrency(ConcurrencyOptions{Limit: math.MaxInt, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	lim.TryAcquire(math.MaxInt) // every permit is held: everyone waits
	big := math.MaxInt - 2
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errs := make(chan error, 2)
	go func() { _, err := lim.Acquire(ctx, big); errs <- err }()
	synctest.Wait()
	go func() { _, err := lim.Acquire(ctx, 3); errs <- err }()
	synctest.Wait()
	st := lim.Stats()
	if st.Queued < 0 || st.Waiters != 1 {
		t.Fatalf("Stats = %+v: want one waiter and a queued count that did not wrap", st)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, ErrQueueFull) {
			t.Fatalf("the waiter past the cap: %v, want ErrQueueFull", err)
		}
	default:
		t.Fatal("a waiter past the cap was queued")
	}
	wantQueued := int64(big)
	if q.Order == NewestFirst {
		wantQueued = 3
	}
	if st.Queued != wantQueued {
		t.Fatalf("Queued = %d, want %d", st.Queued, wantQueued)
	}
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the queued waiter: %v, want Canceled", err)
	}
}

// A window of MaxInt64 ns (292 years) is either refused or enforced: the
// grant's expiry (at+Window) must not wrap into the past, and the wait it
// reports must be positive.
func TestHugeWindow(t *testing.T) {
	for _, a := range windowAlgos {
		t.Run(a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, err := a.make(1, math.MaxInt64, QueueOptions{})
				if err != nil {
					var oe *OptionError
					if !errors.As(err, &oe) || oe.Field != "Window" {
						t.Fatalf("refused with %v, want an *OptionError naming Window", err)
					}
					return
				}
				time.Sleep(time.Hour) // the grants' instants are not 0
				granted := 0
				for range 100 {
					l := lim.TryAcquire(1)
					if l.Granted() {
						granted++
					} else if l.RetryAfter() <= 0 {
						t.Fatalf("refused with RetryAfter %v, want a positive wait", l.RetryAfter())
					}
					time.Sleep(time.Hour)
				}
				if granted != 1 {
					t.Fatalf("%d of 100 granted in 100 hours at 1 per 292 years", granted)
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
				defer cancel()
				if _, err := lim.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Acquire with an hour's deadline: %v, want DeadlineExceeded", err)
				}
				if q := lim.(Quoter).Quota(); q.Remaining != 0 || q.Reset <= 0 {
					t.Fatalf("Quota = %+v, want nothing remaining and a positive reset", q)
				}
			})
		})
	}
}

// Releasing far more than was taken, up to MaxInt permits, caps the free
// permits at the limit: the limiter neither grows nor wedges.
func TestConcurrencyOverReleaseMaxInt(t *testing.T) {
	c, err := NewConcurrency(ConcurrencyOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	held := c.TryAcquire(1)
	c.ReleasePermits(math.MaxInt)
	c.ReleasePermits(math.MaxInt)
	if st := c.Stats(); st.Available != 2 || c.InUse() != 0 {
		t.Fatalf("after over-releases: Available %d InUse %d, want 2 and 0", st.Available, c.InUse())
	}
	if !c.TryAcquire(2).Granted() {
		t.Fatal("TryAcquire(2) refused after over-releases: the limiter is wedged")
	}
	if c.TryAcquire(1).Granted() {
		t.Fatal("a third permit granted at a limit of 2: over-release grew the limiter")
	}
	held.Release()
	if !c.TryAcquire(1).Granted() {
		t.Fatal("a released permit did not come back")
	}
}
