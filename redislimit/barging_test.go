package redislimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// waitForWaiter waits until waiters reports an Acquire call waiting.
func waitForWaiter(t *testing.T, waiters func() int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for waiters() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no Acquire call waiting after 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// hammer calls try from two goroutines until stop closes and returns how
// many calls were granted.
func hammer(try func() limiter.Lease, stop <-chan struct{}) int64 {
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if try().Granted() {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return granted.Load()
}

// No barging (DESIGN rule 3): while an Acquire call of this process waits
// on a limit, TryAcquire on that limit fails rather than take the permit
// the waiter waits for; on another key of a keyed limiter it is granted.
func TestTryAcquireDoesNotBarge(t *testing.T) {
	opts := limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 1}
	t.Run("TokenBucket", func(t *testing.T) {
		tb, err := NewTokenBucket(Options{Client: newClient(t), Key: uniqueKey(t)}, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer tb.Close()
		checkNoBarging(t, tb, func() int64 { return int64(tb.Stats().Waiters) }, nil)
	})
	t.Run("Keyed", func(t *testing.T) {
		k, err := NewKeyedTokenBucket(Options{Client: newClient(t), Key: uniqueKey(t)}, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer k.Close()
		checkNoBarging(t, k.For("a"), func() int64 { return int64(k.Stats().Waiters) }, k.For("b"))
	})
	t.Run("Chain", func(t *testing.T) {
		c := newClient(t)
		a, err := NewTokenBucket(Options{Client: c, Key: uniqueKey(t) + "/a"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := NewTokenBucket(Options{Client: c, Key: uniqueKey(t) + "/b"}, limiter.TokenBucketOptions{Rate: limiter.Per(100, time.Second), Burst: 5})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ch, err := Chain(a, b)
		if err != nil {
			t.Fatal(err)
		}
		checkNoBarging(t, ch, ch.(*chainLimiter).waiters.Load, nil)
	})
}

// checkNoBarging empties lim (a bucket of burst 1 at 10/s), starts an
// Acquire that waits for the next permit, and hammers lim with TryAcquire
// until the Acquire returns: none may be granted. other, if not nil, is a
// limit beside lim that TryAcquire must still be granted on.
func checkNoBarging(t *testing.T, lim limiter.Limiter, waiters func() int64, other limiter.Limiter) {
	t.Helper()
	if !lim.TryAcquire(1).Granted() {
		t.Fatal("the first permit of a full bucket refused")
	}
	acquired := make(chan error, 1)
	go func() {
		_, err := lim.Acquire(context.Background(), 1)
		acquired <- err
	}()
	waitForWaiter(t, waiters)
	stop := make(chan struct{})
	var barged int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		barged = hammer(func() limiter.Lease { return lim.TryAcquire(1) }, stop)
	}()
	var otherGranted bool
	if other != nil {
		otherGranted = other.TryAcquire(1).Granted()
	}
	select {
	case err := <-acquired:
		if err != nil {
			t.Fatalf("the waiting Acquire failed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting Acquire did not return within 5 s")
	}
	close(stop)
	<-done
	if barged > 0 {
		t.Errorf("%d TryAcquire calls granted while an Acquire waited: they jumped it", barged)
	}
	if other != nil && !otherGranted {
		t.Error("TryAcquire on another key refused while an Acquire waited on one key")
	}
}
