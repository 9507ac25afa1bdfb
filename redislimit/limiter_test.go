package redislimit

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
)

func TestOptionErrors(t *testing.T) {
	c := newClient(t)
	fb, _ := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
	ok := Options{Client: c, Key: "k"}
	with := func(f func(*Options)) Options { o := ok; f(&o); return o }
	tbo := limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 5}
	slo := limiter.SlidingLogOptions{Limit: 5, Window: time.Second}
	cases := []struct {
		field string
		make  func() error
	}{
		{"Client", func() error { _, err := NewTokenBucket(with(func(o *Options) { o.Client = nil }), tbo); return err }},
		{"Key", func() error { _, err := NewSlidingLog(with(func(o *Options) { o.Key = "" }), slo); return err }},
		{"Fallback", func() error {
			_, err := NewFixedWindow(with(func(o *Options) { o.OnError = UseFallback }), limiter.FixedWindowOptions{Limit: 1, Window: time.Second})
			return err
		}},
		{"OnError", func() error { _, err := NewTokenBucket(with(func(o *Options) { o.OnError = 7 }), tbo); return err }},
		{"Timeout", func() error { _, err := NewTokenBucket(with(func(o *Options) { o.Timeout = -1 }), tbo); return err }},
		{"LeaseTTL", func() error {
			_, err := NewConcurrency(with(func(o *Options) { o.LeaseTTL = time.Millisecond }), limiter.ConcurrencyOptions{Limit: 1})
			return err
		}},
		{"Burst", func() error {
			_, err := NewTokenBucket(ok, limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second)})
			return err
		}},
		{"Rate", func() error { _, err := NewTokenBucket(ok, limiter.TokenBucketOptions{Burst: 1}); return err }},
		{"Burst", func() error { // 1/hour: one permit costs 3.6e9 units; 2·Burst·3.6e9 ≥ 2^53
			_, err := NewTokenBucket(ok, limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 2_000_000})
			return err
		}},
		{"Limit", func() error { _, err := NewSlidingLog(ok, limiter.SlidingLogOptions{Window: time.Second}); return err }},
		{"Window", func() error { _, err := NewSlidingLog(ok, limiter.SlidingLogOptions{Limit: 1}); return err }},
		{"Window", func() error {
			_, err := NewFixedWindow(ok, limiter.FixedWindowOptions{Limit: 1, Window: 1500 * time.Nanosecond})
			return err
		}},
		{"Limit", func() error { _, err := NewConcurrency(ok, limiter.ConcurrencyOptions{Limit: 1 << 52}); return err }},
		{"Queue.Limit", func() error {
			_, err := NewKeyedSlidingLog(ok, limiter.SlidingLogOptions{Limit: 1, Window: time.Second, Queue: limiter.QueueOptions{Limit: -1}})
			return err
		}},
	}
	for _, tc := range cases {
		err := tc.make()
		var oe *limiter.OptionError
		if !errors.As(err, &oe) || oe.Field != tc.field {
			t.Errorf("want an *limiter.OptionError for %s, got %v", tc.field, err)
		}
	}
	if _, err := NewSlidingLog(with(func(o *Options) { o.OnError = UseFallback; o.Fallback = fb }), slo); err != nil {
		t.Errorf("valid UseFallback options: %v", err)
	}
}

// TestRateRange shows the arithmetic exact at the ends of the range: one
// permit per hour and a million per second.
func TestRateRange(t *testing.T) {
	c := newClient(t)
	t.Run("1/hour", func(t *testing.T) {
		tb, err := NewTokenBucket(Options{Client: c, Key: uniqueKey(t)}, limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer tb.Close()
		for range 2 {
			if l := tb.TryAcquire(1); !l.Granted() {
				t.Fatal(l.Err())
			}
		}
		l := tb.TryAcquire(1)
		if l.Granted() {
			t.Fatal("a third permit within the hour")
		}
		if ra := l.RetryAfter(); ra <= time.Hour-time.Second || ra > time.Hour {
			t.Fatalf("RetryAfter %v, want just under an hour", ra)
		}
		if q := tb.Quota(); q.Window != 2*time.Hour || q.Limit != 2 || q.Remaining != 0 {
			t.Fatalf("Quota %+v", q)
		}
	})
	t.Run("1e6/s", func(t *testing.T) {
		if testing.Short() {
			t.Skip("runs for 300ms")
		}
		tb, err := NewTokenBucket(Options{Client: c, Key: uniqueKey(t)}, limiter.TokenBucketOptions{Rate: limiter.Per(1_000_000, time.Second), Burst: 20_000})
		if err != nil {
			t.Fatal(err)
		}
		defer tb.Close()
		var mu sync.Mutex
		var g []event
		tb.e.onGrant = func(now int64, n int) { mu.Lock(); g = append(g, event{kind: "g", at: now, n: n}); mu.Unlock() }
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					tb.Acquire(ctx, 5000)
				}
			})
		}
		wg.Wait()
		checkBucket(t, g, 1_000_000, time.Second, 20_000)
		total := 0
		for _, e := range g {
			total += e.n
		}
		span := float64(g[len(g)-1].at - g[0].at)
		share := float64(total) / (20_000 + span)
		t.Logf("%d permits in %.0f µs: %.1f%% of burst + rate·t", total, span, 100*share)
		if share < 0.95 {
			t.Fatalf("saturating demand got %.1f%%", 100*share)
		}
	})
}

