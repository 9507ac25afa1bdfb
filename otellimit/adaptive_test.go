package otellimit_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
)

// The rate and limit gauges follow adaptive limiters as they move: the rate
// falls with a throttle reported through the wrapper, the limit with a
// throttle of the concurrency limiter; each reported outcome is counted.
func TestAdaptiveGauges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t, otellimit.Options{})
		rl := must(adaptive.NewRateLimiter(adaptive.RateOptions{
			Floor: limiter.Per(1, time.Second), Initial: limiter.Per(100, time.Second), Ceiling: limiter.Per(1000, time.Second),
		}))
		defer rl.Close()
		cl := must(adaptive.NewConcurrencyLimiter(adaptive.ConcurrencyOptions{Initial: 20, Ceiling: 100}))
		defer cl.Close()
		wr, wc := m.Wrap(rl, "upstream"), m.Wrap(cl, "workers")

		c := collect(t, r)
		c.want(t, "rate", "policy=upstream 100")
		c.want(t, "limit", "policy=workers 20")

		l := wr.TryAcquire(1)
		if !l.Granted() {
			t.Fatal(l.Err())
		}
		l.Report(limiter.Throttled, time.Millisecond)
		lc := wc.TryAcquire(1)
		if !lc.Granted() {
			t.Fatal(lc.Err())
		}
		lc.Report(limiter.Throttled, time.Millisecond)
		lc.Release()

		rate := float64(rl.Rate().Events()) / rl.Rate().Period().Seconds()
		if rate >= 100 || cl.Limit() >= 20 {
			t.Fatalf("after a throttle each: rate %.0f/s, limit %d; want both lower", rate, cl.Limit())
		}
		c = collect(t, r)
		c.want(t, "rate", fmt.Sprintf("policy=upstream %g", rate))
		c.want(t, "limit", fmt.Sprintf("policy=workers %d", cl.Limit()))
		c.want(t, "outcomes", "outcome=throttled,policy=workers 1")
	})
}
