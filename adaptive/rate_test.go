package adaptive

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
)

// runAcceptance runs the acceptance scenario, in the caller's bubble, with
// calls that take latency, against a limiter from 10/s between 1/s and
// 1000/s.
func runAcceptance(t *testing.T, latency time.Duration) rateRun {
	lim, err := NewRateLimiter(RateOptions{
		Floor:   limiter.Per(1, time.Second),
		Initial: limiter.Per(10, time.Second),
		Ceiling: limiter.Per(1000, time.Second),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	return runRateScenario(t, lim, func() float64 { return perSecond(lim.Rate()) }, latency)
}

// TestRateFollowsCapacity is the acceptance scenario: the model server's
// capacity steps 100/s, 40/s, 200/s, 20 s each, and answers 429 above it;
// unbounded demand waits in Acquire, and calls take 20 ms.
//
// How soon the step up is found depends on where the limiter is in its
// cycle of probes when it comes: at 40/s a probe comes about every 8 s, and
// bench/adaptive's sweep of the step's instant finds it within 1.65 s to
// 7.65 s. Here, 2.2 s. Probing often enough to find every rise from 40/s
// within 5 s would throttle more than the 0.5% of calls allowed at 40/s:
// each failed probe costs a throttled call, and three in 15 s are 0.5% of
// 600 calls.
func TestRateFollowsCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		run := runAcceptance(t, 20*time.Millisecond)

		var begin time.Duration
		for i, st := range steps {
			got, thr, n := run.stats(begin+5*time.Second, begin+st.length)
			t.Logf("stage %d (%d/s): %.1f/s (%.1f%%), %.2f%% of %d throttled", i, st.capacity, got, 100*got/float64(st.capacity), 100*thr, n)
			if got < 0.9*float64(st.capacity) {
				t.Errorf("stage %d: %.1f/s over its last 15 s, under 90%% of %d/s", i, got, st.capacity)
			}
			if thr >= 0.005 {
				t.Errorf("stage %d: %.2f%% of the calls of its last 15 s throttled, not under 0.5%%", i, 100*thr)
			}
			begin += st.length
		}
		_, thr, n := run.stats(0, begin)
		t.Logf("whole run: %.2f%% of %d throttled", 100*thr, n)
		if thr >= 0.02 {
			t.Errorf("%.2f%% of the run's calls throttled, not under 2%%", 100*thr)
		}
		down := run.firstAt(steps[0].length, func(r float64) bool { return r <= float64(steps[1].capacity) })
		up := run.firstAt(steps[0].length+steps[1].length, func(r float64) bool { return r >= 0.9*float64(steps[2].capacity) })
		t.Logf("under 40/s %v after the step down; at 90%% of 200/s %v after the step up", down, up)
		if down < 0 || down > time.Second {
			t.Errorf("rate under the new capacity %v after the step down, want within 1 s", down)
		}
		if up < 0 || up > 5*time.Second {
			t.Errorf("rate at 90%% of the new capacity %v after the step up, want within 5 s", up)
		}
	})
}

// TestRateLongCalls: the acceptance scenario with calls that take 250 ms
// and 500 ms, so that 25 to 100 calls are on their way when the first
// throttle of a probe comes back. Growth past the capacity found waits for
// the outcomes of the calls sent at the rate it grows from, and a throttle
// of a call granted as the rate fell is not taken for a sign that it did
// not fall enough, so the share throttled grows with the latency far less
// than the calls in flight do: over the whole run, 2.8% at 250 ms and 4.2%
// at 500 ms, each stage's last 15 s getting at least 80% of its capacity.
func TestRateLongCalls(t *testing.T) {
	for _, c := range []struct {
		latency   time.Duration
		throttled float64 // the most of the run's calls throttled
	}{{250 * time.Millisecond, 0.035}, {500 * time.Millisecond, 0.06}} {
		t.Run(c.latency.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				run := runAcceptance(t, c.latency)
				var begin time.Duration
				for i, st := range steps {
					got, thr, n := run.stats(begin+5*time.Second, begin+st.length)
					t.Logf("stage %d (%d/s): %.1f/s (%.1f%%), %.2f%% of %d throttled", i, st.capacity, got, 100*got/float64(st.capacity), 100*thr, n)
					if got < 0.8*float64(st.capacity) {
						t.Errorf("stage %d: %.1f/s over its last 15 s, under 80%% of %d/s", i, got, st.capacity)
					}
					begin += st.length
				}
				_, thr, n := run.stats(0, begin)
				t.Logf("whole run: %.2f%% of %d throttled", 100*thr, n)
				if thr >= c.throttled {
					t.Errorf("%.2f%% of the run's calls throttled, not under %.1f%%", 100*thr, 100*c.throttled)
				}
			})
		})
	}
}

// The history of the rate in force answers for any instant: before the
// limiter was made and beyond what it keeps, with the oldest rate it
// knows; after its latest record, with the rate in force.
func TestRateHistory(t *testing.T) {
	var h history
	h.record(0, 100)
	h.record(0.01, 150) // the same slot: its highest
	h.record(1.02, 80)  // 20 slots on: 150 stayed in force until then
	for _, c := range []struct{ t, want float64 }{
		{-3600, 150}, {-0.01, 150}, {0, 150}, {0.5, 150}, {1.0, 150}, {1.02, 150}, {5, 80},
	} {
		if got := h.rateAt(c.t); got != c.want {
			t.Errorf("rateAt(%v) = %v, want %v", c.t, got, c.want)
		}
	}
	h.record(10, 90) // far past the 3.2 s kept
	for _, c := range []struct{ t, want float64 }{{0, 80}, {6.9, 80}, {9.99, 80}, {10, 90}, {11, 90}} {
		if got := h.rateAt(c.t); got != c.want {
			t.Errorf("after 10 s: rateAt(%v) = %v, want %v", c.t, got, c.want)
		}
	}
}

// A success never lowers the rate, also one reported with a latency that
// reaches back to a much lower rate in force (or to before the limiter
// was made), which bounds how far the rate may grow from there.
func TestRateSuccessNeverLowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newRate(t, RateOptions{Floor: perSec(1), Initial: perSec(10), Ceiling: perSec(10000)})
		start := time.Now()
		for time.Since(start) < 3*time.Second { // searching: the rate doubles every 0.4 s
			grant(t, lim).Report(limiter.Succeeded, 0)
		}
		if compareRates(lim.Rate(), perSec(200)) < 0 {
			t.Fatalf("rate %v after 3 s of successes from 10/s, want past 200/s", lim.Rate())
		}
		rate := func() float64 { // the rate the controller holds, which the bucket follows in steps of 1%
			lim.mu.Lock()
			defer lim.mu.Unlock()
			return lim.c.r
		}
		for _, d := range []time.Duration{2500 * time.Millisecond, time.Hour} {
			before := rate()
			grant(t, lim).Report(limiter.Succeeded, d)
			if after := rate(); after < before {
				t.Errorf("a success reported %v after its grant lowered the rate from %.1f/s to %.1f/s", d, before, after)
			}
		}
	})
}
