package limiter_test

import (
	"testing"
	"testing/synctest"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// free returns how many of one-permit requests lim grants now (at most
// most), taking them.
func free(lim Limiter, most int) int {
	n := 0
	for n < most && lim.TryAcquire(1).Granted() {
		n++
	}
	return n
}

// A lease settled at once gives back every permit it did not use, in every
// limiter; overuse is a debt: the limiter grants the overused permits' worth
// less, so that the bound holds over the actual costs.
func TestSettleAtOnce(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		if a.pacer {
			t.Skip("the pacer: TestSettlePacer")
		}
		lim := mustMake(t, a, 10, QueueOptions{})
		l := lim.TryAcquire(10)
		if !l.Granted() {
			t.Fatal("first lease refused")
		}
		s := l.Settle(4)
		if s.Permits() != 4 {
			t.Fatalf("settled lease holds %d permits, want 4", s.Permits())
		}
		if got := free(lim, 20); got != 6 {
			t.Fatalf("after settling 10 at 4: %d one-permit grants, want the 6 unused", got)
		}
		s.Release() // a concurrency lease gives back what it now holds: 4
		if a.concurrency {
			if got := free(lim, 20); got != 4 {
				t.Fatalf("after releasing the settled lease: %d free, want 4", got)
			}
			return
		}
		// Overuse: 2 granted, 7 used. The window or bucket is empty; the
		// debt of 5 is paid by the next refill (time) before any grant.
		time.Sleep(time.Second) // everything back
		l = lim.TryAcquire(2)
		l.Settle(7)
		if got := free(lim, 20); got != 3 {
			t.Fatalf("after settling 2 at 7: %d grants, want 3 (10 less the 7 used)", got)
		}
	})
}

// Settled late, a token bucket's lease gives back only the cost not yet
// refilled since its grant: permits that refilled may already have been
// granted again, counted on the lease's cost.
func TestSettleLateTokenBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(10, time.Second), Burst: 10})
		l := tb.TryAcquire(10)
		time.Sleep(300 * time.Millisecond) // 3 refilled
		if got := free(tb, 10); got != 3 {
			t.Fatalf("%d refilled, want 3", got)
		}
		l.Settle(0) // 10 unused, 7 of their cost not refilled yet: 7 back
		if got := free(tb, 20); got != 7 {
			t.Fatalf("after a late settle: %d grants, want 7", got)
		}
		// Settled after its cost has refilled, a lease gives nothing back.
		time.Sleep(time.Second)
		l = tb.TryAcquire(10)
		time.Sleep(time.Second)
		free(tb, 10)
		l.Settle(0)
		if tb.TryAcquire(1).Granted() {
			t.Fatal("a lease settled after its cost refilled gave permits back")
		}
	})
}

// The pacer: settled at once, a lease's next slot comes as if it had asked
// for its actual permits; overuse pushes the next slot back.
func TestSettlePacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lb, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(10, time.Second)})
		l := lb.TryAcquire(5) // next slot in 500 ms
		l.Settle(1)           // as if 1: next slot in 100 ms
		if r := lb.TryAcquire(1).RetryAfter(); r != 100*time.Millisecond {
			t.Fatalf("RetryAfter %v after settling 5 at 1, want 100ms", r)
		}
		time.Sleep(100 * time.Millisecond)
		l = lb.TryAcquire(1)
		l.Settle(4) // as if 4: next slot in 400 ms
		if r := lb.TryAcquire(1).RetryAfter(); r != 400*time.Millisecond {
			t.Fatalf("RetryAfter %v after settling 1 at 4, want 400ms", r)
		}
	})
}

// A fixed window gives back only while the lease's window is current.
func TestSettleFixedWindowAcrossWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fw, _ := NewFixedWindow(FixedWindowOptions{Limit: 10, Window: time.Second})
		l := fw.TryAcquire(10)
		time.Sleep(time.Second)
		l.Settle(0)
		if got := free(fw, 20); got != 10 {
			t.Fatalf("the next window grants %d, want its own 10 and nothing more", got)
		}
	})
}

