package limiter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// A waiter whose context is canceled returns at once with an error matching
// context.Canceled, and leaves the queue.
func TestCancelWaiter(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 1, QueueOptions{})
		held := lim.TryAcquire(1)
		r := newRecorder(t)
		ctx, cancel := context.WithCancel(t.Context())
		r.acquire(ctx, lim, 1, 1, 0)
		time.Sleep(ms(300))
		cancel()
		synctestWait()
		o := r.find(t, 1)
		if !errors.Is(o.err, context.Canceled) || o.at != ms(300) {
			t.Fatalf("canceled waiter: %v at %v; want context.Canceled at 300ms", o.err, o.at)
		}
		if o.lease.Granted() || o.lease.Permits() != 0 || !errors.Is(o.lease.Err(), context.Canceled) {
			t.Fatalf("canceled waiter's lease: granted %v err %v", o.lease.Granted(), o.lease.Err())
		}
		if st := lim.Stats(); st.Waiters != 0 || st.Queued != 0 || st.Rejected != 1 || st.Granted != 1 {
			t.Fatalf("Stats after cancel = %+v", st)
		}
		held.Release()
		// An already-canceled context fails before queueing, even with permits free.
		time.Sleep(time.Second)
		if l, err := lim.Acquire(ctx, 1); !errors.Is(err, context.Canceled) || l.Granted() {
			t.Fatalf("Acquire with a canceled ctx = %v", err)
		}
		if !lim.TryAcquire(1).Granted() {
			t.Fatal("the canceled Acquire took the permit")
		}
	})
}

// A deadline that ends the wait gives an error matching
// context.DeadlineExceeded. When the limiter knows the wait outlasts the
// deadline it fails at once, without waiting for it.
func TestDeadline(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 1, QueueOptions{})
		held := lim.TryAcquire(1)
		ctx, cancel := context.WithTimeout(t.Context(), ms(400))
		defer cancel()
		start := time.Now()
		l, err := lim.Acquire(ctx, 1)
		waited := time.Since(start)
		if !errors.Is(err, context.DeadlineExceeded) || l.Granted() || !errors.Is(l.Err(), context.DeadlineExceeded) {
			t.Fatalf("Acquire past its deadline = %v (lease %v), granted %v; want DeadlineExceeded", err, l.Err(), l.Granted())
		}
		want := time.Duration(0) // the permit is 1 s away: fail at once
		if a.concurrency {
			want = ms(400) // nobody knows when a lease comes back: wait it out
		} else if l.RetryAfter() != time.Second {
			t.Errorf("RetryAfter = %v, want 1s", l.RetryAfter())
		}
		if waited != want {
			t.Fatalf("failed after %v, want %v", waited, want)
		}
		if st := lim.Stats(); st.Waiters != 0 || st.Rejected != 1 {
			t.Fatalf("Stats = %+v", st)
		}
		// A deadline after the wait: granted at the wait's end.
		time.Sleep(ms(100))
		go func() { time.Sleep(ms(900) - waited); held.Release() }()
		ctx2, cancel2 := context.WithTimeout(t.Context(), ms(1500))
		defer cancel2()
		if _, err := lim.Acquire(ctx2, 1); err != nil {
			t.Fatalf("Acquire within its deadline: %v", err)
		}
		if at := time.Since(start); at != time.Second {
			t.Fatalf("granted at %v, want 1s", at)
		}
	})
}

// Queued behind a waiter whose grant comes after the deadline, a request
// fails at once too (FIFO: it cannot be served before the head).
func TestDeadlineBehindQueue(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		if a.concurrency {
			t.Skip("a semaphore's wait is unknown")
		}
		lim := mustMake(t, a, 1, QueueOptions{})
		lim.TryAcquire(1)
		r := newRecorder(t)
		r.acquire(t.Context(), lim, 1, 1, 0) // head: granted at 1s
		ctx, cancel := context.WithTimeout(t.Context(), ms(500))
		defer cancel()
		before := time.Now()
		if l, err := lim.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(l.Err(), context.DeadlineExceeded) {
			t.Fatalf("Acquire behind the head = %v (lease %v), want DeadlineExceeded", err, l.Err())
		}
		if time.Since(before) != 0 {
			t.Fatalf("failed after %v, want at once", time.Since(before))
		}
		time.Sleep(time.Second)
		synctestWait()
		if o := r.find(t, 1); o.err != nil || o.at != time.Second {
			t.Fatalf("head: %v at %v", o.err, o.at)
		}
	})
}

