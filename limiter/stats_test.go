package limiter_test

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// Stats after a scripted sequence of grants, refusals, waits, a cancellation
// and bad input.
func TestStatsScript(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 3, QueueOptions{})
		full := int64(3)
		if a.pacer {
			full = lim.Stats().Available // its open slot grants up to its maximum
		}
		check := func(step string, want Stats) {
			t.Helper()
			if got := lim.Stats(); got != want {
				t.Fatalf("%s: Stats = %+v, want %+v", step, got, want)
			}
		}
		check("new", Stats{Available: full})

		held := lim.TryAcquire(2)
		left := full - 2
		if a.pacer {
			left = 0
		}
		check("TryAcquire(2)", Stats{Available: left, Granted: 1})

		lim.TryAcquire(3)
		check("refused TryAcquire(3)", Stats{Available: left, Granted: 1, Rejected: 1})

		r := newRecorder(t)
		r.acquire(t.Context(), lim, 1, 2, 0)
		ctx, cancel := context.WithCancel(t.Context())
		r.acquire(ctx, lim, 2, 1, 0)
		check("two queued", Stats{Available: left, Queued: 3, Waiters: 2, Granted: 1, Rejected: 1})

		lim.TryAcquire(0) // no barging
		check("barging refused", Stats{Available: left, Queued: 3, Waiters: 2, Granted: 1, Rejected: 2})

		cancel()
		synctestWait()
		check("one canceled", Stats{Available: left, Queued: 2, Waiters: 1, Granted: 1, Rejected: 3})

		lim.TryAcquire(-1)
		lim.Acquire(t.Context(), -1)
		check("bad counts", Stats{Available: left, Queued: 2, Waiters: 1, Granted: 1, Rejected: 5})

		time.Sleep(time.Second)
		held.Release()
		synctestWait()
		if o := r.find(t, 1); o.err != nil {
			t.Fatal(o.err)
		}
		st := lim.Stats()
		if st.Queued != 0 || st.Waiters != 0 || st.Granted != 2 || st.Rejected != 5 {
			t.Fatalf("after the grant: Stats = %+v", st)
		}
		lim.Close()
		lim.TryAcquire(1)
		if st2 := lim.Stats(); st2.Granted != 2 || st2.Rejected != 6 {
			t.Fatalf("after Close: Stats = %+v", st2)
		}
	})
}

// Available follows each algorithm's own accounting over time.
func TestStatsAvailableOverTime(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(4, time.Second), Burst: 4})
		fw, _ := NewFixedWindow(FixedWindowOptions{Limit: 4, Window: time.Second})
		sw, _ := NewSlidingWindow(SlidingWindowOptions{Limit: 4, Window: time.Second, Segments: 2})
		sl, _ := NewSlidingLog(SlidingLogOptions{Limit: 4, Window: time.Second})
		lb, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(4, time.Second)})
		cc, _ := NewConcurrency(ConcurrencyOptions{Limit: 4})
		lims := []testLimiter{tb, fw, sw, sl, lb, cc}
		lbMax := lb.Stats().Available // a pacer's open slot grants up to its maximum
		avail := func() []int64 {
			var out []int64
			for _, l := range lims {
				out = append(out, l.Stats().Available)
			}
			return out
		}
		var leases []Lease
		for _, l := range lims {
			leases = append(leases, l.TryAcquire(3))
		}
		steps := []struct {
			at   time.Duration
			want []int64 // tb fw sw sl lb cc
		}{
			{0, []int64{1, 1, 1, 1, 0, 1}},
			{ms(250), []int64{2, 1, 1, 1, 0, 1}},
			{ms(600), []int64{3, 1, 1, 1, 0, 1}},
			{ms(750), []int64{4, 1, 1, 1, lbMax, 1}},
			{ms(1000), []int64{4, 4, 4, 4, lbMax, 1}},
		}
		start := time.Now()
		for _, s := range steps {
			time.Sleep(s.at - time.Since(start))
			if got := avail(); !slices.Equal(got, s.want) {
				t.Fatalf("at %v: Available = %v, want %v", s.at, got, s.want)
			}
		}
		leases[5].Release()
		if got := cc.Stats().Available; got != 4 {
			t.Fatalf("concurrency Available after release = %d", got)
		}
	})
}
