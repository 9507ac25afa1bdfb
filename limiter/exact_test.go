package limiter

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// slowRefuser is a member from outside the package whose TryAcquire takes
// d (as a remote limiter's round trip does) and then refuses.
type slowRefuser struct{ d time.Duration }

func (s slowRefuser) TryAcquire(int) Lease {
	time.Sleep(s.d)
	return Denied(ErrLimited, time.Hour)
}
func (s slowRefuser) Acquire(ctx context.Context, n int) (Lease, error) {
	<-ctx.Done()
	return Denied(ctx.Err(), 0), ctx.Err()
}

// Issue 12, bug 1: a refused chain gave back someone else's later grant
// from a SlidingLog. Chain(log 2 per 1s, slow refuser): a direct grant at
// 50 ms, the chain refused at 100 ms, then direct attempts at 100 ms and
// 1 s. (0, 1 s] may hold only 2 grants.
func TestChainSlowMemberKeepsSlidingLogBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, _ := NewSlidingLog(SlidingLogOptions{Limit: 2, Window: time.Second})
		ch := Chain(log, slowRefuser{100 * time.Millisecond})
		start := time.Now()
		var mu sync.Mutex
		var grants []time.Duration
		try := func() {
			if log.TryAcquire(1).Granted() {
				mu.Lock()
				grants = append(grants, time.Since(start))
				mu.Unlock()
			}
		}
		go func() { time.Sleep(50 * time.Millisecond); try() }()
		if ch.TryAcquire(1).Granted() {
			t.Fatal("the chain was granted past a refusing member")
		}
		try() // at 100 ms
		time.Sleep(time.Until(start.Add(time.Second)))
		try() // at 1 s: the 50 ms and 100 ms grants are still in (0, 1 s]
		if len(grants) != 2 {
			t.Fatalf("direct grants at %v: want exactly 2 in (0, 1s] (at 50 ms and 100 ms)", grants)
		}
		if got := log.Stats().Granted; got != 2 {
			t.Fatalf("log counts %d grants, want 2: the refused chain left one behind", got)
		}
	})
}

// Issue 12, bug 2: a refused chain over-credited a full TokenBucket that
// someone else took from before the refund. At 1/s with Burst 2, grants at
// 50 ms, 100 ms and 1 s would be 3 within 950 ms: over Burst + Rate·t = 2.95.
func TestChainSlowMemberKeepsTokenBucketBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 2})
		ch := Chain(tb, slowRefuser{100 * time.Millisecond})
		start := time.Now()
		var granted atomic.Int32
		go func() {
			time.Sleep(50 * time.Millisecond)
			if tb.TryAcquire(1).Granted() {
				granted.Add(1)
			}
		}()
		ch.TryAcquire(1) // refused at 100 ms
		for _, at := range []time.Duration{100 * time.Millisecond, time.Second} {
			time.Sleep(time.Until(start.Add(at)))
			if tb.TryAcquire(1).Granted() {
				granted.Add(1)
			}
		}
		if granted := granted.Load(); granted != 2 {
			t.Fatalf("%d grants in [50 ms, 1 s] at 1/s with Burst 2, want 2", granted)
		}
	})
}

// Issue 12, bug 3: a request above a later member's maximum fails at once
// with ErrExceedsLimit instead of waiting for the earlier members.
func TestChainExceedsLaterMemberFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 10})
		tb.TryAcquire(10) // empty: an earlier member that would make a caller wait
		conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 2})
		start := time.Now()
		_, err := Chain(tb, conc).Acquire(context.Background(), 5)
		if !errors.Is(err, ErrExceedsLimit) {
			t.Fatalf("Acquire(5) with a member of Limit 2: %v, want ErrExceedsLimit", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("it failed after %v, want at once", d)
		}
	})
}

// Issue 12, bug 4: a refused chain spent the permit of a Keyed.For or
// KeyedTokenBucket.For member.
func TestChainRefusedKeyedMembersConsumeNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		keyed, _ := NewKeyed(KeyedOptions[string]{New: func(string) (Limiter, error) {
			return NewSlidingLog(SlidingLogOptions{Limit: 1, Window: time.Hour})
		}})
		buckets, _ := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(1, time.Hour), Burst: 1})
		full, _ := NewConcurrency(ConcurrencyOptions{Limit: 1})
		held := full.TryAcquire(1)
		if Chain(keyed.For("a"), buckets.For("a"), full).TryAcquire(1).Granted() {
			t.Fatal("granted past a full member")
		}
		if !keyed.TryAcquire("a", 1).Granted() {
			t.Fatal("the refused chain spent the Keyed key's permit")
		}
		if !buckets.TryAcquire("a", 1).Granted() {
			t.Fatal("the refused chain spent the KeyedTokenBucket key's permit")
		}
		held.Release()
	})
}

