package limiter

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is a Limiter from outside the package: it always grants and
// records the order in which its leases are released.
type recorder struct {
	name string
	log  *[]string
}

func (r recorder) TryAcquire(n int) Lease { return NewLease(n, r) }
func (r recorder) Acquire(_ context.Context, n int) (Lease, error) {
	return NewLease(n, r), nil
}
func (r recorder) ReleasePermits(int) { *r.log = append(*r.log, r.name) }

func TestChainAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 2})
		fw, _ := NewFixedWindow(FixedWindowOptions{Limit: 1, Window: time.Hour})
		c := Chain(tb, fw)
		if l := c.TryAcquire(1); !l.Granted() {
			t.Fatalf("first chain TryAcquire refused: %v", l.Err())
		}
		l := c.TryAcquire(1)
		if l.Granted() || !errors.Is(l.Err(), ErrLimited) {
			t.Fatalf("second chain TryAcquire = %v, %v; want refused with ErrLimited", l.Granted(), l.Err())
		}
		if l.RetryAfter() != time.Hour {
			t.Errorf("RetryAfter = %v, want the fixed window's 1h", l.RetryAfter())
		}
		// The token the refused chain took from the bucket was given back.
		if st := tb.Stats(); st.Available != 1 || st.Granted != 1 {
			t.Errorf("bucket after refused chain: Available=%d Granted=%d, want 1 and 1", st.Available, st.Granted)
		}
		if g := tb.TryAcquire(1); !g.Granted() {
			t.Error("bucket lost the refunded token")
		}
	})
}

func TestChainReleasesInReverse(t *testing.T) {
	var log []string
	c := Chain(recorder{"a", &log}, recorder{"b", &log}, recorder{"c", &log})
	l := c.TryAcquire(2)
	if !l.Granted() || l.Permits() != 2 {
		t.Fatalf("lease = %v %d", l.Granted(), l.Permits())
	}
	l.Release()
	if got := len(log); got != 3 || log[0] != "c" || log[1] != "b" || log[2] != "a" {
		t.Fatalf("release order = %v, want [c b a]", log)
	}
}

func TestChainConcurrencyReleasedOnce(t *testing.T) {
	c1, _ := NewConcurrency(ConcurrencyOptions{Limit: 2})
	c2, _ := NewConcurrency(ConcurrencyOptions{Limit: 1})
	ch := Chain(c1, c2)
	a := ch.TryAcquire(1)
	if !a.Granted() {
		t.Fatal("refused")
	}
	if b := ch.TryAcquire(1); b.Granted() {
		t.Fatal("granted beyond c2's limit")
	}
	if c1.InUse() != 1 || c2.InUse() != 1 {
		t.Fatalf("in use %d, %d; want 1, 1 (refused chain must give c1's permit back)", c1.InUse(), c2.InUse())
	}
	a.Release()
	if c1.InUse() != 0 || c2.InUse() != 0 {
		t.Fatalf("after release in use %d, %d; want 0, 0", c1.InUse(), c2.InUse())
	}
}

func TestChainAcquireWaitsForAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, _ := NewSlidingLog(SlidingLogOptions{Limit: 1, Window: time.Second})
		conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 1})
		c := Chain(log, conc)
		start := time.Now()
		first, err := c.Acquire(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(1500 * time.Millisecond)
			first.Release()
		}()
		// The log would allow at 1s, the concurrency limiter at 1.5s.
		if _, err := c.Acquire(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 1500*time.Millisecond {
			t.Fatalf("second grant at %v, want 1.5s", got)
		}
		// The next needs the log (2.5s) and a release (never): cancel at 3s.
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		if _, err := c.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		if got := conc.InUse(); got != 1 {
			t.Fatalf("in use after failed chain = %d, want 1", got)
		}
	})
}

func TestChainExceedsLimit(t *testing.T) {
	tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 5})
	conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 2})
	_, err := Chain(tb, conc).Acquire(context.Background(), 3)
	if !errors.Is(err, ErrExceedsLimit) {
		t.Fatalf("err = %v, want ErrExceedsLimit", err)
	}
	if st := tb.Stats(); st.Available != 5 {
		t.Fatalf("bucket Available = %d after a chain that exceeded a later member, want 5", st.Available)
	}
}

func TestNewestFirstFailsEarlyOnDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := NewSlidingLog(SlidingLogOptions{Limit: 1, Window: time.Second, Queue: QueueOptions{Order: NewestFirst}})
		l.TryAcquire(1)
		older := make(chan error)
		go func() { _, err := l.Acquire(context.Background(), 1); older <- err }()
		synctest.Wait()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		lease, err := l.Acquire(ctx, 1)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(lease.Err(), context.DeadlineExceeded) {
			t.Fatalf("err = %v, lease.Err = %v; want DeadlineExceeded", err, lease.Err())
		}
		if time.Since(start) != 0 || lease.RetryAfter() != time.Second {
			t.Fatalf("failed after %v with RetryAfter %v; want at once, 1s", time.Since(start), lease.RetryAfter())
		}
		// The older waiter was not disturbed: granted when the window allows.
		if err := <-older; err != nil || time.Since(start) != time.Second {
			t.Fatalf("older waiter: %v at %v; want granted at 1s", err, time.Since(start))
		}
	})
}

func TestZeroPermitWaitersCountAgainstQueueLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := NewConcurrency(ConcurrencyOptions{Limit: 1, Queue: QueueOptions{Limit: 2}})
		held := l.TryAcquire(1)
		errs := make(chan error, 3)
		for range 3 {
			go func() {
				lease, err := l.Acquire(context.Background(), 0)
				lease.Release()
				errs <- err
			}()
		}
		synctest.Wait()
		if err := <-errs; !errors.Is(err, ErrQueueFull) {
			t.Fatalf("third zero-permit waiter: %v, want ErrQueueFull", err)
		}
		held.Release()
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A refused chain gives back what each kind of member took: the member's
// state and counters are as before the attempt, and it grants as before.
func TestChainRefundsEveryAlgorithm(t *testing.T) {
	makers := map[string]func() Limiter{
		"tokenbucket": func() Limiter {
			l, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 2})
			return l
		},
		"leakybucket": func() Limiter {
			l, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(1, time.Second)})
			return l
		},
		"fixedwindow": func() Limiter {
			l, _ := NewFixedWindow(FixedWindowOptions{Limit: 2, Window: time.Second})
			return l
		},
		"slidingwindow": func() Limiter {
			l, _ := NewSlidingWindow(SlidingWindowOptions{Limit: 2, Window: time.Second, Segments: 4})
			return l
		},
		"slidinglog": func() Limiter {
			l, _ := NewSlidingLog(SlidingLogOptions{Limit: 2, Window: time.Second})
			return l
		},
		"concurrency": func() Limiter {
			l, _ := NewConcurrency(ConcurrencyOptions{Limit: 2})
			return l
		},
	}
	for name, mk := range makers {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				member := mk()
				nested := Chain(member) // a chain of ours refunds through its members
				for _, first := range []Limiter{member, nested} {
					shut, _ := NewFixedWindow(FixedWindowOptions{Limit: 1, Window: time.Hour})
					shut.TryAcquire(1)
					before := member.(interface{ Stats() Stats }).Stats()
					if l := Chain(first, shut).TryAcquire(1); l.Granted() {
						t.Fatal("chain granted past an exhausted member")
					}
					after := member.(interface{ Stats() Stats }).Stats()
					if after.Available != before.Available || after.Granted != before.Granted {
						t.Fatalf("after a refused chain: %+v, before: %+v", after, before)
					}
				}
				if l := member.TryAcquire(1); !l.Granted() {
					t.Fatalf("member refuses after refunds: %v", l.Err())
				}
			})
		})
	}
}

// A chain that waited in a later member's queue and was granted there, then
// refused by an earlier member on its retry, gives that lease back: it
// holds nothing while it waits again, and nothing once it gives up.
func TestChainGivesBackWaitedLeaseOnRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rate, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 1})
		conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 1})
		ch := Chain(rate, conc)
		hold := conc.TryAcquire(1)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		done := make(chan error)
		go func() {
			l, err := ch.Acquire(ctx, 1)
			if err == nil {
				l.Release()
			}
			done <- err
		}()
		synctest.Wait() // the chain waits in conc's queue
		if l := rate.TryAcquire(1); !l.Granted() {
			t.Fatal("the bucket's token was not free")
		}
		hold.Release() // conc grants the chain; its retry finds the bucket empty
		synctest.Wait()
		if got := conc.InUse(); got != 0 {
			t.Fatalf("while the chain waits for the bucket, conc has %d in use, want 0", got)
		}
		if err := <-done; err != nil {
			t.Fatalf("chain Acquire: %v", err)
		}
		if got := conc.InUse(); got != 0 {
			t.Fatalf("after the chain's lease was released, conc has %d in use, want 0", got)
		}
	})
}