// A canceled waiter consumes nothing: the waiters behind it are served at
// the instants they would have been had it never queued.
func TestCanceledWaiterConsumesNothing(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 1, QueueOptions{})
		held := lim.TryAcquire(1)
		r := newRecorder(t)
		ctx, cancel := context.WithCancel(t.Context())
		r.acquire(t.Context(), lim, 1, 1, time.Second)
		r.acquire(ctx, lim, 2, 1, time.Second) // canceled in the middle of the queue
		r.acquire(t.Context(), lim, 3, 1, time.Second)
		r.acquire(t.Context(), lim, 4, 1, time.Second)
		time.Sleep(ms(500))
		cancel()
		time.Sleep(ms(500))
		held.Release()
		time.Sleep(5 * time.Second)
		for id, want := range map[int]time.Duration{1: time.Second, 3: 2 * time.Second, 4: 3 * time.Second} {
			if o := r.find(t, id); o.err != nil || o.at != want {
				t.Errorf("waiter %d: %v at %v, want granted at %v", id, o.err, o.at, want)
			}
		}
		if o := r.find(t, 2); !errors.Is(o.err, context.Canceled) || o.at != ms(500) {
			t.Errorf("waiter 2: %v at %v, want canceled at 500ms", o.err, o.at)
		}
		if st := lim.Stats(); st.Granted != 4 || st.Rejected != 1 {
			t.Errorf("Stats = %+v, want 4 granted, 1 rejected", st)
		}
	})
}

// Canceling the head of the queue lets the next waiter proceed at once when
// the permits it needs are free.
func TestCancelHeadLetsNextProceed(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 3, QueueOptions{})
		var held Lease
		if a.pacer {
			held = lim.TryAcquire(1) // the next slot is 333 ms away
		} else {
			held = lim.TryAcquire(2) // 1 of 3 free
		}
		r := newRecorder(t)
		ctx, cancel := context.WithCancel(t.Context())
		r.acquire(ctx, lim, 1, 3, 0)
		r.acquire(t.Context(), lim, 2, 1, 0)
		if r.done(2) {
			t.Fatal("the small request passed the head")
		}
		time.Sleep(ms(100))
		cancel()
		synctestWait()
		want := ms(100)
		if a.pacer {
			// The pacer's next slot, ⌈1s/3⌉, is the one the head waited for.
			time.Sleep(time.Second)
			want = 333333334
		}
		if o := r.find(t, 2); o.err != nil || o.at != want {
			t.Fatalf("waiter behind the canceled head: %v at %v, want granted at %v", o.err, o.at, want)
		}
		if o := r.find(t, 1); !errors.Is(o.err, context.Canceled) {
			t.Fatalf("head: %v, want canceled", o.err)
		}
		held.Release()
	})
}

// The same with NewestFirst: the canceled head is the newest waiter.
func TestCancelHeadNewestFirst(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 1, QueueOptions{Order: NewestFirst})
		held := lim.TryAcquire(1)
		r := newRecorder(t)
		ctx, cancel := context.WithCancel(t.Context())
		r.acquire(t.Context(), lim, 1, 1, time.Second)
		r.acquire(ctx, lim, 2, 1, time.Second)
		time.Sleep(ms(500))
		cancel()
		time.Sleep(ms(500))
		held.Release()
		time.Sleep(time.Second)
		if o := r.find(t, 1); o.err != nil || o.at != time.Second {
			t.Fatalf("waiter 1: %v at %v, want granted at 1s", o.err, o.at)
		}
		if o := r.find(t, 2); !errors.Is(o.err, context.Canceled) {
			t.Fatalf("waiter 2: %v", o.err)
		}
	})
}
