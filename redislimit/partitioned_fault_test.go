package redislimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
)

// With Redis out of reach from the start, a Partitioned never holds a
// lease. Under FailClosed, every waiting Acquire and TryAcquire fail with
// ErrUnavailable within one Timeout of the failed lease call (so within
// two of the first call); under FailOpen and UseFallback the waiters are
// served, in the same time.
func TestPartitionedUnavailableFromStart(t *testing.T) {
	const timeout = 100 * time.Millisecond
	within := 2*timeout + timeoutSlack
	po := PartitionedOptions{Rate: limiter.Per(100, time.Second), Burst: 10, Partitions: 2, LeaseTTL: time.Second}
	for _, policy := range []ErrorPolicy{FailClosed, FailOpen, UseFallback} {
		t.Run(policy.String(), func(t *testing.T) {
			t.Parallel()
			addr, err := redistest.Refused()
			if err != nil {
				t.Fatal(err)
			}
			c := redis.NewClient(&redis.Options{Addr: addr})
			defer waitDialsEnd(t)
			defer c.Close()
			fallback, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 3})
			p, err := NewPartitioned(Options{Client: c, Key: uniqueKey(t), OnError: policy, Fallback: fallbackFor(policy, fallback), Timeout: timeout}, po)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			start := time.Now()
			var wg sync.WaitGroup
			for i := range 3 {
				wg.Go(func() {
					l, err := p.Acquire(ctx, 1)
					took := time.Since(start)
					t.Logf("waiter %d: after %v: granted %v, %v", i, took.Round(time.Millisecond), l.Granted(), err)
					if took > within {
						t.Errorf("waiter %d answered after %v, over %v", i, took, within)
					}
					switch {
					case policy == FailClosed && !errors.Is(err, ErrUnavailable):
						t.Errorf("waiter %d: %v, want ErrUnavailable", i, err)
					case policy != FailClosed && (err != nil || !l.Granted()):
						t.Errorf("waiter %d under %v: %v, want a grant", i, policy, err)
					}
				})
			}
			wg.Wait()
			if policy != FailClosed {
				return
			}
			// TryAcquire says the same while no lease can be had.
			if l := p.TryAcquire(1); l.Granted() || !errors.Is(l.Err(), ErrUnavailable) {
				t.Errorf("TryAcquire after the failed lease calls: granted %v, %v; want ErrUnavailable", l.Granted(), l.Err())
			}
		})
	}
}

// TryAcquire on a Partitioned that cannot reach Redis from the start says
// ErrUnavailable within one Timeout of the first (failed) lease call.
func TestPartitionedTryUnavailableFromStart(t *testing.T) {
	const timeout = 100 * time.Millisecond
	addr, err := redistest.Refused()
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer waitDialsEnd(t)
	defer c.Close()
	p, err := NewPartitioned(Options{Client: c, Key: uniqueKey(t), Timeout: timeout},
		PartitionedOptions{Rate: limiter.Per(100, time.Second), Burst: 10, Partitions: 2, LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	for {
		l := p.TryAcquire(1)
		if l.Granted() {
			t.Fatal("granted with Redis out of reach under FailClosed")
		}
		if errors.Is(l.Err(), ErrUnavailable) {
			break
		}
		if !errors.Is(l.Err(), limiter.ErrLimited) {
			t.Fatalf("TryAcquire: %v", l.Err())
		}
		if time.Since(start) > 2*timeout+timeoutSlack {
			t.Fatalf("TryAcquire still says %v after %v", l.Err(), time.Since(start))
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("ErrUnavailable after %v", time.Since(start).Round(time.Millisecond))
}

func fallbackFor(p ErrorPolicy, l limiter.Limiter) limiter.Limiter {
	if p == UseFallback {
		return l
	}
	return nil
}
