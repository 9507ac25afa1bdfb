package channel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
)

func mustConc(t *testing.T, n int) *limiter.Concurrency {
	t.Helper()
	c, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestFIFO(t *testing.T) {
	for _, tc := range []struct {
		name string
		lim  limiter.Limiter
	}{
		{"nil", nil},
		{"concurrency", mustConc(t, 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New[int](tc.lim)
			ctx := t.Context()
			for i := range 100 {
				if err := c.Send(ctx, i); err != nil {
					t.Fatal(err)
				}
				if i%3 == 0 {
					if err := c.TrySend(1000 + i); err != nil {
						t.Fatal(err)
					}
				}
			}
			var want []int
			for i := range 100 {
				want = append(want, i)
				if i%3 == 0 {
					want = append(want, 1000+i)
				}
			}
			if c.Len() != len(want) {
				t.Fatalf("Len = %d, want %d", c.Len(), len(want))
			}
			var got []int
			for i := range want {
				var v int
				var err error
				if i%2 == 0 {
					v, err = c.Recv(ctx)
				} else {
					var ok bool
					if v, ok = c.TryRecv(); !ok {
						err = errors.New("TryRecv found nothing")
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, v)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("received %v, want %v", got, want)
			}
			if _, ok := c.TryRecv(); ok || c.Len() != 0 {
				t.Fatalf("TryRecv on empty: ok=%v Len=%d", ok, c.Len())
			}
			if conc, ok := tc.lim.(*limiter.Concurrency); ok && conc.InUse() != 0 {
				t.Fatalf("InUse = %d after receiving everything", conc.InUse())
			}
		})
	}
}

// TestBoundAndRelease: with a Concurrency limiter of 3 the Chan holds at
// most 3 items, each receive frees one permit, and a refusal says why.
func TestBoundAndRelease(t *testing.T) {
	lim := mustConc(t, 3)
	c := New[string](lim)
	for _, s := range []string{"a", "b", "c"} {
		if err := c.TrySend(s); err != nil {
			t.Fatal(err)
		}
	}
	err := c.TrySend("d")
	var le *LimitError
	if !errors.As(err, &le) || !errors.Is(err, limiter.ErrLimited) {
		t.Fatalf("TrySend over the bound: %v, want a *LimitError wrapping ErrLimited", err)
	}
	if le.RetryAfter() != 0 {
		t.Errorf("a concurrency refusal has RetryAfter %v, want 0 (unknown)", le.RetryAfter())
	}
	if lim.InUse() != 3 || c.Len() != 3 {
		t.Fatalf("InUse %d, Len %d; want 3, 3", lim.InUse(), c.Len())
	}
	if v, _ := c.Recv(t.Context()); v != "a" {
		t.Fatalf("Recv = %q, want a", v)
	}
	if lim.InUse() != 2 {
		t.Fatalf("InUse %d after a receive, want 2", lim.InUse())
	}
	if err := c.TrySend("d"); err != nil {
		t.Fatalf("TrySend after a receive: %v", err)
	}
}

// TestSendWaitsForReceive: a Send over the bound waits, in the limiter's
// queue, until a receive releases a permit; then it goes through at that
// very instant.
func TestSendWaitsForReceive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustConc(t, 2)
		c := New[int](lim)
		ctx := t.Context()
		c.Send(ctx, 1)
		c.Send(ctx, 2)
		start := time.Now()
		var sentAt time.Duration
		done := make(chan error)
		go func() {
			err := c.Send(ctx, 3)
			sentAt = time.Since(start)
			done <- err
		}()
		synctest.Wait()
		if c.Len() != 2 || lim.Stats().Waiters != 1 {
			t.Fatalf("Len %d, waiters %d; want 2 buffered and the third Send waiting", c.Len(), lim.Stats().Waiters)
		}
		time.Sleep(time.Second)
		if v, _ := c.Recv(ctx); v != 1 {
			t.Fatalf("Recv = %d", v)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if sentAt != time.Second {
			t.Fatalf("third Send went through at %v, want 1s (when the receive freed a permit)", sentAt)
		}
		for _, want := range []int{2, 3} {
			if v, _ := c.Recv(ctx); v != want {
				t.Fatalf("Recv = %d, want %d", v, want)
			}
		}
		if lim.InUse() != 0 {
			t.Fatalf("InUse %d", lim.InUse())
		}
	})
}

func TestSendContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustConc(t, 1)
		c := New[int](lim)
		c.Send(t.Context(), 1)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		err := c.Send(ctx, 2)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 3*time.Second {
			t.Fatalf("Send: %v after %v; want DeadlineExceeded after 3s", err, time.Since(start))
		}
		ctx2, cancel2 := context.WithCancel(t.Context())
		go func() { time.Sleep(time.Second); cancel2() }()
		if err := c.Send(ctx2, 3); !errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed) {
			t.Fatalf("Send: %v; want Canceled", err)
		}
		if c.Len() != 1 || lim.InUse() != 1 || lim.Stats().Waiters != 0 {
			t.Fatalf("Len %d, InUse %d, waiters %d; want 1, 1, 0: failed sends hold nothing", c.Len(), lim.InUse(), lim.Stats().Waiters)
		}
		// A Send with a context already done fails even though it could be granted.
		c.Recv(t.Context())
		if err := c.Send(ctx2, 4); !errors.Is(err, context.Canceled) {
			t.Fatalf("Send with a done context: %v", err)
		}
		if c.Len() != 0 || lim.InUse() != 0 {
			t.Fatalf("Len %d, InUse %d", c.Len(), lim.InUse())
		}
	})
}

// TestCloseWakesSenders: Close ends sends waiting in the limiter at once
// with ErrClosed, whatever their context; receivers drain, then get
// ErrClosed.
func TestCloseWakesSenders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustConc(t, 2)
		c := New[int](lim)
		c.Send(t.Context(), 1)
		c.Send(t.Context(), 2)
		ctxCancel, cancel := context.WithCancel(context.Background())
		defer cancel()
		ctxDeadline, cancel2 := context.WithTimeout(context.Background(), time.Hour)
		defer cancel2()
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i, ctx := range []context.Context{context.Background(), ctxCancel, ctxDeadline} {
			wg.Go(func() { errs[i] = c.Send(ctx, 10+i) })
		}
		synctest.Wait()
		if w := lim.Stats().Waiters; w != 3 {
			t.Fatalf("%d waiters, want 3", w)
		}
		time.Sleep(time.Minute)
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if time.Since(start) != 0 {
			t.Fatalf("waiting sends ended %v after Close, want at once", time.Since(start))
		}
		for i, err := range errs {
			if !errors.Is(err, ErrClosed) || !errors.Is(err, limiter.ErrClosed) {
				t.Errorf("send %d: %v, want ErrClosed", i, err)
			}
		}
		if lim.Stats().Waiters != 0 || lim.InUse() != 2 {
			t.Fatalf("waiters %d, InUse %d after Close; want 0 and the 2 buffered", lim.Stats().Waiters, lim.InUse())
		}
		if err := c.Send(t.Context(), 5); !errors.Is(err, ErrClosed) {
			t.Fatalf("Send after Close: %v", err)
		}
		if err := c.TrySend(5); !errors.Is(err, ErrClosed) {
			t.Fatalf("TrySend after Close: %v", err)
		}
		for _, want := range []int{1, 2} {
			if v, err := c.Recv(t.Context()); v != want || err != nil {
				t.Fatalf("Recv after Close = %d, %v; want %d", v, err, want)
			}
		}
		if _, err := c.Recv(t.Context()); !errors.Is(err, ErrClosed) {
			t.Fatalf("Recv on closed and drained: %v", err)
		}
		if lim.InUse() != 0 {
			t.Fatalf("InUse %d", lim.InUse())
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

func TestRecvWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[int](mustConc(t, 10))
		start := time.Now()
		go func() {
			time.Sleep(time.Second)
			c.Send(context.Background(), 7)
			time.Sleep(time.Second)
			c.Close()
		}()
		v, err := c.Recv(t.Context())
		if v != 7 || err != nil || time.Since(start) != time.Second {
			t.Fatalf("Recv = %d, %v at %v; want 7 at 1s", v, err, time.Since(start))
		}
		_, err = c.Recv(t.Context())
		if !errors.Is(err, ErrClosed) || time.Since(start) != 2*time.Second {
			t.Fatalf("Recv = %v at %v; want ErrClosed at 2s", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		c2 := New[int](nil)
		if _, err := c2.Recv(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Recv with a deadline: %v", err)
		}
	})
}

