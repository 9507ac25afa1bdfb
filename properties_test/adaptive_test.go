package properties_test

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/limiter"
	"pgregory.net/rapid"
)

// The adaptive limiters move their limit with the outcomes reported to
// them. Whatever the outcomes, and whenever they come, each keeps the bound
// of the limit in force at every instant, and never passes its ceiling or
// its floor: these properties draw the limits, the schedules of the callers
// and the outcome of every call.

// adaptiveCall is one step of a caller of the adaptive rate limiter: take
// n permits (waiting in Acquire, or not with TryAcquire), then report o
// after delay; or sleep d.
type adaptiveCall struct {
	try   bool
	n     int
	o     limiter.Outcome
	delay time.Duration // from the grant to the report
	sleep time.Duration // before the call
}

func (c adaptiveCall) String() string {
	verb := "Acquire"
	if c.try {
		verb = "TryAcquire"
	}
	return fmt.Sprintf("sleep %v, %s(%d), %v after %v", c.sleep, verb, c.n, c.o, c.delay)
}

func drawOutcome(t *rapid.T, label string) limiter.Outcome {
	switch die := rapid.IntRange(0, 19).Draw(t, label); {
	case die < 12:
		return limiter.Succeeded
	case die < 17:
		return limiter.Throttled
	case die < 19:
		return limiter.Failed
	}
	return limiter.Unknown
}

func drawRate(t *rapid.T, label string, minN, maxN int) limiter.Rate {
	per := []time.Duration{time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, 1500 * time.Millisecond}
	return limiter.Per(rapid.IntRange(minN, maxN).Draw(t, label+"N"), rapid.SampledFrom(per).Draw(t, label+"Per"))
}

// ratAt is n/d for a Rate, in events per nanosecond.
func ratOf(r limiter.Rate) *big.Rat { return big.NewRat(r.Events(), int64(r.Period())) }

// drawRateOptions draws Floor <= Initial <= Ceiling and a Burst.
func drawRateOptions(t *rapid.T) adaptive.RateOptions {
	var o adaptive.RateOptions
	for {
		o.Floor, o.Ceiling = drawRate(t, "floor", 1, 20), drawRate(t, "ceiling", 1, 2000)
		if ratOf(o.Floor).Cmp(ratOf(o.Ceiling)) <= 0 {
			break
		}
	}
	if rapid.Bool().Draw(t, "hasInitial") {
		// Initial: Floor + k/16 of the way to Ceiling, in nanoseconds.
		k := rapid.IntRange(0, 16).Draw(t, "initial16")
		f, c := ratOf(o.Floor), ratOf(o.Ceiling)
		r := new(big.Rat).Sub(c, f)
		r.Mul(r, big.NewRat(int64(k), 16)).Add(r, f)
		// As events per hour, rounded down but not below Floor.
		per := new(big.Rat).Mul(r, big.NewRat(int64(time.Hour), 1))
		n := new(big.Int).Quo(per.Num(), per.Denom())
		o.Initial = limiter.Per(int(n.Int64()), time.Hour)
		if n.Sign() == 0 || ratOf(o.Initial).Cmp(f) < 0 {
			o.Initial = o.Floor
		}
	}
	o.Burst = rapid.IntRange(0, 4).Draw(t, "burst")
	if rapid.Bool().Draw(t, "queued") {
		o.Queue = limiter.QueueOptions{Limit: rapid.IntRange(0, 6).Draw(t, "queueLimit"), Order: limiter.Order(rapid.IntRange(0, 1).Draw(t, "order"))}
	}
	return o
}

// rateChange is the rate in force from an instant on.
type rateChange struct {
	at   time.Duration
	rate limiter.Rate
}

