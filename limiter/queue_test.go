package limiter_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// grantOrder returns the ids of the granted outcomes in the order they were
// recorded, and checks that each was granted at the expected instant.
func grantOrder(t *testing.T, r *recorder) (ids []int, at []time.Duration) {
	t.Helper()
	for _, o := range r.outcomes() {
		if o.err != nil {
			continue
		}
		ids = append(ids, o.id)
		at = append(at, o.at)
	}
	return ids, at
}

// With one permit a second (or a semaphore of one held for a second), four
// queued waiters are served one a second, in queue order.
func TestQueueOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order Order
		want  []int
	}{
		{"OldestFirst", OldestFirst, []int{1, 2, 3, 4}},
		{"NewestFirst", NewestFirst, []int{4, 3, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEach(t, func(t *testing.T, a algo) {
				lim := mustMake(t, a, 1, QueueOptions{Order: tc.order})
				held := lim.TryAcquire(1)
				r := newRecorder(t)
				for id := 1; id <= 4; id++ {
					r.acquire(t.Context(), lim, id, 1, time.Second)
				}
				if st := lim.Stats(); st.Waiters != 4 || st.Queued != 4 || st.Granted != 1 {
					t.Fatalf("Stats with 4 queued = %+v", st)
				}
				time.Sleep(time.Second)
				held.Release()
				time.Sleep(4 * time.Second)
				ids, at := grantOrder(t, r)
				if !slices.Equal(ids, tc.want) {
					t.Fatalf("served %v, want %v", ids, tc.want)
				}
				if !slices.Equal(at, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}) {
					t.Fatalf("granted at %v, want 1s 2s 3s 4s", at)
				}
				if st := lim.Stats(); st.Waiters != 0 || st.Queued != 0 || st.Granted != 5 || st.Rejected != 0 {
					t.Fatalf("final Stats = %+v", st)
				}
			})
		})
	}
}

// exhaust takes every permit of a limiter made with limit 3 at this instant.
func exhaust(t *testing.T, lim Limiter) Lease {
	t.Helper()
	l := lim.TryAcquire(3)
	if !l.Granted() {
		t.Fatalf("TryAcquire(3) on a new limiter: %v", l.Err())
	}
	if lim.TryAcquire(0).Granted() {
		t.Fatal("permits left after exhaust")
	}
	return l
}

// OldestFirst with a cap: a request that would overflow the queue fails at
// once with ErrQueueFull, as does any request larger than the cap; the
// queued ones are still served.
func TestQueueLimitOldestFirst(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 3, QueueOptions{Limit: 2})
		held := exhaust(t, lim)
		before := time.Now()
		if l, err := lim.Acquire(t.Context(), 3); !errors.Is(err, ErrQueueFull) || !errors.Is(l.Err(), ErrQueueFull) || l.Granted() {
			t.Fatalf("Acquire(3) with a cap of 2 = %v, %v; want ErrQueueFull", l.Err(), err)
		}
		r := newRecorder(t)
		r.acquire(t.Context(), lim, 1, 1, time.Hour)
		r.acquire(t.Context(), lim, 2, 1, time.Hour)
		if l, err := lim.Acquire(t.Context(), 1); !errors.Is(err, ErrQueueFull) || !errors.Is(l.Err(), ErrQueueFull) {
			t.Fatalf("Acquire(1) on a full queue = %v, %v; want ErrQueueFull", l.Err(), err)
		}
		if time.Since(before) != 0 {
			t.Fatal("ErrQueueFull was not immediate")
		}
		if st := lim.Stats(); st.Waiters != 2 || st.Queued != 2 || st.Rejected != 3 {
			t.Fatalf("Stats = %+v, want 2 waiters, 2 queued, 3 rejected (exhaust's probe and 2 ErrQueueFull)", st)
		}
		time.Sleep(time.Second)
		held.Release()
		time.Sleep(time.Second)
		// (Both may be granted at one instant, so their order is not observable here.)
		if ids, _ := grantOrder(t, r); !slices.Equal(slices.Sorted(slices.Values(ids)), []int{1, 2}) {
			t.Fatalf("served %v, want 1 and 2", ids)
		}
		// Room again in the queue.
		r.acquire(t.Context(), lim, 3, 1, 0)
		time.Sleep(3 * time.Second)
		if o := r.find(t, 3); o.err != nil {
			t.Fatalf("waiter after the queue drained: %v", o.err)
		}
	})
}

