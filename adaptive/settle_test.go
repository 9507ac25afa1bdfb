package adaptive

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
)

// TestRateSettleGivesBack: a lease settled at once for less than it took
// gives the unused permits back to the bucket, and one settled for more
// books the overuse as a debt that later grants pay.
func TestRateSettleGivesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := newRate(t, RateOptions{Floor: perSec(10), Ceiling: perSec(10), Burst: 10})
		time.Sleep(time.Minute) // the settlement counts from the grant, not from the limiter's start
		l := lim.TryAcquire(10).Settle(3)
		if l.Permits() != 3 {
			t.Errorf("settled lease holds %d permits, want 3", l.Permits())
		}
		if n := freePermits(lim, 20); n != 7 {
			t.Errorf("after settling 10 at 3: %d permits free, want the 7 unused", n)
		}
		time.Sleep(time.Second) // full again
		lim.TryAcquire(2).Settle(9)
		if n := freePermits(lim, 20); n != 1 {
			t.Errorf("after settling 2 at 9 on a full bucket of 10: %d permits free, want 1", n)
		}
		if l := lim.TryAcquire(1); l.Granted() || l.RetryAfter() != 100*time.Millisecond {
			t.Errorf("in debt: granted %v, retry after %v; want refused, 100ms", l.Granted(), l.RetryAfter())
		}
	})
}

func freePermits(lim limiter.Limiter, most int) int {
	n := 0
	for n < most && lim.TryAcquire(1).Granted() {
		n++
	}
	return n
}

// TestRateSettleBound: callers take permits on estimates, settle each lease
// with its actual cost (from none to twice the estimate) at once, and report
// outcomes that move the rate. Counted at their actual costs, the grants
// keep the bucket's bound in every interval [s, g] ending with a grant:
// Burst plus the integral of the rates in force over it.
func TestRateSettleBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const burst = 8
		lim := newRate(t, RateOptions{Floor: perSec(5), Initial: perSec(20), Ceiling: perSec(100), Burst: burst})
		rnd := rand.New(rand.NewPCG(1, 2))
		start := time.Now()
		type change struct {
			at   time.Duration
			rate float64
		}
		rates := []change{{0, perSecond(lim.Rate())}}
		var grants []struct {
			at        time.Duration
			n, actual int
		}
		over, under := 0, 0
		for range 3000 {
			time.Sleep(time.Duration(rnd.IntN(40)) * time.Millisecond)
			n := 1 + rnd.IntN(burst)
			lease, err := lim.Acquire(t.Context(), n)
			if err != nil {
				t.Fatal(err)
			}
			actual := rnd.IntN(2*n + 1)
			if actual > n {
				over++
			} else if actual < n {
				under++
			}
			grants = append(grants, struct {
				at        time.Duration
				n, actual int
			}{time.Since(start), n, actual})
			lease = lease.Settle(actual)
			o := limiter.Succeeded
			if rnd.IntN(50) == 0 {
				o = limiter.Throttled
			}
			lease.Report(o, 0)
			if r := perSecond(lim.Rate()); r != rates[len(rates)-1].rate {
				rates = append(rates, change{time.Since(start), r})
			}
		}
		// integral returns the permits the rates in force allowed over [0, at].
		k, acc := 0, 0.0
		integral := func(at time.Duration) float64 {
			for k+1 < len(rates) && rates[k+1].at <= at {
				acc += rates[k].rate * (rates[k+1].at - rates[k].at).Seconds()
				k++
			}
			return acc + rates[k].rate*(at-rates[k].at).Seconds()
		}
		// For each grant g, the worst interval [s, g] maximises
		// integral(s) - (the actual costs granted before s); g itself
		// counts at its permits, as it is granted before it is settled.
		best, sum, worst := 0.0, 0, 0.0
		for _, g := range grants {
			f := integral(g.at)
			best = max(best, f-float64(sum)) // s = g.at
			worst = max(worst, float64(sum+g.n)-f+best-burst)
			sum += g.actual
		}
		if worst > 1e-6 {
			t.Errorf("the grants' actual costs exceed Burst + the integral of the rates in force by %.3f permits", worst)
		}
		if len(rates) < 10 || over < 100 || under < 100 {
			t.Errorf("a weak test: %d rates in force, %d leases overused, %d underused", len(rates), over, under)
		}
		t.Logf("%d grants over %v; %d rates in force, from %.1f/s to %.1f/s; worst margin %.3f permits", len(grants), grants[len(grants)-1].at, len(rates), rates[0].rate, rates[len(rates)-1].rate, worst)
	})
}