// Queued waiters are served by permits a settlement gives back.
func TestSettleServesQueue(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		if a.pacer {
			t.Skip("a pacer's slot is not permits")
		}
		lim := mustMake(t, a, 10, QueueOptions{})
		l := lim.TryAcquire(10)
		done := make(chan time.Duration)
		start := time.Now()
		go func() {
			if _, err := lim.Acquire(t.Context(), 5); err != nil {
				t.Error(err)
			}
			done <- time.Since(start)
		}()
		synctest.Wait()
		l.Settle(5)
		if got := <-done; got != 0 {
			t.Fatalf("the waiter was served after %v, want at once, by the settlement", got)
		}
	})
}

// Leases of Keyed.For and KeyedTokenBucket.For settle with the key's
// limiter; a Keyed key evicted before its lease is settled passes the debt
// on to the key's next limiter.
func TestSettleKeyed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kb, _ := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(10, time.Second), Burst: 10})
		k, _ := NewKeyed(KeyedOptions[string]{New: func(string) (Limiter, error) {
			return NewTokenBucket(TokenBucketOptions{Rate: Per(10, time.Second), Burst: 10})
		}})
		for name, lim := range map[string]Limiter{"KeyedTokenBucket": kb.For("a"), "Keyed": k.For("a")} {
			lim.TryAcquire(10).Settle(4)
			if got := free(lim, 20); got != 6 {
				t.Fatalf("%s: %d grants after settling 10 at 4, want 6", name, got)
			}
			time.Sleep(time.Second)
			lim.TryAcquire(1).Settle(6) // a debt of 5
			if got := free(lim, 20); got != 4 {
				t.Fatalf("%s: %d grants after using 6, want 4", name, got)
			}
			time.Sleep(time.Second)
		}
		// The key's limiter is evicted while a lease is out: the debt goes
		// to the next one, from the settlement on.
		lim := k.For("a")
		l := lim.TryAcquire(1)
		time.Sleep(time.Second)
		if n := k.Prune(); n != 1 {
			t.Fatalf("Prune evicted %d keys, want 1", n)
		}
		l.Settle(6)
		if got := free(lim, 20); got != 5 {
			t.Fatalf("%d grants from the key's next limiter after a debt of 5, want 5", got)
		}
	})
}

// A Chain's lease settles with every member, at the chain's instant: a
// static chain (of this package's limiters) and one with a keyed member.
func TestSettleChain(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(10, time.Second), Burst: 10})
			fw, _ := NewFixedWindow(FixedWindowOptions{Limit: 10, Window: time.Second})
			conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 10})
			var third Limiter = conc
			if keyed {
				kb, _ := NewKeyedTokenBucket[int](TokenBucketOptions{Rate: Per(10, time.Second), Burst: 10})
				third = kb.For(1)
			}
			c := Chain(tb, fw, third)
			l := c.TryAcquire(10).Settle(3)
			for name, m := range map[string]Limiter{"bucket": tb, "window": fw, "third": third} {
				if got := m.TryAcquire(8); got.Granted() {
					t.Fatalf("keyed %v: %s grants 8 after the chain settled 10 at 3", keyed, name)
				}
				if got := m.TryAcquire(7); !got.Granted() {
					t.Fatalf("keyed %v: %s refuses the 7 the chain gave back: %v", keyed, name, got.Err())
				}
			}
			l.Release()
			if !keyed && conc.InUse() != 7 {
				t.Fatalf("conc has %d in use after the chain's lease of 3 was released, want the 7 taken since", conc.InUse())
			}
		})
	}
}

// Settle allocates nothing for this package's limiters, and TryAcquire's
// lease carries what it needs.
func TestSettleNoAllocs(t *testing.T) {
	tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1e9, time.Second), Burst: 1e9})
	if n := testing.AllocsPerRun(1000, func() { tb.TryAcquire(2).Settle(1) }); n != 0 {
		t.Fatalf("TryAcquire+Settle allocates %v times, want 0", n)
	}
}