func TestAcquireDeadlineAtOnce(t *testing.T) {
	fw, err := NewSlidingLog(Options{Client: newClient(t), Key: uniqueKey(t)}, limiter.SlidingLogOptions{Limit: 1, Window: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	fw.TryAcquire(1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	l, err := fw.Acquire(ctx, 1)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(l.Err(), context.DeadlineExceeded) || l.Granted() {
		t.Fatalf("Acquire past the deadline: %v, %v", err, l.Err())
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Fatalf("failed after %v, not at once", d)
	}
	if l.RetryAfter() <= 0 {
		t.Fatalf("RetryAfter %v", l.RetryAfter())
	}
}

func TestNilContextPanics(t *testing.T) {
	sl, _ := NewSlidingLog(Options{Client: newClient(t), Key: uniqueKey(t)}, limiter.SlidingLogOptions{Limit: 1, Window: time.Second})
	defer sl.Close()
	func() {
		defer func() {
			if r := recover(); r != "redislimit: nil Context" {
				t.Fatalf("recovered %v", r)
			}
		}()
		//lint:ignore SA1012 the nil Context is the point
		sl.Acquire(nil, 1) //nolint:staticcheck
	}()
	if l := sl.TryAcquire(1); !l.Granted() {
		t.Fatalf("after the panic: %v", l.Err())
	}
}

func TestRefusalsWithoutRoundTrip(t *testing.T) {
	sl, _ := NewSlidingLog(Options{Client: newClient(t), Key: uniqueKey(t)}, limiter.SlidingLogOptions{Limit: 3, Window: time.Second})
	if l := sl.TryAcquire(4); !errors.Is(l.Err(), limiter.ErrExceedsLimit) {
		t.Fatalf("over the limit: %v", l.Err())
	}
	if _, err := sl.Acquire(context.Background(), -1); !errors.Is(err, limiter.ErrInvalidCount) {
		t.Fatalf("negative: %v", err)
	}
	if l := sl.TryAcquire(0); !l.Granted() {
		t.Fatalf("zero permits: %v", l.Err())
	}
	sl.TryAcquire(3)
	done := make(chan error)
	go func() { _, err := sl.Acquire(context.Background(), 1); done <- err }()
	time.Sleep(20 * time.Millisecond)
	sl.Close()
	if err := <-done; !errors.Is(err, limiter.ErrClosed) || !errors.Is(err, ErrClosed) {
		t.Fatalf("a waiter at Close: %v", err)
	}
	if l := sl.TryAcquire(1); !errors.Is(l.Err(), limiter.ErrClosed) {
		t.Fatalf("after Close: %v", l.Err())
	}
	if s := sl.Stats(); s.Granted != 2 || s.Rejected != 4 || s.Waiters != 0 {
		t.Fatalf("Stats %+v", s)
	}
}

func TestUnreachable(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	tbo := limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 1}
	closed, _ := NewTokenBucket(Options{Client: c, Key: "k"}, tbo)
	lease := closed.TryAcquire(1)
	var op *net.OpError
	if lease.Granted() || !errors.Is(lease.Err(), ErrUnavailable) || !errors.As(lease.Err(), &op) {
		t.Fatalf("FailClosed: granted %v, err %v", lease.Granted(), lease.Err())
	}
	if _, err := closed.Acquire(context.Background(), 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("FailClosed Acquire: %v", err)
	}
	open, _ := NewTokenBucket(Options{Client: c, Key: "k", OnError: FailOpen}, tbo)
	if l := open.TryAcquire(1); !l.Granted() {
		t.Fatalf("FailOpen: %v", l.Err())
	}
	fb, _ := limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 1, Window: time.Hour})
	viaFB, _ := NewTokenBucket(Options{Client: c, Key: "k", OnError: UseFallback, Fallback: fb}, tbo)
	if l := viaFB.TryAcquire(1); !l.Granted() {
		t.Fatalf("UseFallback: %v", l.Err())
	}
	if l := viaFB.TryAcquire(1); l.Granted() || !errors.Is(l.Err(), limiter.ErrLimited) {
		t.Fatalf("UseFallback, the fallback exhausted: %v", l.Err())
	}
}

