package properties_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
	"pgregory.net/rapid"
)

func TestLivenessTokenBucket(t *testing.T)   { t.Parallel(); testLiveness(t, tokenBucket) }
func TestLivenessLeakyBucket(t *testing.T)   { t.Parallel(); testLiveness(t, leakyBucket) }
func TestLivenessFixedWindow(t *testing.T)   { t.Parallel(); testLiveness(t, fixedWindow) }
func TestLivenessSlidingWindow(t *testing.T) { t.Parallel(); testLiveness(t, slidingWindow) }
func TestLivenessSlidingLog(t *testing.T)    { t.Parallel(); testLiveness(t, slidingLog) }
func TestLivenessConcurrency(t *testing.T)   { t.Parallel(); testLiveness(t, concurrency) }

// testLiveness saturates a limiter with Acquire(1) from several goroutines
// for a run of length D and checks that the grants in [0, D] reach 99% of
// what the bound allows (and, again, that the bound holds).
func testLiveness(t *testing.T, k kind) {
	rapid.Check(t, func(rt *rapid.T) {
		c := drawConfig(rt, k, drawOpts{noQueueCap: true})
		if (k == tokenBucket || k == leakyBucket) && int64(c.events) > int64(c.per) {
			// Keep runs to hundreds of grants: at most one event a nanosecond.
			c.per = time.Duration(c.events)
		}
		workers := rapid.IntRange(1, 8).Draw(rt, "workers")
		hold := time.Duration(0)
		if k == concurrency {
			hold = drawPeriod(rt, "hold")
		}
		D := drawRunLength(rt, c, hold)
		sat := saturate(t, func() (limiter.Limiter, error) { return c.build() }, c, workers, D, hold)
		if sat.failure != "" {
			rt.Fatalf("%v: the run did not complete: %s", c, sat.failure)
		}
		if err := checkSaturation(c, sat, workers, D, hold); err != nil {
			rt.Fatalf("%v, %d workers, run length %v=%dns, hold %v\n%v", c, workers, D, int64(D), hold, err)
		}
	})
}

// drawRunLength draws a run of several windows (a few hundred grants at most).
func drawRunLength(t *rapid.T, c config, hold time.Duration) time.Duration {
	switch c.kind {
	case tokenBucket, leakyBucket:
		n, d := c.rate()
		m := rapid.Int64Range(1, 300).Draw(t, "intervals")
		return time.Duration(mulDivFloor(m, d, n) + rapid.Int64Range(0, ceilDiv(d, n)).Draw(t, "jitter"))
	case concurrency:
		m := rapid.Int64Range(2, 40).Draw(t, "holds")
		return time.Duration(mul(m, int64(hold)) + rapid.Int64Range(0, int64(hold)).Draw(t, "jitter"))
	}
	m := rapid.Int64Range(2, 12).Draw(t, "windows")
	return time.Duration(mul(m, int64(c.window)) + rapid.Int64Range(0, int64(c.window)).Draw(t, "jitter"))
}

type saturation struct {
	failure string
	grants  []grant
	errs    []string // errors other than the run's deadline
}

// saturate runs `workers` goroutines that call Acquire(1) back to back (a
// concurrency lease is held for `hold`) until their first grant after D;
// the context ends at D+1ns.
func saturate(t *testing.T, build func() (limiter.Limiter, error), c config, workers int, D, hold time.Duration) *saturation {
	s := &saturation{}
	what := func() string {
		return fmt.Sprintf("%v, %d workers, run length %dns, hold %dns", c, workers, int64(D), int64(hold))
	}
	s.failure = runBubble(t, what, func(p *panics) {
		start := time.Now()
		lim, err := build()
		if err != nil {
			s.errs = append(s.errs, err.Error())
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), D+1)
		defer cancel()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range workers {
			p.goSafe(&wg, fmt.Sprintf("worker %d", w), func() {
				for i := 0; ; i++ {
					l, err := lim.Acquire(ctx, 1)
					at := time.Since(start)
					if err != nil {
						if !errors.Is(err, context.DeadlineExceeded) {
							mu.Lock()
							s.errs = append(s.errs, fmt.Sprintf("worker %d at %dns: %v", w, int64(at), err))
							mu.Unlock()
						}
						return
					}
					mu.Lock()
					s.grants = append(s.grants, grant{at: at, n: 1, who: fmt.Sprintf("w%d.%d", w, i)})
					mu.Unlock()
					if hold > 0 {
						time.Sleep(hold)
					}
					l.Release()
					if at > D {
						return
					}
				}
			})
		}
		wg.Wait()
		if cl, ok := lim.(interface{ Close() error }); ok {
			cl.Close()
		}
	})
	return s
}

func checkSaturation(c config, s *saturation, workers int, D, hold time.Duration) error {
	if len(s.errs) > 0 {
		return fmt.Errorf("unexpected errors: %v", s.errs)
	}
	if c.kind != concurrency {
		if err := checkSafety(c, s.grants); err != nil {
			return err
		}
	}
	var got int64
	for _, g := range s.grants {
		if g.at <= D {
			got++
		}
	}
	want := maxUnitGrants(c, D, workers, hold)
	if err := checkLiveness(got, want); err != nil {
		gs := sortGrants(s.grants)
		return fmt.Errorf("%w\ngrants: %s", err, fmtGrants(gs, 60))
	}
	return nil
}

