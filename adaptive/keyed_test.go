package adaptive_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
)

// host is a model server with a limit it does not announce: a token bucket
// of its capacity with a burst of one, answering 429 above it.
type host struct {
	name     string
	capacity int // requests per second
	tb       *limiter.TokenBucket

	mu      sync.Mutex
	ok, thr []time.Duration // when each request reached it, by answer
}

func newHost(t *testing.T, name string, capacity int) *host {
	tb, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(capacity, time.Second), Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return &host{name: name, capacity: capacity, tb: tb}
}

// serve records a request at at and answers it: nil, or a 429 error that
// wraps limiter.ErrThrottled.
func (h *host) serve(at time.Duration) error {
	ok := h.tb.TryAcquire(1).Granted()
	h.mu.Lock()
	defer h.mu.Unlock()
	if ok {
		h.ok = append(h.ok, at)
		return nil
	}
	h.thr = append(h.thr, at)
	return fmt.Errorf("GET %s: 429 Too Many Requests: %w", h.name, limiter.ErrThrottled)
}

// over returns the successes per second and the throttled share of the
// requests that reached h in [from, to).
func (h *host) over(from, to time.Duration) (perSec, throttled float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	count := func(ts []time.Duration) (n int) {
		for _, at := range ts {
			if at >= from && at < to {
				n++
			}
		}
		return n
	}
	ok, thr := count(h.ok), count(h.thr)
	return float64(ok) / (to - from).Seconds(), float64(thr) / float64(max(ok+thr, 1))
}

// rateOf returns the rate of a key's RateLimiter from its quota (a bucket
// of Burst 1: one permit per Window).
func rateOf(q limiter.Quota) float64 { return float64(q.Limit) / q.Window.Seconds() }

// TestKeyedRateLimiterPool: a pool with per-host adaptive limiters
// (pool.Options.PerKey from NewKeyedRateLimiter) crawls three hosts whose
// limits it is not told, 4/s, 10/s and 25/s, each request taking 50 ms and
// each host answering 429 above its limit, with 8 requests always waiting
// per host. Every 429 lowers its own host's rate only; successes let it
// climb. Over the run's last 20 s, each host serves at least 90% of its
// capacity, and at most 2% of its requests are throttled: 6% at 4/s, where
// a probe above the capacity comes every 8 s or so (see the package doc),
// once per some 36 calls, and costs one or two throttled calls. Over the
// whole run, with the search from 1/s, at most 8% are throttled.
func TestKeyedRateLimiterPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const run, latency = 30 * time.Second, 50 * time.Millisecond
		hosts, err := adaptive.NewKeyedRateLimiter[string](adaptive.KeyedRateOptions{RateOptions: adaptive.RateOptions{
			Floor:   limiter.Per(1, time.Second),
			Ceiling: limiter.Per(100, time.Second),
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer hosts.Close()
		p, err := pool.New(pool.Options{Workers: 16, PerKey: hosts.For})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		var fetch func(h *host) func(context.Context) error
		fetch = func(h *host) func(context.Context) error {
			return func(ctx context.Context) error {
				time.Sleep(latency / 2)
				err := h.serve(time.Since(start))
				time.Sleep(latency / 2)
				if time.Since(start) < run {
					_ = p.GoKey(ctx, h.name, fetch(h)) // the next page of h
				}
				return err
			}
		}
		servers := []*host{newHost(t, "a.test", 4), newHost(t, "b.test", 10), newHost(t, "c.test", 25)}
		for _, h := range servers {
			for range 8 {
				if err := p.GoKey(t.Context(), h.name, fetch(h)); err != nil {
					t.Fatal(err)
				}
			}
		}
		time.Sleep(run)
		err = p.Wait()
		// Wait returns the tasks' errors: the 429s, and nothing else.
		var joined interface{ Unwrap() []error }
		if errors.As(err, &joined) {
			for _, e := range joined.Unwrap() {
				if !errors.Is(e, limiter.ErrThrottled) {
					t.Errorf("a task failed: %v", e)
				}
			}
		}
		for _, h := range servers {
			got, thr := h.over(run-20*time.Second, run)
			_, thrAll := h.over(0, run)
			share := got / float64(h.capacity)
			rate := rateOf(hosts.Quota(h.name))
			t.Logf("%s: capacity %d/s; last 20 s: %.2f/s served (%.1f%%), %.2f%% throttled; whole run %.2f%% throttled; rate at the end %.2f/s",
				h.name, h.capacity, got, 100*share, 100*thr, 100*thrAll, rate)
			maxThr := 0.02
			if h.capacity < 10 {
				maxThr = 0.06
			}
			if share < 0.9 || thr > maxThr || thrAll > 0.08 {
				t.Errorf("%s (%d/s): %.1f%% of the capacity served with %.2f%% throttled over the last 20 s, %.2f%% throttled in all; want at least 90%%, at most %.0f%%, at most 8%%",
					h.name, h.capacity, 100*share, 100*thr, 100*thrAll, 100*maxThr)
			}
		}
	})
}

