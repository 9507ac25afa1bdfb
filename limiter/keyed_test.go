package limiter

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestKeyedIndependentKeysAndEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		made := 0
		k, err := NewKeyed(KeyedOptions[string]{New: func(string) (Limiter, error) {
			made++
			return NewSlidingLog(SlidingLogOptions{Limit: 1, Window: time.Second})
		}})
		if err != nil {
			t.Fatal(err)
		}
		if !k.TryAcquire("a", 1).Granted() || !k.TryAcquire("b", 1).Granted() {
			t.Fatal("first grant per key refused")
		}
		if l := k.TryAcquire("a", 1); l.Granted() || l.RetryAfter() != time.Second {
			t.Fatalf("second grant on a: granted=%v retry=%v; want refused, 1s", l.Granted(), l.RetryAfter())
		}
		if n := k.Prune(); n != 0 || k.Len() != 2 {
			t.Fatalf("Prune of busy keys evicted %d, Len %d; want 0, 2", n, k.Len())
		}
		time.Sleep(time.Second)
		if n := k.Prune(); n != 2 || k.Len() != 0 {
			t.Fatalf("Prune of idle keys evicted %d, Len %d; want 2, 0", n, k.Len())
		}
		if made != 2 {
			t.Fatalf("factory called %d times, want 2", made)
		}
	})
}

func TestKeyedAcquirePinsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, _ := NewKeyed(KeyedOptions[int]{New: func(int) (Limiter, error) {
			return NewConcurrency(ConcurrencyOptions{Limit: 1})
		}})
		held := k.TryAcquire(7, 1)
		done := make(chan error)
		go func() {
			l, err := k.Acquire(context.Background(), 7, 1)
			l.Release()
			done <- err
		}()
		synctest.Wait()
		if n := k.Prune(); n != 0 {
			t.Fatalf("evicted %d keys with a lease held and a waiter", n)
		}
		held.Release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if n := k.Prune(); n != 1 {
			t.Fatalf("evicted %d keys after all released, want 1", n)
		}
	})
}

func TestKeyedFactoryError(t *testing.T) {
	boom := errors.New("boom")
	k, _ := NewKeyed(KeyedOptions[string]{New: func(string) (Limiter, error) { return nil, boom }})
	if l := k.TryAcquire("x", 1); l.Granted() || !errors.Is(l.Err(), ErrNoLimiter) {
		t.Fatalf("TryAcquire = %v, %v; want ErrNoLimiter", l.Granted(), l.Err())
	}
	if _, err := k.Acquire(context.Background(), "x", 1); !errors.Is(err, boom) || !errors.Is(err, ErrNoLimiter) {
		t.Fatalf("Acquire err = %v; want both ErrNoLimiter and the factory's error", err)
	}
	if _, err := NewKeyed(KeyedOptions[string]{}); err == nil {
		t.Fatal("NewKeyed without a factory succeeded")
	}
}

func TestKeyedTokenBucketBoundAndRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, err := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(1, time.Second), Burst: 3})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if !k.TryAcquire("ip", 1).Granted() {
				t.Fatalf("burst grant %d refused", i)
			}
		}
		if !k.TryAcquire("other", 3).Granted() {
			t.Fatal("other key shares state")
		}
		time.Sleep(300 * time.Millisecond)
		if l := k.TryAcquire("ip", 1); l.Granted() || l.RetryAfter() != 700*time.Millisecond {
			t.Fatalf("granted=%v retry=%v, want refused and 700ms", l.Granted(), l.RetryAfter())
		}
		if l := k.TryAcquire("ip", 4); !errors.Is(l.Err(), ErrExceedsLimit) {
			t.Fatalf("n > burst: %v", l.Err())
		}
		start := time.Now()
		if _, err := k.Acquire(context.Background(), "ip", 2); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 1700*time.Millisecond {
			t.Fatalf("Acquire(2) waited %v, want 1.7s", got)
		}
		if n := k.Prune(); n != 0 {
			t.Fatalf("pruned %d busy keys", n)
		}
		time.Sleep(3 * time.Second)
		if n := k.Prune(); n != 2 || k.Len() != 0 {
			t.Fatalf("pruned %d, Len %d; want 2, 0", n, k.Len())
		}
		_ = k.Close()
		if l := k.TryAcquire("ip", 1); !errors.Is(l.Err(), ErrClosed) {
			t.Fatalf("after Close: %v", l.Err())
		}
	})
}

func TestKeyedTokenBucketNoAllocs(t *testing.T) {
	k, _ := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(1_000_000_000, time.Second), Burst: 1_000_000})
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("10.0.0.%d", i)
		k.TryAcquire(keys[i], 1)
	}
	i := 0
	if a := testing.AllocsPerRun(1000, func() { k.TryAcquire(keys[i%len(keys)], 1); i++ }); a != 0 {
		t.Fatalf("TryAcquire on an existing key allocates %v times", a)
	}
}

