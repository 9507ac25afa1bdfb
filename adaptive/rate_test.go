package adaptive

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
)

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
		lim, err := NewRateLimiter(RateOptions{
			Floor:   limiter.Per(1, time.Second),
			Initial: limiter.Per(10, time.Second),
			Ceiling: limiter.Per(1000, time.Second),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer lim.Close()
		run := runRateScenario(t, lim, func() float64 { return perSecond(lim.Rate()) }, 20*time.Millisecond)

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
