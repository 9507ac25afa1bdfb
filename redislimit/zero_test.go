package redislimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
)

// zeroLimiters returns a limit of each algorithm of 2 permits (an hour to
// refill), plain and keyed, on c.
func zeroLimiters(t *testing.T, c redis.UniversalClient) map[string]limiter.Limiter {
	t.Helper()
	o := func() Options { return Options{Client: c, Key: uniqueKey(t), Timeout: 100 * time.Millisecond} }
	tbo := limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 2}
	fwo := limiter.FixedWindowOptions{Limit: 2, Window: time.Hour}
	slo := limiter.SlidingLogOptions{Limit: 2, Window: time.Hour}
	cco := limiter.ConcurrencyOptions{Limit: 2}
	ls := map[string]limiter.Limiter{}
	add := func(name string, l limiter.Limiter, err error) {
		if err != nil {
			t.Fatal(err)
		}
		ls[name] = l
		if cl, ok := l.(interface{ Close() error }); ok {
			t.Cleanup(func() { cl.Close() })
		}
	}
	add(must2(NewTokenBucket(o(), tbo)))
	add(must2(NewFixedWindow(o(), fwo)))
	add(must2(NewSlidingLog(o(), slo)))
	add(must2(NewConcurrency(o(), cco)))
	for name, k := range map[string]func() (*Keyed, error){
		"keyed-tb": func() (*Keyed, error) { return NewKeyedTokenBucket(o(), tbo) },
		"keyed-cc": func() (*Keyed, error) { return NewKeyedConcurrency(o(), cco) },
	} {
		kl, err := k()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kl.Close() })
		ls[name] = kl.For("user")
	}
	return ls
}

func must2[L limiter.Limiter](l L, err error) (string, limiter.Limiter, error) {
	return typeName(l), l, err
}

func typeName(l limiter.Limiter) string {
	switch l.(type) {
	case *TokenBucket:
		return "tb"
	case *FixedWindow:
		return "fw"
	case *SlidingLog:
		return "sl"
	case *Concurrency:
		return "cc"
	}
	return "?"
}

// Zero permits are granted only when one permit could be, as by every
// limiter of package limiter: Redis is asked, and an exhausted limit (or a
// Redis that cannot decide, under FailClosed) refuses them.
func TestZeroPermits(t *testing.T) {
	for name, l := range zeroLimiters(t, newClient(t)) {
		if lease := l.TryAcquire(0); !lease.Granted() {
			t.Errorf("%s: TryAcquire(0) on a new limit: %v", name, lease.Err())
		}
		if lease := l.TryAcquire(2); !lease.Granted() { // held until the end, for the semaphores
			t.Fatalf("%s: TryAcquire(2): %v", name, lease.Err())
		}
		if lease := l.TryAcquire(0); lease.Granted() || !errors.Is(lease.Err(), limiter.ErrLimited) {
			t.Errorf("%s: TryAcquire(0) on an exhausted limit: granted %v, %v", name, lease.Granted(), lease.Err())
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		lease, err := l.Acquire(ctx, 0)
		cancel()
		if lease.Granted() || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: Acquire(0) on an exhausted limit: granted %v, %v", name, lease.Granted(), err)
		}
	}
	addr, err := redistest.Refused()
	if err != nil {
		t.Fatal(err)
	}
	dead := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	defer waitDialsEnd(t)
	defer dead.Close()
	for name, l := range zeroLimiters(t, dead) {
		if lease := l.TryAcquire(0); lease.Granted() || !errors.Is(lease.Err(), ErrUnavailable) {
			t.Errorf("%s: TryAcquire(0) with Redis out of reach: granted %v, %v", name, lease.Granted(), lease.Err())
		}
		if lease, err := l.Acquire(t.Context(), 0); lease.Granted() || !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: Acquire(0) with Redis out of reach: granted %v, %v", name, lease.Granted(), err)
		}
	}
}