// TestAdaptiveRateBound: in every interval [a, b] between two grant
// instants, the permits granted are at most Burst plus the integral of the
// rate in force over [a, b]; every rate in force lies within [Floor,
// Ceiling].
func TestAdaptiveRateBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		opts := drawRateOptions(rt)
		burst := max(opts.Burst, 1)
		workers := make([][]adaptiveCall, rapid.IntRange(1, 4).Draw(rt, "workers"))
		unit := time.Duration(int64(opts.Floor.Period()) / max(opts.Floor.Events(), 1))
		for w := range workers {
			calls := rapid.IntRange(1, 60).Draw(rt, "calls")
			for range calls {
				workers[w] = append(workers[w], adaptiveCall{
					try:   rapid.IntRange(0, 3).Draw(rt, "try") == 0,
					n:     rapid.IntRange(1, burst).Draw(rt, "n"),
					o:     drawOutcome(rt, "outcome"),
					delay: drawSpan(rt, unit/4, "delay"),
					sleep: drawSpan(rt, unit/8, "sleep"),
				})
			}
		}
		what := func() string {
			var b strings.Builder
			fmt.Fprintf(&b, "%+v\n", opts)
			for w, calls := range workers {
				fmt.Fprintf(&b, "worker %d: %v\n", w, calls)
			}
			return b.String()
		}
		var (
			grants  []grant
			changes []rateChange
			built   error
		)
		if failure := runBubble(t, what, func(p *panics) {
			grants, changes, built = runAdaptiveRate(p, opts, workers)
		}); failure != "" {
			rt.Fatalf("%s\n%s", failure, what())
		}
		if built != nil {
			rt.Fatalf("NewRateLimiter(%+v): %v", opts, built)
		}
		if err := checkAdaptiveRate(opts, burst, grants, changes); err != nil {
			rt.Fatalf("%v\n%s", err, what())
		}
	})
}

func runAdaptiveRate(p *panics, opts adaptive.RateOptions, workers [][]adaptiveCall) ([]grant, []rateChange, error) {
	start := time.Now()
	lim, err := adaptive.NewRateLimiter(opts)
	if err != nil {
		return nil, nil, err
	}
	defer lim.Close()
	var (
		mu      sync.Mutex
		grants  []grant
		changes = []rateChange{{0, lim.Rate()}}
		wg      sync.WaitGroup
	)
	// report reports o on lease and records the rate in force after it. The
	// rate is read under mu, so the last change recorded at an instant is
	// the rate that holds after it.
	report := func(lease limiter.Lease, o limiter.Outcome) {
		lease.Report(o, 0)
		mu.Lock()
		changes = append(changes, rateChange{time.Since(start), lim.Rate()})
		mu.Unlock()
	}
	for w, calls := range workers {
		p.goSafe(&wg, fmt.Sprintf("worker %d", w), func() {
			for _, c := range calls {
				time.Sleep(c.sleep)
				var lease limiter.Lease
				if c.try {
					lease = lim.TryAcquire(c.n)
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), 3*c.sleep+time.Millisecond)
					lease, _ = lim.Acquire(ctx, c.n)
					cancel()
				}
				if !lease.Granted() {
					continue
				}
				mu.Lock()
				grants = append(grants, grant{at: time.Since(start), n: int64(lease.Permits()), who: fmt.Sprint(w)})
				mu.Unlock()
				if c.delay == 0 {
					report(lease, c.o)
					continue
				}
				p.goSafe(&wg, "report", func() {
					time.Sleep(c.delay)
					report(lease, c.o)
				})
			}
		})
	}
	wg.Wait()
	return grants, changes, nil
}

// checkAdaptiveRate checks the bound over every pair of grant instants
// t_i <= t_j: with P the prefix sums of permits over instants and F(t) the
// integral of the rate in force from 0 to t, P_j - P_{i-1} <= B + F(t_j) -
// F(t_i), that is (P_j - F(t_j)) - (P_{i-1} - F(t_i)) <= B: keep the least
// P_{i-1} - F(t_i). Exact, in rationals.
func checkAdaptiveRate(opts adaptive.RateOptions, burst int, gs []grant, changes []rateChange) error {
	floor, ceil := ratOf(opts.Floor), ratOf(opts.Ceiling)
	for _, c := range changes {
		if r := ratOf(c.rate); r.Cmp(floor) < 0 || r.Cmp(ceil) > 0 {
			return fmt.Errorf("rate %v in force at %v, outside [Floor %v, Ceiling %v]", c.rate, c.at, opts.Floor, opts.Ceiling)
		}
	}
	ins := byInstant(sortGrants(gs))
	// F at each instant, walking the changes (sorted by instant, stable).
	var (
		f      = new(big.Rat) // F(at)
		at     time.Duration
		k      int // changes[:k] are in force by at
		rate   = ratOf(changes[0].rate)
		prefix = new(big.Rat)
		best   *big.Rat
		bestAt int
		b      = big.NewRat(int64(burst), 1)
	)
	advance := func(to time.Duration) {
		for at < to {
			for k < len(changes) && changes[k].at <= at {
				rate = ratOf(changes[k].rate)
				k++
			}
			next := to
			if k < len(changes) && changes[k].at < next {
				next = changes[k].at
			}
			f.Add(f, new(big.Rat).Mul(rate, big.NewRat(int64(next-at), 1)))
			at = next
		}
	}
	for j, in := range ins {
		advance(time.Duration(in.at))
		left := new(big.Rat).Sub(prefix, f) // P_{j-1} - F(t_j): the pair starting at j
		if best == nil || left.Cmp(best) < 0 {
			best, bestAt = left, j
		}
		prefix.Add(prefix, big.NewRat(in.permits, 1))
		right := new(big.Rat).Sub(prefix, f)
		if over := new(big.Rat).Sub(right, best); over.Cmp(b) > 0 {
			return fmt.Errorf("bound broken: from %dns to %dns, the permits granted exceed Burst %d plus the integral of the rates in force by %s; rates: %v",
				ins[bestAt].at, in.at, burst, new(big.Rat).Sub(over, b).FloatString(3), changes)
		}
	}
	// And the ceiling's own bound, with the package's token bucket check.
	return checkTokenBucket(sortGrants(gs), opts.Ceiling.Events(), int64(opts.Ceiling.Period()), int64(burst))
}