// TestManyReceivers: every waiting receiver gets woken; none misses an item.
func TestManyReceivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[int](mustConc(t, 100))
		const n = 8
		got := make(chan int, 3*n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				for v := range c.All(t.Context()) {
					got <- v
				}
			})
		}
		synctest.Wait()
		for round := range 3 {
			for i := range n {
				c.Send(t.Context(), round*n+i)
			}
			synctest.Wait()
			if c.Len() != 0 {
				t.Fatalf("round %d: %d items left with %d receivers waiting", round, c.Len(), n)
			}
		}
		c.Close()
		wg.Wait()
		close(got)
		var all []int
		for v := range got {
			all = append(all, v)
		}
		slices.Sort(all)
		for i, v := range all {
			if v != i {
				t.Fatalf("received %v", all)
			}
		}
		if len(all) != 3*n {
			t.Fatalf("received %d items, want %d", len(all), 3*n)
		}
	})
}

// TestTrySendRetryAfter: a rate limiter's refusal carries its exact hint,
// and retrying after it succeeds.
func TestTrySendRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(4, time.Second), Burst: 2})
		if err != nil {
			t.Fatal(err)
		}
		c := New[int](lim)
		c.TrySend(1)
		c.TrySend(2)
		err = c.TrySend(3)
		var le *LimitError
		if !errors.As(err, &le) || !errors.Is(err, limiter.ErrLimited) {
			t.Fatalf("TrySend: %v", err)
		}
		if le.RetryAfter() != 250*time.Millisecond {
			t.Fatalf("RetryAfter %v, want 250ms", le.RetryAfter())
		}
		if want := "channel: send refused: limiter: not enough permits available (retry after 250ms)"; err.Error() != want {
			t.Errorf("Error() = %q, want %q", err.Error(), want)
		}
		time.Sleep(le.RetryAfter())
		if err := c.TrySend(3); err != nil {
			t.Fatalf("TrySend after RetryAfter: %v", err)
		}
		if c.Len() != 3 {
			t.Fatalf("Len %d", c.Len())
		}
		lim.Close()
		if err := c.TrySend(4); !errors.Is(err, limiter.ErrClosed) || errors.Is(err, ErrClosed) {
			t.Fatalf("TrySend with the limiter closed: %v; want limiter.ErrClosed, not the Chan's", err)
		}
		if err := c.Send(t.Context(), 4); !errors.Is(err, limiter.ErrClosed) || errors.Is(err, ErrClosed) {
			t.Fatalf("Send with the limiter closed: %v; want limiter.ErrClosed, not the Chan's", err)
		}
	})
}

func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1, Queue: limiter.QueueOptions{Limit: 1}})
		if err != nil {
			t.Fatal(err)
		}
		c := New[int](lim)
		c.Send(t.Context(), 1)
		ctx, cancel := context.WithCancel(t.Context())
		go c.Send(ctx, 2) // waits, filling the queue
		synctest.Wait()
		if err := c.Send(t.Context(), 3); !errors.Is(err, limiter.ErrQueueFull) {
			t.Fatalf("Send with the queue full: %v", err)
		}
		if err := c.TrySend(3); !errors.Is(err, limiter.ErrLimited) {
			t.Fatalf("TrySend while a send waits: %v; want ErrLimited (no barging)", err)
		}
		cancel()
		synctest.Wait()
	})
}