// Issue 12, bug 5: Keyed evicted a key's Chain(rate, Concurrency{1}) by
// IdleTimeout while a lease was held, so two leases were held at once on a
// limit of 1; and with IdleTimeout 0 idle chains were never evicted.
func TestKeyedChainsEvictedOnlyWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, _ := NewKeyed(KeyedOptions[int]{
			New: func(int) (Limiter, error) {
				tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(100, time.Second), Burst: 100})
				conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 1})
				return Chain(tb, conc), nil
			},
			IdleTimeout: time.Second,
		})
		l := k.TryAcquire(0, 1)
		if !l.Granted() {
			t.Fatal("first lease refused")
		}
		time.Sleep(time.Minute)
		k.Prune()
		for i := 1; i < 100; i++ { // inserts sweep too
			k.TryAcquire(i, 1).Release()
		}
		if k.TryAcquire(0, 1).Granted() {
			t.Fatal("a second lease was granted on a limit of 1: the key was evicted while its lease was held")
		}
		l.Release()
		time.Sleep(time.Second)
		if n := k.Prune(); n != 100 {
			t.Fatalf("Prune evicted %d idle chains, want 100", n)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		k, _ := NewKeyed(KeyedOptions[int]{New: func(int) (Limiter, error) {
			log, _ := NewSlidingLog(SlidingLogOptions{Limit: 1, Window: time.Second})
			return Chain(log), nil
		}})
		for i := range 1000 {
			k.TryAcquire(i, 1)
		}
		time.Sleep(time.Second)
		if n := k.Prune(); n != 1000 {
			t.Fatalf("with IdleTimeout 0, Prune evicted %d idle chains, want 1000", n)
		}
	})
}

// Issue 12, bug 6: the factory ran under the shard mutex, so one that called
// back into the same Keyed deadlocked; and TryAcquire dropped its error.
func TestKeyedFactoryOutsideTheLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var k *Keyed[string]
		factoryErr := errors.New("no such tenant")
		k, _ = NewKeyed(KeyedOptions[string]{New: func(key string) (Limiter, error) {
			if key == "bad" {
				return nil, factoryErr
			}
			if key == "a" {
				_ = k.Len()              // locks every shard, this key's too
				k.TryAcquire("other", 1) // and makes another key
			}
			return NewConcurrency(ConcurrencyOptions{Limit: 1})
		}})
		done := make(chan Lease)
		go func() { done <- k.TryAcquire("a", 1) }()
		synctest.Wait()
		select {
		case l := <-done:
			if !l.Granted() {
				t.Fatalf("refused: %v", l.Err())
			}
		default:
			t.Fatal("a factory that calls back into the Keyed deadlocked")
		}
		l := k.TryAcquire("bad", 1)
		if !errors.Is(l.Err(), ErrNoLimiter) || !errors.Is(l.Err(), factoryErr) {
			t.Fatalf("TryAcquire with a failing factory: %v, want ErrNoLimiter wrapping the factory's error", l.Err())
		}
	})
}

// Issue 12, bug 7: KeyedTokenBucket.Close did not end a waiting Acquire;
// its options accepted a bad Queue; its rebase overflowed after a long idle
// spell; and waiters on one key were not served in arrival order.
func TestKeyedTokenBucketCloseEndsWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, _ := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(1, time.Hour), Burst: 1})
		k.TryAcquire("a", 1)
		errc := make(chan error)
		go func() {
			_, err := k.Acquire(context.Background(), "a", 1)
			errc <- err
		}()
		time.Sleep(time.Second)
		start := time.Now()
		k.Close()
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter after Close: %v, want ErrClosed", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("the waiter ended %v after Close, want at once", d)
		}
	})
}

// A NewestFirst key queue that is full pushes its oldest waiter out at the
// instant a newer one arrives, with ErrQueueFull, however long that waiter
// was to wait.
func TestKeyedTokenBucketPushOutIsImmediate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, _ := NewKeyedTokenBucket[string](TokenBucketOptions{
			Rate: Per(1, time.Hour), Burst: 1, Queue: QueueOptions{Limit: 1, Order: NewestFirst},
		})
		k.TryAcquire("a", 1)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		type result struct {
			err error
			at  time.Duration
		}
		start := time.Now()
		old := make(chan result, 1)
		go func() {
			_, err := k.Acquire(ctx, "a", 1)
			old <- result{err, time.Since(start)}
		}()
		time.Sleep(time.Minute)
		go k.Acquire(ctx, "a", 1) // newer: it heads the queue and pushes the first out
		r := <-old
		if !errors.Is(r.err, ErrQueueFull) || r.at != time.Minute {
			t.Fatalf("pushed-out waiter: %v at %v, want ErrQueueFull at 1m0s", r.err, r.at)
		}
	})
}