// TestKeyedRateLimiterForget: a key keeps the rate it found while it is
// used at least once per Forget; unused for longer, it is evicted, and its
// next use starts again at Initial.
func TestKeyedRateLimiterForget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hosts, err := adaptive.NewKeyedRateLimiter[string](adaptive.KeyedRateOptions{
			RateOptions: adaptive.RateOptions{Floor: limiter.Per(1, time.Second), Initial: limiter.Per(10, time.Second), Ceiling: limiter.Per(100, time.Second)},
			Forget:      5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer hosts.Close()
		lim := hosts.For("a")
		throttle := func() {
			lease, err := lim.Acquire(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			lease.Report(limiter.Throttled, 0)
		}
		throttle() // learned: at most 9/s
		learned := rateOf(hosts.Quota("a"))
		if learned > 9 {
			t.Fatalf("rate %.2f/s after a throttle at 10/s", learned)
		}
		time.Sleep(4 * time.Second)
		if n := hosts.Prune(); n != 0 || rateOf(hosts.Quota("a")) != learned {
			t.Errorf("unused for 4 s of 5: %d keys evicted, rate %.2f/s; want none, %.2f/s", n, rateOf(hosts.Quota("a")), learned)
		}
		time.Sleep(4 * time.Second) // 4 s since the last call (Quota is one)
		if n := hosts.Prune(); n != 0 {
			t.Errorf("used 4 s ago: %d keys evicted, want none", n)
		}
		time.Sleep(5 * time.Second)
		if n := hosts.Prune(); n != 1 || hosts.Len() != 0 {
			t.Errorf("unused for 5 s: %d keys evicted, %d left; want 1, 0", n, hosts.Len())
		}
		if r := rateOf(hosts.Quota("a")); r != 10 {
			t.Errorf("a key used again after it was forgotten: rate %.2f/s, want Initial, 10/s", r)
		}
	})
}

func TestKeyedRateLimiterOptions(t *testing.T) {
	for _, tc := range []struct {
		opts  adaptive.KeyedRateOptions
		field string
	}{
		{adaptive.KeyedRateOptions{RateOptions: adaptive.RateOptions{Ceiling: limiter.Per(10, time.Second)}}, "Floor"},
		{adaptive.KeyedRateOptions{RateOptions: adaptive.RateOptions{Floor: limiter.Per(10, time.Second), Ceiling: limiter.Per(1, time.Second)}}, "Floor"},
		{adaptive.KeyedRateOptions{RateOptions: adaptive.RateOptions{Floor: limiter.Per(1, time.Second), Ceiling: limiter.Per(10, time.Second)}, Forget: -time.Second}, "Forget"},
	} {
		_, err := adaptive.NewKeyedRateLimiter[string](tc.opts)
		var oe *limiter.OptionError
		if !errors.As(err, &oe) || oe.Field != tc.field {
			t.Errorf("%+v: %v, want an OptionError naming %s", tc.opts, err, tc.field)
		}
	}
}
