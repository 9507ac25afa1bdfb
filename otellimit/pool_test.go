package otellimit_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
	"github.com/rategate/rategate/pool"
)

// TestPool checks a pool whose task starts pass a wrapped concurrency
// limit of 1: each task's lease is held, and timed, while it runs.
func TestPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t, otellimit.Options{})
		cl := must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1}))
		p := must(pool.New(pool.Options{Workers: 2, Limiter: m.Wrap(cl, "jobs")}))
		for _, d := range []time.Duration{time.Second, 2 * time.Second, 500 * time.Millisecond} {
			if err := p.Go(func(context.Context) error { time.Sleep(d); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		c := collect(t, r)
		c.want(t, "requests", "policy=jobs,result=granted 3")
		c.want(t, "request_lease.duration", "policy=jobs n=3 sum=3.5 le0.5:1 le1:1 le2.5:1")
		c.want(t, "active_request_leases", "policy=jobs 0")
		// The first task starts at once and runs 1s; the second waits
		// for it (1s), then runs 2s; the third takes the first one's
		// worker at 1s and waits for the second until 3s (2s).
		c.want(t, "request.time_in_queue", "policy=jobs,result=granted n=3 sum=3 le0.005:1 le1:1 le2.5:1")
	})
}