func TestKeyedLimitsAreSeparateAndExpire(t *testing.T) {
	c := newClient(t)
	k, err := NewKeyedSlidingLog(Options{Client: c, Key: uniqueKey(t)}, limiter.SlidingLogOptions{Limit: 2, Window: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	evil := "a}{b"
	for _, key := range []string{"10.0.0.1", evil} {
		for range 2 {
			if l := k.For(key).TryAcquire(1); !l.Granted() {
				t.Fatalf("%q: %v", key, l.Err())
			}
		}
		if l := k.For(key).TryAcquire(1); l.Granted() {
			t.Fatalf("%q: a third grant", key)
		}
	}
	h := &k.For(evil).(*keyLimiter).h
	if strings.Count(h.keys[0], "{") != 1 || strings.Count(h.keys[0], "}") != 1 {
		t.Fatalf("Redis key %q has more than one hash tag", h.keys[0])
	}
	ttl, err := c.PTTL(context.Background(), h.keys[0]).Result()
	if err != nil || ttl <= 0 || ttl > 210*time.Millisecond {
		t.Fatalf("an idle key's TTL: %v %v", ttl, err)
	}
	q, ok := limiter.QuotaOf(k.For(evil))
	if !ok || q.Limit != 2 || q.Window != 200*time.Millisecond {
		t.Fatalf("QuotaOf(For) = %+v %v", q, ok)
	}
	if server.Embedded {
		t.Log("the embedded server expires keys only when told to: the expiry itself is not checked")
		return
	}
	time.Sleep(ttl + 20*time.Millisecond)
	if n, _ := c.Exists(context.Background(), h.keys...).Result(); n != 0 {
		t.Fatalf("%d keys of an idle limit left in Redis", n)
	}
}

// countingHook counts script calls.
type countingHook struct{ n atomic.Int64 }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestCoalescing(t *testing.T) {
	c := newClient(t)
	hook := &countingHook{}
	c.AddHook(hook)
	tb, _ := NewTokenBucket(Options{Client: c, Key: uniqueKey(t)}, limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 1000})
	defer tb.Close()
	var wg sync.WaitGroup
	var granted atomic.Int64
	for range 64 {
		wg.Go(func() {
			for range 20 {
				if tb.TryAcquire(1).Granted() {
					granted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	calls := hook.n.Load()
	t.Logf("1280 decisions in %d script calls", calls)
	if granted.Load() != 1000 {
		t.Fatalf("%d granted of a bucket of 1000", granted.Load())
	}
	if calls >= 1280 {
		t.Fatalf("no coalescing: %d calls", calls)
	}
}

func TestConcurrencyReleaseAndRenew(t *testing.T) {
	c := newClient(t)
	// Renewed every TTL/3, a lease survives a renewal as late as 2/3 TTL:
	// 100ms, for a loaded machine (or -race).
	o := Options{Client: c, Key: uniqueKey(t), LeaseTTL: 150 * time.Millisecond}
	a, err := NewConcurrency(o, limiter.ConcurrencyOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _ := NewConcurrency(o, limiter.ConcurrencyOptions{Limit: 2})
	defer b.Close()
	l1, l2 := a.TryAcquire(1), a.TryAcquire(1)
	if !l1.Granted() || !l2.Granted() {
		t.Fatal(l1.Err(), l2.Err())
	}
	time.Sleep(750 * time.Millisecond) // five TTLs: the leases live by renewal
	if l := b.TryAcquire(1); l.Granted() {
		t.Fatal("a third permit while two leases are renewed")
	}
	got := make(chan error)
	go func() {
		l, err := a.Acquire(context.Background(), 1)
		l.Release()
		got <- err
	}()
	time.Sleep(10 * time.Millisecond)
	start := time.Now()
	l1.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 30*time.Millisecond {
		t.Fatalf("a waiter took %v to see a release in its process", d)
	}
	l1.Release() // twice: no effect
	if q := a.Quota(); q.Limit != 2 {
		t.Fatalf("Quota %+v", q)
	}
	if l := b.TryAcquire(1); !l.Granted() {
		t.Fatalf("after a release: %v", l.Err())
	} else {
		l.Release()
	}
	if l := b.TryAcquire(2); l.Granted() {
		t.Fatal("two permits while one is held")
	}
	l2.Release()
}
