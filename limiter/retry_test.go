package limiter_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// One permit a second, granted at 0: asked again at 300 ms, each algorithm
// knows exactly when to retry, and a retry at that instant is granted (one
// nanosecond earlier is not).
func TestRetryAfterExact(t *testing.T) {
	for _, tc := range []struct {
		a         algo
		grantAt   time.Duration // the first grant, after creation
		askAt     time.Duration
		wantRetry time.Duration
	}{
		{algos[0], 0, ms(300), ms(700)},       // TokenBucket 1/s
		{algos[1], ms(300), ms(800), ms(200)}, // FixedWindow: the next window starts at 1 s
		{algos[2], ms(300), ms(800), ms(450)}, // SlidingWindow 4×250 ms: segment 1 leaves at 1.25 s
		{algos[3], 0, ms(300), ms(700)},       // SlidingLog 1/s
		{algos[3], ms(100), ms(1050), ms(50)}, // SlidingLog: the grant at 100 ms leaves at 1.1 s
		{algos[4], 0, ms(300), ms(700)},       // LeakyBucket 1/s
	} {
		t.Run(tc.a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := mustMake(t, tc.a, 1, QueueOptions{})
				time.Sleep(tc.grantAt)
				if l := lim.TryAcquire(1); !l.Granted() || l.RetryAfter() != 0 || l.Err() != nil {
					t.Fatalf("first TryAcquire: granted %v retry %v err %v", l.Granted(), l.RetryAfter(), l.Err())
				}
				time.Sleep(tc.askAt - tc.grantAt)
				l := lim.TryAcquire(1)
				if l.Granted() || !errors.Is(l.Err(), ErrLimited) || l.Permits() != 0 {
					t.Fatalf("second TryAcquire: granted %v err %v", l.Granted(), l.Err())
				}
				if l.RetryAfter() != tc.wantRetry {
					t.Fatalf("RetryAfter = %v, want %v", l.RetryAfter(), tc.wantRetry)
				}
				// TryAcquire(0) asks the same question.
				if l0 := lim.TryAcquire(0); l0.Granted() || l0.RetryAfter() != tc.wantRetry {
					t.Fatalf("TryAcquire(0): granted %v retry %v, want refused, %v", l0.Granted(), l0.RetryAfter(), tc.wantRetry)
				}
				time.Sleep(tc.wantRetry - 1)
				if l := lim.TryAcquire(1); l.Granted() || l.RetryAfter() != 1 {
					t.Fatalf("1ns before RetryAfter: granted %v retry %v; want refused, 1ns", l.Granted(), l.RetryAfter())
				}
				time.Sleep(time.Nanosecond)
				if l := lim.TryAcquire(1); !l.Granted() {
					t.Fatalf("at RetryAfter: refused (%v, retry %v)", l.Err(), l.RetryAfter())
				}
			})
		})
	}
}

// RetryAfter counts the permits asked: n permits wait for n to be free.
func TestRetryAfterScalesWithRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(4, time.Second), Burst: 4})
		sl, _ := NewSlidingLog(SlidingLogOptions{Limit: 4, Window: time.Second})
		lb, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(4, time.Second)})
		tb.TryAcquire(4)
		lb.TryAcquire(3) // the next slot is 750 ms away, whatever its size
		sl.TryAcquire(1)
		time.Sleep(ms(100))
		sl.TryAcquire(2)
		time.Sleep(ms(100))
		sl.TryAcquire(1) // log: 1@0, 2@100, 1@200
		for _, tc := range []struct {
			name string
			lim  Limiter
			n    int
			want time.Duration
		}{
			{"TokenBucket 1", tb, 1, ms(50)},
			{"TokenBucket 3", tb, 3, ms(550)},
			{"TokenBucket 4", tb, 4, ms(800)},
			{"SlidingLog 1", sl, 1, ms(800)},
			{"SlidingLog 2", sl, 2, ms(900)},
			{"SlidingLog 3", sl, 3, ms(900)},
			{"SlidingLog 4", sl, 4, ms(1000)},
			{"LeakyBucket 1", lb, 1, ms(550)},
			{"LeakyBucket 9", lb, 9, ms(550)},
		} {
			if l := tc.lim.TryAcquire(tc.n); l.Granted() || l.RetryAfter() != tc.want {
				t.Errorf("%s: granted %v retry %v, want refused, %v", tc.name, l.Granted(), l.RetryAfter(), tc.want)
			}
		}
	})
}

// A concurrency limiter cannot know when a lease will be released.
func TestRetryAfterUnknownForConcurrency(t *testing.T) {
	c, _ := NewConcurrency(ConcurrencyOptions{Limit: 1})
	held := c.TryAcquire(1)
	if l := c.TryAcquire(1); l.Granted() || !errors.Is(l.Err(), ErrLimited) || l.RetryAfter() != 0 {
		t.Fatalf("TryAcquire on a full semaphore: granted %v err %v retry %v", l.Granted(), l.Err(), l.RetryAfter())
	}
	held.Release()
	if l := c.TryAcquire(1); !l.Granted() || l.RetryAfter() != 0 {
		t.Fatal("released permit not available")
	}
}

// Acquire that fails early because the wait would outlast the deadline
// reports the wait in its lease.
func TestRetryAfterOnEarlyDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sl, _ := NewSlidingLog(SlidingLogOptions{Limit: 1, Window: time.Second})
		sl.TryAcquire(1)
		time.Sleep(ms(300))
		ctx, cancel := context.WithTimeout(context.Background(), ms(500))
		defer cancel()
		before := time.Now()
		l, err := sl.Acquire(ctx, 1)
		if waited := time.Since(before); waited != 0 {
			t.Fatalf("Acquire waited %v before failing", waited)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		if l.Granted() || l.RetryAfter() != ms(700) || !errors.Is(l.Err(), context.DeadlineExceeded) {
			t.Fatalf("lease granted %v retry %v, want refused, 700ms", l.Granted(), l.RetryAfter())
		}
	})
}