// NewestFirst with a cap: a newcomer that overflows pushes out the OLDEST
// waiters with ErrQueueFull, at once; the rest are served newest first.
func TestQueueLimitNewestFirst(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 3, QueueOptions{Limit: 4, Order: NewestFirst})
		held := exhaust(t, lim)
		r := newRecorder(t)
		r.acquire(t.Context(), lim, 1, 1, time.Second)
		r.acquire(t.Context(), lim, 2, 1, time.Second)
		r.acquire(t.Context(), lim, 3, 2, time.Second)
		if r.done(1) {
			t.Fatal("waiter 1 returned with the queue at its cap")
		}
		r.acquire(t.Context(), lim, 4, 2, time.Second) // needs room for 2: waiters 1 and 2 go
		for _, id := range []int{1, 2} {
			o := r.find(t, id)
			if !errors.Is(o.err, ErrQueueFull) || !errors.Is(o.lease.Err(), ErrQueueFull) || o.at != 0 || o.lease.Granted() {
				t.Fatalf("waiter %d: %v (lease %v) at %v; want ErrQueueFull at 0", id, o.err, o.lease.Err(), o.at)
			}
		}
		if r.done(3) {
			t.Fatal("waiter 3 pushed out needlessly")
		}
		if st := lim.Stats(); st.Waiters != 2 || st.Queued != 4 || st.Rejected != 3 {
			t.Fatalf("Stats = %+v, want 2 waiters, 4 queued, 3 rejected (exhaust's probe and 2 pushed out)", st)
		}
		time.Sleep(time.Second)
		held.Release()
		time.Sleep(5 * time.Second)
		ids, at := grantOrder(t, r)
		if !slices.Equal(ids, []int{4, 3}) || at[0] >= at[1] {
			t.Fatalf("served %v at %v, want [4 3] one after the other", ids, at)
		}
	})
}

// A request larger than the queue's cap fails at once in either order, and
// pushes nobody out.
func TestQueueLimitSmallerThanRequest(t *testing.T) {
	for _, order := range []Order{OldestFirst, NewestFirst} {
		synctestRun(t, func(t *testing.T) {
			c, _ := NewConcurrency(ConcurrencyOptions{Limit: 10, Queue: QueueOptions{Limit: 2, Order: order}})
			held := c.TryAcquire(10)
			r := newRecorder(t)
			r.acquire(t.Context(), c, 1, 1, 0)
			before := time.Now()
			if _, err := c.Acquire(t.Context(), 3); !errors.Is(err, ErrQueueFull) || time.Since(before) != 0 {
				t.Fatalf("order %d: Acquire(3) with a cap of 2 = %v; want ErrQueueFull at once", order, err)
			}
			if r.done(1) {
				t.Fatalf("order %d: the queued waiter was pushed out", order)
			}
			// Granted at once when free: the cap only limits waiting.
			held.Release()
			time.Sleep(time.Millisecond)
			if o := r.find(t, 1); o.err != nil {
				t.Fatal(o.err)
			}
			if l, err := c.Acquire(t.Context(), 10); err != nil || l.Permits() != 10 {
				t.Fatalf("order %d: Acquire(10) on a free semaphore with a cap of 2 = %v", order, err)
			}
		})
	}
}

