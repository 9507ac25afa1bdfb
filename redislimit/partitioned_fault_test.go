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
			c := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1})
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
	c := redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1})
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

// A brand-new limit serves its burst at once and its rate from the first
// lease: partitions never leased are full (only a vanished holder's come
// back empty). On a server up for longer than the quarantine.
func TestPartitionedNewLimitServesBurst(t *testing.T) {
	waitUptime(t, server, 4)
	c := newClient(t)
	// One process, burst 10 at 60/min: ten permits at once.
	p, err := NewPartitioned(Options{Client: c, Key: uniqueKey(t)},
		PartitionedOptions{Rate: limiter.Per(60, time.Minute), Burst: 10, Partitions: 2, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
	defer cancel()
	start := time.Now()
	for i := range 10 {
		if _, err := p.Acquire(ctx, 1); err != nil {
			t.Fatalf("permit %d of a new limit's burst of 10, after %v: %v", i, time.Since(start), err)
		}
	}
	t.Logf("a new limit's burst of 10 in %v", time.Since(start).Round(time.Millisecond))

	// Three holders in one process polling a new limit of 3,000/s (burst
	// 300, 12 partitions, LeaseTTL 2s) for 1s: together they get the burst
	// and the rate, from the first lease on.
	po := PartitionedOptions{Rate: limiter.Per(3000, time.Second), Burst: 300, Partitions: 12, LeaseTTL: 2 * time.Second}
	key := uniqueKey(t)
	const run = time.Second
	var firsts [3]time.Duration
	var counts [3]int
	var wg sync.WaitGroup
	start = time.Now()
	for i := range 3 {
		h, err := NewPartitioned(Options{Client: c, Key: key}, po)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		wg.Go(func() {
			for time.Since(start) < run {
				if h.TryAcquire(1).Granted() {
					if counts[i] == 0 {
						firsts[i] = time.Since(start)
					}
					counts[i]++
				} else {
					time.Sleep(200 * time.Microsecond)
				}
			}
		})
	}
	wg.Wait()
	total := counts[0] + counts[1] + counts[2]
	capacity := 300 + 3000*run.Seconds()
	t.Logf("first grants after %v; %v grants in %v: %.1f%% of burst + rate·t", firsts, counts, run, 100*float64(total)/capacity)
	if first := min(firsts[0], firsts[1], firsts[2]); first > 200*time.Millisecond || first == 0 {
		t.Errorf("the first grant of a new limit came after %v", first)
	}
	if float64(total) < 0.9*capacity {
		t.Errorf("three holders of a new limit got %d grants in %v, %.1f%% of burst + rate·t", total, run, 100*float64(total)/capacity)
	}
}