// An odd rate of nearly a billion a second forces scaled time to be rebased
// every ~2.3 s; grants must keep the bound across rebases, for the single
// bucket (lock-free path with the locked rebase) and for keyed buckets.
func TestGCRARebaseKeepsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rate := Per(999_999_937, time.Second)
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: rate, Burst: 1000})
		kb, _ := NewKeyedTokenBucket[int](TokenBucketOptions{Rate: rate, Burst: 1000})
		for step := range 20 {
			time.Sleep(700 * time.Millisecond)
			// Drain: exactly Burst, then nothing more at this instant.
			for name, try := range map[string]func(int) Lease{"bucket": tb.TryAcquire, "keyed": func(n int) Lease { return kb.TryAcquire(1, n) }} {
				if !try(1000).Granted() {
					t.Fatalf("step %d %s: full burst refused", step, name)
				}
				l := try(1)
				if l.Granted() {
					t.Fatalf("step %d %s: granted beyond burst", step, name)
				}
				if l.RetryAfter() != 2*time.Nanosecond { // one permit costs 1.000000063 ns
					t.Fatalf("step %d %s: RetryAfter %v, want 2ns", step, name, l.RetryAfter())
				}
			}
		}
	})
}

func TestKeyedForIsALimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kb, _ := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(2, time.Second), Burst: 1})
		k, _ := NewKeyed(KeyedOptions[string]{New: func(string) (Limiter, error) {
			return NewSlidingLog(SlidingLogOptions{Limit: 1, Window: time.Second})
		}})
		for name, lim := range map[string]Limiter{"bucket": kb.For("h"), "keyed": k.For("h")} {
			start := time.Now()
			for range 3 {
				if _, err := lim.Acquire(context.Background(), 1); err != nil {
					t.Fatal(name, err)
				}
			}
			// bucket: grants at 0, 0.5 s, 1 s; log: 0, 1 s, 2 s.
			want := map[string]time.Duration{"bucket": time.Second, "keyed": 2 * time.Second}[name]
			if got := time.Since(start); got != want {
				t.Errorf("%s: third grant after %v, want %v", name, got, want)
			}
			if lim.TryAcquire(1).Granted() {
				t.Errorf("%s: granted right after a grant", name)
			}
			if name == "bucket" {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				if _, err := lim.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Acquire with a near deadline: %v", err)
				}
				cancel()
			}
		}
		if st := kb.Stats(); st.Granted != 3 || st.Rejected != 2 {
			t.Errorf("bucket stats %+v, want 3 granted, 2 refused (a TryAcquire, a failed Acquire)", st)
		}
		if st := k.Stats(); st.Granted != 3 || st.Rejected != 1 {
			t.Errorf("keyed stats %+v, want 3 granted, 1 refused", st)
		}
	})
}

// Full buckets are dropped when a shard would grow, and a dropped key is as
// if new; busy keys are never dropped.
func TestKeyedTokenBucketDropsFullBucketsOnGrowth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, _ := NewKeyedTokenBucket[int](TokenBucketOptions{Rate: Per(1, time.Second), Burst: 2})
		for i := range 5000 {
			k.TryAcquire(i, 2) // empty every bucket
		}
		if k.Len() != 5000 {
			t.Fatalf("Len = %d, want 5000", k.Len())
		}
		for i := range 5000 {
			if k.TryAcquire(i, 1).Granted() {
				t.Fatalf("key %d granted beyond its burst after growth", i)
			}
		}
		time.Sleep(2 * time.Second) // every bucket is full again
		for i := 5000; i < 10000; i++ {
			k.TryAcquire(i, 2)
		}
		if n := k.Len(); n >= 10000 {
			t.Fatalf("Len = %d: full buckets were not dropped as the tables grew", n)
		}
		for i := range 10000 {
			want := i < 5000 // old keys are full (dropped or not); new ones empty
			if got := k.TryAcquire(i, 2).Granted(); got != want {
				t.Fatalf("key %d: granted=%v, want %v", i, got, want)
			}
		}
	})
}

func TestKeyedSweepsIdleKeysAndCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, _ := NewKeyed(KeyedOptions[int]{New: func(int) (Limiter, error) {
			return NewFixedWindow(FixedWindowOptions{Limit: 1, Window: time.Second})
		}})
		for i := range 1000 {
			k.TryAcquire(i, 1)
		}
		time.Sleep(time.Second)
		for i := 1000; i < 2000; i++ {
			k.TryAcquire(i, 1)
		}
		if n := k.Len(); n >= 2000 {
			t.Fatalf("Len = %d: inserting keys swept no idle ones", n)
		}
		waiting := make(chan error)
		go func() { _, err := k.Acquire(context.Background(), 1500, 1); waiting <- err }()
		synctest.Wait()
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-waiting; !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter after Close: %v, want ErrClosed", err)
		}
		if l := k.TryAcquire(1, 1); !errors.Is(l.Err(), ErrClosed) {
			t.Fatalf("TryAcquire after Close: %v", l.Err())
		}
	})
}

// Foreign limiters are evicted after IdleTimeout without a call.
func TestKeyedIdleTimeoutForForeignLimiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		k, _ := NewKeyed(KeyedOptions[string]{
			New:         func(s string) (Limiter, error) { return recorder{s, &log}, nil },
			IdleTimeout: time.Minute,
		})
		held := k.TryAcquire("a", 1)
		time.Sleep(time.Hour)
		if n := k.Prune(); n != 0 {
			t.Fatalf("pruned %d keys while a lease that gives permits back was held", n)
		}
		held.Release()
		time.Sleep(59 * time.Second)
		if n := k.Prune(); n != 0 {
			t.Fatalf("pruned %d before the timeout", n)
		}
		time.Sleep(time.Second)
		if n := k.Prune(); n != 1 {
			t.Fatalf("pruned %d at the timeout, want 1", n)
		}
	})
}