// No barging: while a waiter is queued, TryAcquire fails with ErrLimited
// even though enough permits for it are available, and a later Acquire
// queues behind.
func TestNoBarging(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		if a.pacer {
			t.Skip("a pacer has a permit free only when its queue is empty")
		}
		lim := mustMake(t, a, 3, QueueOptions{})
		held := lim.TryAcquire(2)
		r := newRecorder(t)
		r.acquire(t.Context(), lim, 1, 3, time.Second) // head of line: waits for 3
		if st := lim.Stats(); st.Available != 1 || st.Waiters != 1 {
			t.Fatalf("Stats = %+v, want 1 available, 1 waiter", st)
		}
		for _, n := range []int{1, 0} {
			l := lim.TryAcquire(n)
			if l.Granted() || !errors.Is(l.Err(), ErrLimited) {
				t.Fatalf("TryAcquire(%d) with a waiter queued: granted %v err %v; want ErrLimited", n, l.Granted(), l.Err())
			}
		}
		r.acquire(t.Context(), lim, 2, 1, time.Second)
		if r.done(2) {
			t.Fatal("Acquire(1) jumped the queue")
		}
		time.Sleep(time.Second)
		held.Release()
		time.Sleep(3 * time.Second)
		ids, at := grantOrder(t, r)
		if !slices.Equal(ids, []int{1, 2}) || at[0] >= at[1] {
			t.Fatalf("served %v at %v, want [1 2], 1 first", ids, at)
		}
		if st := lim.Stats(); st.Rejected != 2 {
			t.Fatalf("Rejected = %d, want the 2 TryAcquire", st.Rejected)
		}
	})
}

// A large head-of-line request is not starved by small ones behind it: in
// FIFO order it is granted as soon as its permits are free, before them.
func TestLargeHeadNotStarved(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 3, QueueOptions{})
		held := exhaust(t, lim)
		r := newRecorder(t)
		r.acquire(t.Context(), lim, 0, 3, 0) // the big one
		for id := 1; id <= 4; id++ {
			r.acquire(t.Context(), lim, id, 1, 0)
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(600 * time.Millisecond) // 1 s
		held.Release()
		time.Sleep(5 * time.Second)
		ids, at := grantOrder(t, r)
		if len(ids) != 5 || ids[0] != 0 || at[0] != time.Second {
			t.Fatalf("served %v at %v; want the big request first, at 1s", ids, at)
		}
		for i := 1; i < len(at); i++ {
			if at[i] < at[0] {
				t.Fatalf("small request %d granted at %v, before the big one", ids[i], at[i])
			}
		}
		// Small ones granted at one instant may record in any order.
		if small := slices.Sorted(slices.Values(ids[1:])); !slices.Equal(small, []int{1, 2, 3, 4}) {
			t.Fatalf("served %v", ids)
		}
	})
}

// Bad input never waits and never takes: negative counts are ErrInvalidCount,
// counts above what the limiter can ever grant are ErrExceedsLimit, from
// TryAcquire (in the lease) and from Acquire (wrapped in the error).
func TestBadCounts(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 3, QueueOptions{})
		over := 4
		if a.pacer {
			over = math.MaxInt // a pacer grants any size it can pace
			if l := lim.TryAcquire(1000); !l.Granted() {
				t.Fatalf("pacer refused a large request: %v", l.Err())
			}
			time.Sleep(time.Hour)
		}
		for _, tc := range []struct {
			n    int
			want error
		}{{-1, ErrInvalidCount}, {math.MinInt, ErrInvalidCount}, {over, ErrExceedsLimit}} {
			l := lim.TryAcquire(tc.n)
			if l.Granted() || l.Permits() != 0 || !errors.Is(l.Err(), tc.want) || l.RetryAfter() != 0 {
				t.Errorf("TryAcquire(%d) = granted %v err %v retry %v; want %v", tc.n, l.Granted(), l.Err(), l.RetryAfter(), tc.want)
			}
			before := time.Now()
			l, err := lim.Acquire(t.Context(), tc.n)
			if !errors.Is(err, tc.want) || l.Granted() || !errors.Is(l.Err(), tc.want) {
				t.Errorf("Acquire(%d) = %v (lease %v), want %v", tc.n, err, l.Err(), tc.want)
			}
			if time.Since(before) != 0 {
				t.Errorf("Acquire(%d) waited", tc.n)
			}
		}
		st := lim.Stats()
		if st.Available < 1 || st.Rejected != 6 || st.Waiters != 0 {
			t.Fatalf("after bad counts: %+v; want nothing taken, 6 rejected", st)
		}
		// Nothing was taken: the full limit is still there.
		if !a.pacer && !lim.TryAcquire(3).Granted() {
			t.Fatal("bad counts consumed permits")
		}
	})
}