// ---- the liveness check must catch a limiter that grants too little ----

// neverGrants is a limiter that never grants.
type neverGrants struct{}

func (neverGrants) TryAcquire(int) limiter.Lease { return limiter.Denied(limiter.ErrLimited, 0) }
func (neverGrants) Acquire(ctx context.Context, _ int) (limiter.Lease, error) {
	<-ctx.Done()
	return limiter.Denied(ctx.Err(), 0), ctx.Err()
}

func TestLivenessCheckDetectsStarvation(t *testing.T) {
	t.Parallel()
	configs := []config{
		{kind: tokenBucket, events: 10, per: time.Second, burst: 5},
		{kind: leakyBucket, events: 3, per: time.Second},
		{kind: fixedWindow, limit: 4, window: time.Second},
		{kind: slidingWindow, limit: 4, window: time.Second, segments: 3},
		{kind: slidingLog, limit: 4, window: 1500 * time.Millisecond},
		{kind: concurrency, limit: 4},
	}
	const D, hold, workers = 10 * time.Second, 100 * time.Millisecond, 6
	for _, c := range configs {
		t.Run(c.kind.String(), func(t *testing.T) {
			// The real limiter passes.
			s := saturate(t, func() (limiter.Limiter, error) { return c.build() }, c, workers, D, hold)
			if err := checkSaturation(c, s, workers, D, hold); err != nil || s.failure != "" {
				t.Fatalf("%v: %v %s", c, err, s.failure)
			}
			// A limiter that never grants fails.
			s = saturate(t, func() (limiter.Limiter, error) { return neverGrants{}, nil }, c, workers, D, hold)
			if err := checkSaturation(c, s, workers, D, hold); err == nil {
				t.Fatalf("%v: a limiter that never grants passed the liveness check", c)
			}
			// One that grants at half the bound fails too.
			half := c
			half.events, half.burst, half.limit = max(c.events/2, 1), max(c.burst/2, 1), max(c.limit/2, 1)
			if c.kind == leakyBucket {
				half.per = 2 * c.per
			}
			s = saturate(t, func() (limiter.Limiter, error) { return half.build() }, c, workers, D, hold)
			if err := checkSaturation(c, s, workers, D, hold); err == nil {
				t.Fatalf("%v: a limiter granting at half the bound passed the liveness check", c)
			}
		})
	}
}

// TestSafetyChecksDetectViolations feeds hand-made grant logs that break
// each bound by one permit or one nanosecond, and the same logs shifted to
// just keep it.
func TestSafetyChecksDetectViolations(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	g := func(at time.Duration, n int64) grant { return grant{at: at, n: n, who: "g"} }
	cases := []struct {
		c       config
		bad, ok []grant
	}{
		// 2 + 1/s * 500ms = 2.5 permits allowed in [0, 500ms].
		{config{kind: tokenBucket, events: 1, per: time.Second, burst: 2},
			[]grant{g(0, 2), g(500*ms, 1)}, []grant{g(0, 2), g(1000*ms, 1)}},
		// 3/s: a permit every 333333333.3ns.
		{config{kind: tokenBucket, events: 3, per: time.Second, burst: 1},
			[]grant{g(0, 1), g(333333333, 1)}, []grant{g(0, 1), g(333333334, 1)}},
		{config{kind: leakyBucket, events: 3, per: time.Second},
			[]grant{g(0, 2), g(666666666, 1)}, []grant{g(0, 2), g(666666667, 1)}},
		{config{kind: fixedWindow, limit: 1, window: 10},
			[]grant{g(0, 1), g(9, 1)}, []grant{g(9, 1), g(10, 1)}},
		// Boundaries at ceil(i*10/3): 0, 4, 7, 10, 14.
		{config{kind: slidingWindow, limit: 1, window: 10, segments: 3},
			[]grant{g(3, 1), g(9, 1)}, []grant{g(3, 1), g(10, 1)}},
		{config{kind: slidingWindow, limit: 2, window: 10, segments: 3},
			[]grant{g(0, 1), g(4, 1), g(9, 1)}, []grant{g(0, 1), g(4, 1), g(10, 1)}},
		{config{kind: slidingLog, limit: 2, window: 10},
			[]grant{g(5, 1), g(6, 1), g(14, 1)}, []grant{g(5, 1), g(6, 1), g(15, 1)}},
	}
	for _, tc := range cases {
		if err := checkSafety(tc.c, tc.bad); err == nil {
			t.Errorf("%v: violation %v not detected", tc.c, tc.bad)
		}
		if err := checkSafety(tc.c, tc.ok); err != nil {
			t.Errorf("%v: %v reported: %v", tc.c, tc.ok, err)
		}
	}
	// The greedy token-bucket reference: 2 at 0, then one a second.
	if got := greedyTokenBucket(1, int64(time.Second), 2, int64(3*time.Second)); got != 5 {
		t.Errorf("greedyTokenBucket = %d, want 5", got)
	}
	// Burst 1 at 2 per 3ns: integer instants 0, 2, 4, ... (1.5ns apart is impossible).
	if got := greedyTokenBucket(2, 3, 1, 10); got != 6 {
		t.Errorf("greedyTokenBucket = %d, want 6", got)
	}
}