func TestWeighted(t *testing.T) {
	lim := mustConc(t, 10)
	c := New[[]byte](lim)
	ctx := t.Context()
	if err := c.SendN(ctx, make([]byte, 4), 4); err != nil {
		t.Fatal(err)
	}
	if err := c.TrySendN(make([]byte, 5), 5); err != nil {
		t.Fatal(err)
	}
	if lim.InUse() != 9 || c.Len() != 2 {
		t.Fatalf("InUse %d, Len %d", lim.InUse(), c.Len())
	}
	if err := c.TrySendN(nil, 2); !errors.Is(err, limiter.ErrLimited) {
		t.Fatalf("TrySendN over the bound: %v", err)
	}
	if err := c.SendN(ctx, nil, 11); !errors.Is(err, limiter.ErrExceedsLimit) {
		t.Fatalf("SendN of more than the limit: %v", err)
	}
	if err := c.TrySendN(nil, -1); !errors.Is(err, limiter.ErrInvalidCount) {
		t.Fatalf("TrySendN(-1): %v", err)
	}
	if err := c.SendN(ctx, nil, -1); !errors.Is(err, limiter.ErrInvalidCount) {
		t.Fatalf("SendN(-1): %v", err)
	}
	// A zero-weight item holds nothing but is buffered like any other.
	if err := c.SendN(ctx, []byte("z"), 0); err != nil {
		t.Fatal(err)
	}
	if lim.InUse() != 9 || c.Len() != 3 {
		t.Fatalf("InUse %d, Len %d after a zero-weight send", lim.InUse(), c.Len())
	}
	if v, _ := c.Recv(ctx); len(v) != 4 || lim.InUse() != 5 {
		t.Fatalf("Recv: %d bytes, InUse %d; want 4 bytes and 5 in use", len(v), lim.InUse())
	}
	if n := c.Drain(); n != 2 || lim.InUse() != 0 || c.Len() != 0 {
		t.Fatalf("Drain = %d, InUse %d, Len %d", n, lim.InUse(), c.Len())
	}
}

func TestNilLimiter(t *testing.T) {
	c := New[int](nil)
	for i := range 1000 {
		if err := c.TrySend(i); err != nil {
			t.Fatal(err)
		}
	}
	if c.Len() != 1000 {
		t.Fatalf("Len %d", c.Len())
	}
	if err := c.SendN(t.Context(), 0, -2); !errors.Is(err, limiter.ErrInvalidCount) {
		t.Fatalf("SendN(-2): %v", err)
	}
	if err := c.TrySendN(0, -2); !errors.Is(err, limiter.ErrInvalidCount) {
		t.Fatalf("TrySendN(-2): %v", err)
	}
	if n := c.Drain(); n != 1000 {
		t.Fatalf("Drain = %d", n)
	}
}

// TestDrainReleasesEveryLease: items nobody receives give their permits
// back through Drain, once each.
func TestDrainReleasesEveryLease(t *testing.T) {
	lim := &countingLimiter{}
	c := New[int](lim)
	for i := range 50 {
		c.Send(t.Context(), i)
	}
	c.Recv(t.Context())
	c.Close()
	if n := c.Drain(); n != 49 {
		t.Fatalf("Drain = %d, want 49", n)
	}
	if n := c.Drain(); n != 0 {
		t.Fatalf("second Drain = %d", n)
	}
	if err := lim.check(50); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recv(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Recv after Close and Drain: %v", err)
	}
}

// countingLimiter grants everything and records each lease's releases.
type countingLimiter struct {
	mu       sync.Mutex
	released map[int]int // lease id -> releases
	next     int
}

type countingRelease struct {
	l  *countingLimiter
	id int
}

func (r countingRelease) ReleasePermits(int) {
	r.l.mu.Lock()
	r.l.released[r.id]++
	r.l.mu.Unlock()
}

func (l *countingLimiter) TryAcquire(n int) limiter.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released == nil {
		l.released = map[int]int{}
	}
	l.next++
	l.released[l.next] = 0
	return limiter.NewLease(n, countingRelease{l, l.next})
}

func (l *countingLimiter) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	if err := ctx.Err(); err != nil {
		return limiter.Denied(err, 0), err
	}
	return l.TryAcquire(n), nil
}

// check reports an error unless exactly want leases were granted and each
// was released exactly once.
func (l *countingLimiter) check(want int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.released) != want {
		return fmt.Errorf("%d leases granted, want %d", len(l.released), want)
	}
	for id, n := range l.released {
		if n != 1 {
			return fmt.Errorf("lease %d released %d times, want once", id, n)
		}
	}
	return nil
}

func TestAllEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[int](nil)
		for i := range 5 {
			c.Send(t.Context(), i)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var got []int
		for v := range c.All(ctx) {
			got = append(got, v)
			if v == 2 {
				cancel()
			}
		}
		if !slices.Equal(got, []int{0, 1, 2}) || c.Len() != 2 {
			t.Fatalf("got %v, Len %d; want [0 1 2] and 2 left", got, c.Len())
		}
		// break leaves the rest buffered
		for v := range c.All(t.Context()) {
			if v != 3 {
				t.Fatalf("got %d", v)
			}
			break
		}
		if c.Len() != 1 {
			t.Fatalf("Len %d after break", c.Len())
		}
		c.Close()
		got = slices.Collect(c.All(t.Context()))
		if !slices.Equal(got, []int{4}) {
			t.Fatalf("after Close: %v", got)
		}
	})
}

// TestAllocs: a steady flow allocates nothing per item, with
// context.Background or a cancellable context: sends whose lease is granted
// at once (TryAcquire first), receives, TrySend, and sends on a nil limiter.
func TestAllocs(t *testing.T) {
	for _, lim := range []limiter.Limiter{nil, mustConc(t, 1<<20)} {
		c := New[int](lim)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for _, ctx := range []context.Context{context.Background(), ctx} {
			for range 100 { // warm up the ring
				c.Send(ctx, 1)
			}
			allocs := testing.AllocsPerRun(1000, func() {
				c.TrySend(2)
				c.Recv(ctx)
				c.TrySend(3)
				c.TryRecv()
			})
			if allocs != 0 {
				t.Errorf("%d allocations per TrySend+Recv+TrySend+TryRecv, want 0", int(allocs))
			}
			allocs = testing.AllocsPerRun(1000, func() {
				c.Send(ctx, 1)
				c.Recv(ctx)
			})
			if allocs != 0 {
				t.Errorf("limiter %T: %v allocations per Send+Recv, want 0", lim, allocs)
			}
		}
		c.Drain()
	}
}

// TestConcurrentStress: many producers and consumers with a small shared
// bound; every item arrives once, each producer's items in order, and every
// permit comes back.
func TestConcurrentStress(t *testing.T) {
	lim := mustConc(t, 4)
	a, b := New[[2]int](lim), New[[2]int](lim) // one budget for two Chans
	const producers, per = 4, 2000
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range per {
				ch := a
				if i%2 == 1 {
					ch = b
				}
				if err := ch.Send(context.Background(), [2]int{p, i}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var mu sync.Mutex
	seen := map[[2]int]bool{}
	var cw sync.WaitGroup
	for _, ch := range []*Chan[[2]int]{a, b} {
		cw.Go(func() {
			// One consumer per Chan: each producer's items arrive in the
			// order it sent them.
			last := map[int]int{}
			for v := range ch.All(context.Background()) {
				if l, ok := last[v[0]]; ok && l >= v[1] {
					t.Errorf("producer %d: item %d after %d", v[0], v[1], l)
				}
				last[v[0]] = v[1]
				if n := ch.Len(); n > 4 {
					t.Errorf("Len %d over the shared bound", n)
				}
				mu.Lock()
				if seen[v] {
					t.Errorf("%v received twice", v)
				}
				seen[v] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	a.Close()
	b.Close()
	cw.Wait()
	if len(seen) != producers*per {
		t.Fatalf("received %d items, want %d", len(seen), producers*per)
	}
	if lim.InUse() != 0 {
		t.Fatalf("InUse %d at the end", lim.InUse())
	}
}

// closingLimiter closes the Chan while granting: the Close lands between a
// send's grant and its push, which must then give the lease back.
type closingLimiter struct {
	countingLimiter
	close func()
}

func (l *closingLimiter) TryAcquire(n int) limiter.Lease {
	lease := l.countingLimiter.TryAcquire(n)
	l.close()
	return lease
}

func (l *closingLimiter) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	lease, err := l.countingLimiter.Acquire(ctx, n)
	l.close()
	return lease, err
}

func TestSendGrantedThenClosed(t *testing.T) {
	for _, try := range []bool{false, true} {
		lim := &closingLimiter{}
		c := New[int](lim)
		lim.close = func() { c.Close() }
		var err error
		if try {
			err = c.TrySend(1)
		} else {
			err = c.Send(t.Context(), 1)
		}
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("send granted as the Chan closed: %v, want ErrClosed", err)
		}
		if c.Len() != 0 {
			t.Fatalf("Len %d", c.Len())
		}
		if err := lim.check(1); err != nil {
			t.Fatalf("the granted lease: %v", err)
		}
	}
}