// TestAdaptiveConcurrencyBound: one caller takes permits in waves, reports
// outcomes and latencies drawn at random (a drawn share of them growing
// with the calls in flight, as when the other side queues), and gives them
// back; the permits held are never more than the limit in force at their
// grant, and the limit stays within [Floor, Ceiling].
func TestAdaptiveConcurrencyBound(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ceil := rapid.IntRange(1, 60).Draw(rt, "ceiling")
		floor := rapid.IntRange(1, ceil).Draw(rt, "floor")
		opts := adaptive.ConcurrencyOptions{Floor: floor, Initial: rapid.IntRange(floor, ceil).Draw(rt, "initial"), Ceiling: ceil}
		capacity := rapid.IntRange(1, 2*ceil).Draw(rt, "capacity") // where latency starts to rise
		type wave struct {
			take  int               // permits asked for, one per lease
			outs  []limiter.Outcome // the i-th lease reports outs[i % len(outs)]
			sleep time.Duration
		}
		waves := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) wave {
			w := wave{take: rapid.IntRange(0, 2*ceil+2).Draw(t, "take"), sleep: drawSpan(t, time.Millisecond, "sleep")}
			w.outs = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) limiter.Outcome { return drawOutcome(t, "o") }), 1, 4).Draw(t, "outcomes")
			return w
		}), 1, 300).Draw(rt, "waves")
		what := func() string { return fmt.Sprintf("%+v capacity %d\n%+v", opts, capacity, waves) }
		var problem string
		var changes int
		if failure := runBubble(t, what, func(p *panics) {
			lim, err := adaptive.NewConcurrencyLimiter(opts)
			if err != nil {
				problem = err.Error()
				return
			}
			defer lim.Close()
			last := lim.Limit()
			for i, w := range waves {
				var held []limiter.Lease
				for range w.take {
					limit := lim.Limit()
					lease := lim.TryAcquire(1)
					if !lease.Granted() {
						break
					}
					held = append(held, lease)
					if len(held) > limit || lim.InUse() != len(held) {
						problem = fmt.Sprintf("wave %d: %d permits held (InUse %d) under limit %d", i, len(held), lim.InUse(), limit)
						return
					}
				}
				// Latency: 1 ms, rising past capacity as a queue would.
				latency := time.Millisecond * time.Duration(max(len(held), capacity)) / time.Duration(capacity)
				time.Sleep(w.sleep + latency)
				for j, lease := range held {
					lease.Report(w.outs[j%len(w.outs)], latency)
					lease.Release()
				}
				l := lim.Limit()
				if l < floor || l > ceil || lim.InUse() != 0 {
					problem = fmt.Sprintf("wave %d: limit %d (Floor %d, Ceiling %d), InUse %d after every release", i, l, floor, ceil, lim.InUse())
					return
				}
				if l != last {
					changes++
					last = l
				}
			}
		}); failure != "" {
			rt.Fatalf("%s\n%s", failure, what())
		}
		if problem != "" {
			rt.Fatalf("%s\n%s", problem, what())
		}
		concurrencyChanges.Add(int64(changes))
	})
	t.Logf("the limit changed %d times over the runs", concurrencyChanges.Load())
	if concurrencyChanges.Load() == 0 {
		t.Error("the limit never changed: the property tested nothing")
	}
}

var concurrencyChanges atomic.Int64
