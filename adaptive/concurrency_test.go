package adaptive

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestConcurrencyFollowsCapacity is the acceptance scenario of the
// concurrency limiter: the queueing server's capacity steps 100, 40, 200
// workers, 20 s each; past it, calls queue and latency rises.
func TestConcurrencyFollowsCapacity(t *testing.T) {
	for _, tc := range []struct {
		name     string
		arrivals func(capacity int) int
	}{
		{"client", nil}, // unbounded demand waiting in Acquire
		// A server shedding load: calls arrive at 1.5 times what the
		// capacity serves, and those refused are shed.
		{"server", func(capacity int) int { return capacity * 3 / 2 * int(time.Second/serviceTime) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, err := NewConcurrencyLimiter(ConcurrencyOptions{Initial: 10, Ceiling: 1000})
				if err != nil {
					t.Fatal(err)
				}
				defer lim.Close()
				run := runQueueScenario(t, lim, tc.arrivals)
				var begin time.Duration
				for i, st := range steps {
					mean, within, p99 := run.window(begin+5*time.Second, begin+st.length, st.capacity)
					t.Logf("stage %d (%d workers): %.1f in flight on average (%.0f%% of samples within 20%%), p99 latency %v", i, st.capacity, mean, 100*within, p99)
					if mean < 0.8*float64(st.capacity) || mean > 1.2*float64(st.capacity) || within < 0.95 {
						t.Errorf("stage %d: %.1f calls in flight on average, %.0f%% of the time within 20%% of %d: want the mean and 95%% of the time within", i, mean, 100*within, st.capacity)
					}
					if p99 > 2*serviceTime {
						t.Errorf("stage %d: p99 latency %v, over twice the unloaded %v", i, p99, serviceTime)
					}
					begin += st.length
				}
			})
		})
	}
}