// A chain whose retry lands exactly on a window's edge, and is refused by a
// later member, gives the window its permit back: the take happened in the
// new window. (The refund used to reach back 1 ns into the previous window
// and was dropped, so the failed try consumed the permit.)
func TestChainRefundAtWindowEdge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fw, _ := NewFixedWindow(FixedWindowOptions{Limit: 1, Window: time.Millisecond})
		pacer, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(1, 2*time.Millisecond)})
		ch := Chain(fw, pacer)
		if !ch.TryAcquire(1).Granted() {
			t.Fatal("the first chain grant was refused")
		}
		done := make(chan error)
		go func() { _, err := ch.Acquire(t.Context(), 1); done <- err }() // retries at 1 ms, granted at 2 ms
		time.Sleep(1500 * time.Microsecond)
		if l := fw.TryAcquire(1); !l.Granted() {
			t.Errorf("at 1.5 ms the window refuses (%v): the chain's failed try at 1 ms consumed its permit", l.Err())
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// Two NewestFirst members with older waiters queued each serve the chain's
// wait at once and then refuse its retry without a RetryAfter. The chain
// must block (back off) rather than bounce between them at one instant;
// in a bubble a busy loop never lets the clock advance.
func TestChainNewestFirstMembersDoNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := QueueOptions{Order: NewestFirst}
		conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 2, Queue: q})
		log, _ := NewSlidingLog(SlidingLogOptions{Limit: 2, Window: time.Second, Queue: q})
		held := conc.TryAcquire(1)
		log.TryAcquire(1)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { l, err := conc.Acquire(ctx, 2); l.Release(); _ = err }() // needs both permits
		go func() { log.Acquire(ctx, 2) }()                                  // needs the window to pass
		synctest.Wait()
		start := time.Now()
		cctx, ccancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer ccancel()
		_, err := Chain(conc, log).Acquire(cctx, 1)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("chain Acquire: %v, want DeadlineExceeded", err)
		}
		if got := time.Since(start); got <= 0 || got > 300*time.Millisecond {
			t.Fatalf("chain Acquire returned after %v, want within its 300ms deadline", got)
		}
		if conc.InUse() != 1 {
			t.Fatalf("conc has %d in use after the chain gave up, want 1 (the test's own)", conc.InUse())
		}
		held.Release()
		cancel()
	})
}

// A chain's waits in its members' queues are grants to nobody: each member
// counts exactly the grants it made to the chain (and to direct callers),
// however often the chain waited in it, gave a lease back, or gave up.
func TestChainCountsOnlyItsGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rate, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 1})
		conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 1})
		kb, _ := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(1, time.Second), Burst: 1})
		ch := Chain(rate, conc, kb.For("k"))
		hold := conc.TryAcquire(1)
		rate.TryAcquire(1) // empty: the chain waits for it, then for conc
		go func() {
			time.Sleep(1500 * time.Millisecond)
			hold.Release()
		}()
		l, err := ch.Acquire(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		l.Release()
		// A chain that gives up after waiting in conc's queue counts nothing.
		hold = conc.TryAcquire(1)
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		if _, err := ch.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("chain Acquire: %v, want DeadlineExceeded", err)
		}
		hold.Release()
		if st := rate.Stats(); st.Granted != 2 || st.Rejected != 0 {
			t.Errorf("bucket Stats %+v, want Granted 2 (its own and the chain's), Rejected 0", st)
		}
		if st := conc.Stats(); st.Granted != 3 || st.Rejected != 0 {
			t.Errorf("conc Stats %+v, want Granted 3 (two direct, one chain), Rejected 0", st)
		}
		if st := kb.Stats(); st.Granted != 1 || st.Rejected != 0 {
			t.Errorf("keyed bucket Stats %+v, want Granted 1 (the chain's), Rejected 0", st)
		}
	})
}