// Zero-permit requests ask whether one permit is free and take nothing.
func TestZeroPermits(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 1, QueueOptions{})
		l := lim.TryAcquire(0)
		if !l.Granted() || l.Permits() != 0 || l.Err() != nil {
			t.Fatalf("TryAcquire(0) on a new limiter: granted %v permits %d err %v", l.Granted(), l.Permits(), l.Err())
		}
		l.Release() // gives back nothing
		if st := lim.Stats(); st.Available != mustMake(t, a, 1, QueueOptions{}).Stats().Available || st.Granted != 1 {
			t.Fatalf("after TryAcquire(0): %+v", st)
		}
		held := lim.TryAcquire(1)
		if !held.Granted() {
			t.Fatal("TryAcquire(0) took the permit")
		}
		if l := lim.TryAcquire(0); l.Granted() || !errors.Is(l.Err(), ErrLimited) {
			t.Fatalf("TryAcquire(0) with nothing free: granted %v err %v", l.Granted(), l.Err())
		}
		r := newRecorder(t)
		r.acquire(t.Context(), lim, 1, 0, 0)
		if r.done(1) {
			t.Fatal("Acquire(0) did not wait for a free permit")
		}
		time.Sleep(time.Second)
		held.Release()
		synctestWait()
		o := r.find(t, 1)
		if o.err != nil || !o.lease.Granted() || o.lease.Permits() != 0 || o.at != time.Second {
			t.Fatalf("Acquire(0): %v granted %v permits %d at %v; want granted, 0 permits, at 1s", o.err, o.lease.Granted(), o.lease.Permits(), o.at)
		}
		// It took nothing: the permit is there at that same instant.
		if l := lim.TryAcquire(1); !l.Granted() {
			t.Fatalf("Acquire(0) took the permit: %v", l.Err())
		}
	})
}

// NewestFirst: a newcomer is served first, so when its permits are free it
// is granted at once, and pushes nobody out of a full queue; when its wait
// would outlast its deadline it fails at once, also pushing nobody out.
func TestNewestFirstNewcomerPushesOutOnlyToWait(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		if a.pacer {
			t.Skip("a pacer with a waiter has no permit free")
		}
		lim := mustMake(t, a, 3, QueueOptions{Limit: 2, Order: NewestFirst})
		held := lim.TryAcquire(2) // 1 free
		r := newRecorder(t)
		r.acquire(t.Context(), lim, 1, 2, time.Second) // waits; the queue is full
		l, err := lim.Acquire(t.Context(), 1)
		synctestWait()
		if err != nil || !l.Granted() {
			t.Fatalf("newcomer for the free permit: %v", err)
		}
		if r.done(1) {
			t.Fatalf("waiter 1 pushed out by a newcomer that never waited: %v", r.find(t, 1).err)
		}
		if !a.concurrency { // a semaphore's wait is unknown: its newcomer waits
			ctx, cancel := context.WithTimeout(t.Context(), ms(100))
			defer cancel()
			before := time.Now()
			if _, err := lim.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) || time.Since(before) != 0 {
				t.Fatalf("newcomer with a short deadline: %v, want DeadlineExceeded at once", err)
			}
			synctestWait()
			if r.done(1) {
				t.Fatalf("waiter 1 pushed out by a newcomer that did not wait: %v", r.find(t, 1).err)
			}
		}
		time.Sleep(time.Second)
		held.Release()
		l.Release()
		time.Sleep(2 * time.Second)
		if o := r.find(t, 1); o.err != nil {
			t.Fatalf("waiter 1: %v", o.err)
		}
	})
}