func TestKeyedTokenBucketValidatesQueue(t *testing.T) {
	_, err := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(1, time.Second), Burst: 1, Queue: QueueOptions{Limit: -5, Order: 7}})
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Field != "Queue.Limit" {
		t.Fatalf("Queue{Limit: -5, Order: 7}: %v, want an *OptionError naming Queue.Limit", err)
	}
}

func TestKeyedTokenBucketLongIdleShard(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k, _ := NewKeyedTokenBucket[int](TokenBucketOptions{Rate: Per(1e9+7, time.Second), Burst: 5})
		for i := range 200 {
			k.TryAcquire(i, 5)
		}
		time.Sleep(10 * time.Second) // past 2^63/n ns for n = 1e9+7
		for i := range 200 {
			if l := k.TryAcquire(i, 5); !l.Granted() {
				t.Fatalf("key %d refused after a 10 s idle spell: %v", i, l.Err())
			}
		}
	})
}

func TestKeyedTokenBucketServesOneKeyInOrder(t *testing.T) {
	for _, order := range []Order{OldestFirst, NewestFirst} {
		synctest.Test(t, func(t *testing.T) {
			k, _ := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(1, time.Second), Burst: 1, Queue: QueueOptions{Order: order}})
			k.TryAcquire("a", 1)
			var mu sync.Mutex
			var served []int
			var wg sync.WaitGroup
			for i := range 5 {
				wg.Go(func() {
					if _, err := k.Acquire(context.Background(), "a", 1); err == nil {
						mu.Lock()
						served = append(served, i)
						mu.Unlock()
					}
				})
				time.Sleep(time.Millisecond) // arrive in order 0..4
			}
			if l := k.TryAcquire("a", 1); l.Granted() || !errors.Is(l.Err(), ErrLimited) {
				t.Fatalf("TryAcquire jumped the key's queue: %v", l.Err())
			}
			wg.Wait()
			want := []int{0, 1, 2, 3, 4}
			if order == NewestFirst {
				want = []int{4, 3, 2, 1, 0}
			}
			for i := range want {
				if served[i] != want[i] {
					t.Fatalf("%v: served %v, want %v", order, served, want)
				}
			}
		})
	}
}

// Chain.Acquire serves its callers in arrival order: four equal producers
// through one chain get equal shares (it was 52/37/131/92 of 312, when each
// caller slept and retried on its own).
func TestChainAcquireIsFair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log, _ := NewSlidingLog(SlidingLogOptions{Limit: 10, Window: 100 * time.Millisecond})
		room, _ := NewConcurrency(ConcurrencyOptions{Limit: 3})
		ch := Chain(log, room)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var counts [4]int
		var wg sync.WaitGroup
		for p := range counts {
			wg.Go(func() {
				for {
					l, err := ch.Acquire(ctx, 1)
					if err != nil {
						return
					}
					counts[p]++
					time.Sleep(2 * time.Millisecond) // the work
					l.Release()
				}
			})
		}
		wg.Wait()
		total := counts[0] + counts[1] + counts[2] + counts[3]
		for p, c := range counts {
			if share := float64(c) / float64(total); share < 0.20 || share > 0.30 {
				t.Fatalf("producer %d got %d of %d (%v): want 25%% ± 5%%", p, c, total, counts)
			}
		}
		if total < 990 { // 10 per 100 ms for 10 s, less the last window's
			t.Fatalf("%d grants in 10 s at 10 per 100 ms: the chain fell short of the bound", total)
		}
	})
}

// Hammered from many goroutines, through the chain and directly, a
// Concurrency member never has more than Limit permits out, and a refused
// chain never keeps one.
func TestChainConcurrentUsersKeepConcurrencyBound(t *testing.T) {
	tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Millisecond), Burst: 3})
	conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 4})
	ch := Chain(tb, conc)
	var mu sync.Mutex
	out, worst := 0, 0
	use := func(l Lease) {
		if !l.Granted() {
			return
		}
		mu.Lock()
		out++
		worst = max(worst, out)
		mu.Unlock()
		mu.Lock()
		out--
		mu.Unlock()
		l.Release()
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for range 2000 {
				if g%2 == 0 {
					use(ch.TryAcquire(1))
				} else {
					use(conc.TryAcquire(1))
				}
			}
		})
	}
	wg.Wait()
	if worst > 4 {
		t.Fatalf("%d leases held at once on a Concurrency of 4", worst)
	}
	if conc.InUse() != 0 {
		t.Fatalf("InUse %d after every lease was released", conc.InUse())
	}
}
