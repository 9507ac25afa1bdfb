package limiter_test

import (
	"testing"
	"testing/synctest"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// bucketWrapper is the Releaser of a limiter outside this package that
// hands out a token bucket's leases to hear their outcomes: it embeds the
// bucket, so that their settlement stays the bucket's.
type bucketWrapper struct {
	*TokenBucket
	reports []Outcome
}

func (w *bucketWrapper) ReleasePermits(int) {}
func (w *bucketWrapper) Spent() bool        { return true }
func (w *bucketWrapper) ReportOutcome(_ int, o Outcome, _ time.Duration) {
	w.reports = append(w.reports, o)
}

// settleRecorder is a Settler that does not embed the limiter.
type settleRecorder struct{ granted, actual int }

func (r *settleRecorder) ReleasePermits(int)                {}
func (r *settleRecorder) SettlePermits(granted, actual int) { r.granted, r.actual = granted, actual }

// TestWithReleaser: a lease given another Releaser keeps its permits and
// the instant of its grant, reports to the new Releaser, and settles with
// the bucket it embeds exactly as the bucket's own lease would: unused
// permits back at once, overuse as a debt.
func TestWithReleaser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, err := NewTokenBucket(TokenBucketOptions{Rate: Per(10, time.Second), Burst: 10})
		if err != nil {
			t.Fatal(err)
		}
		defer tb.Close()
		w := &bucketWrapper{TokenBucket: tb}

		l := tb.TryAcquire(10).WithReleaser(w)
		if !l.Granted() || l.Permits() != 10 || l.Holds() {
			t.Fatalf("rebound lease: granted %v, permits %d, holds %v; want granted, 10, false", l.Granted(), l.Permits(), l.Holds())
		}
		time.Sleep(100 * time.Millisecond) // one permit refilled since the grant
		l = l.Settle(4)
		l.Report(Succeeded, 0)
		if len(w.reports) != 1 || w.reports[0] != Succeeded || l.Permits() != 4 {
			t.Errorf("reports %v, settled permits %d; want [succeeded], 4", w.reports, l.Permits())
		}
		// 6 unused permits back, plus the one refilled.
		if n := free(tb, 20); n != 7 {
			t.Errorf("after settling 10 at 4: %d permits free, want 7", n)
		}

		time.Sleep(time.Second) // full again
		tb.TryAcquire(1).WithReleaser(w).Settle(5)
		if n := free(tb, 20); n != 5 {
			t.Errorf("after settling 1 at 5 on a full bucket: %d permits free, want 5", n)
		}

		r := &settleRecorder{}
		time.Sleep(time.Second)
		tb.TryAcquire(3).WithReleaser(r).Settle(2)
		if r.granted != 3 || r.actual != 2 {
			t.Errorf("a Settler that does not embed the bucket got SettlePermits(%d, %d), want (3, 2)", r.granted, r.actual)
		}

		refused := tb.TryAcquire(20)
		if got := refused.WithReleaser(w); got != refused {
			t.Errorf("a refused lease changed: %+v, want %+v", got, refused)
		}
	})
}
