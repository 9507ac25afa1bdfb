package adaptive

import "math"

// rateControl decides the rate of a RateLimiter from the outcomes reported
// to it. Its curves advance with the successes, each worth permits/rate
// seconds of the rate used ("used time"), and only while the caller uses at
// least a quarter of the rate: an idle or lightly used limiter does not
// climb.
type rateControl struct {
	floor, ceil float64 // events per second
	r           float64 // the rate in force
	w           float64 // the last capacity found; 0 while none is known
	k           float64 // used seconds from a decrease back to w
	tau         float64 // used seconds since the last decrease
	search      bool    // climbing exponentially: no capacity known above r
	epoch       uint64  // incremented by every decrease
	succ, thr   int     // outcomes of leases granted in the current epoch
	recent      window  // successes in the last second
	since       float64 // when the current epoch began
	epochOK     float64 // successes reported since
	streak      int     // decreases in a row, each soon after the last
}

// The shape of the rate over time (see the package documentation).
const (
	backoff = 0.9 // after a throttle: the rate goes to backoff × the capacity found
	// From a decrease back to the capacity found takes the time of holdFor
	// successes at it, within [minHold, maxHold] seconds. Each probe above
	// the capacity that fails costs about one throttled call, so probes
	// come once per holdFor successes or so: about 0.3% of the calls.
	holdFor     = 300.0
	minHold     = 1.0
	maxHold     = 8.0
	probeGrowth = 0.1 // above w: rate = w·(1 + probeGrowth·t³), t in used seconds
	searchAbove = 0.3 // past w·(1+searchAbove) without a throttle, the capacity moved
	doubling    = 0.4 // used seconds per doubling while searching
	calm        = 20  // successes in an epoch that make a throttle a fresh event
	fewCalls    = 25  // successes in a second too few to count the rate within 4%
	share       = 10  // outcomes in an epoch that tell what share gets through
	// The rate grows only while successes come at least at this share of
	// it (a quarter: while searching, the last second's successes lag the
	// doubling rate by half).
	used = 0.25
)

func newRateControl(floor, initial, ceil float64) rateControl {
	return rateControl{floor: floor, ceil: ceil, r: initial, search: true}
}

// succeeded records permits that went through; it returns the new rate.
func (c *rateControl) succeeded(now float64, permits int, epoch uint64) float64 {
	c.recent.add(now, permits)
	c.epochOK += float64(permits)
	if epoch == c.epoch {
		c.succ++
	}
	if c.r >= c.ceil || c.delivered(now) < used*c.r {
		// At the ceiling, nothing to climb to; under used, the caller
		// does not use the rate: whether more would pass is not being
		// tested.
		return c.r
	}
	dt := float64(permits) / c.r
	c.tau += dt
	switch {
	case c.search:
		c.r *= math.Exp2(dt / doubling)
	case c.tau < c.k:
		// Concave: back to w quickly, then gently.
		x := 1 - c.tau/c.k
		c.r = c.w * (1 - (1-backoff)*x*x*x)
	default:
		x := c.tau - c.k
		c.r = c.w * (1 + probeGrowth*x*x*x)
		if c.r > c.w*(1+searchAbove) {
			c.search = true
		}
	}
	c.r = min(max(c.r, c.floor), c.ceil)
	return c.r
}

// throttled records a throttle of a lease granted in epoch; it returns the
// new rate and whether it changed.
func (c *rateControl) throttled(now float64, epoch uint64) (float64, bool) {
	if epoch != c.epoch {
		return c.r, false // granted before the last decrease: already answered
	}
	c.thr++
	n := c.succ + c.thr
	switch {
	case c.succ >= calm || now-c.since >= minHold:
		// A fresh event after a calm spell (enough successes, or, at low
		// rates, the time the rate takes to return after a decrease):
		// the rate went past the capacity, which is at most what got
		// through lately.
		c.streak = 0
		switch got := c.seen(now); {
		case c.search:
			c.w = c.r * backoff // the search overshoots; what follows corrects it
		case got > 0:
			c.w = min(c.r, got)
		default:
			c.w = c.r
		}
	case n < share:
		// The last decrease was not enough: each one in a row cuts deeper.
		c.streak++
		c.w = c.r * math.Pow(backoff, float64(c.streak))
	default:
		// The last decrease was far from enough: the share of this
		// epoch's calls that got through says how far.
		c.streak++
		c.w = c.r * max(0.5, float64(c.succ)/float64(n))
	}
	c.r = max(c.w*backoff, c.floor)
	c.w = max(c.w, c.r)
	c.k = min(max(minHold, holdFor/c.w), maxHold)
	if c.streak > 0 {
		c.k = minHold // back to w quickly: w is a bound, not a capacity found
	}
	// Start the concave curve where r now is.
	c.tau = c.k * (1 - math.Cbrt((1-c.r/c.w)/(1-backoff)))
	c.search = false
	c.epoch++
	c.succ, c.thr = 0, 0
	c.since, c.epochOK = now, 0
	return c.r, true
}

// seen returns the successes per second the other side let through
// lately, as delivered counts them, except that a count of fewer than
// fewCalls successes over the last second is taken at its most: the count
// plus one, over the time the count spans (0.9 s to 1 s). A count of
// evenly spaced calls is one short at worst, which is a large share of a
// few: at 4 calls a second, a quarter.
func (c *rateControl) seen(now float64) float64 {
	if now-c.since < 1 {
		return c.delivered(now)
	}
	sum, span := c.recent.count(now)
	if sum >= fewCalls {
		return sum
	}
	return (sum + 1) / span
}

// delivered returns the successes per second reported over the last
// second, or since the last decrease if that is sooner: what the other
// side took at the rate in force.
func (c *rateControl) delivered(now float64) float64 {
	if age := now - c.since; age < 1 {
		if age <= 0 {
			return 0
		}
		return c.epochOK / age
	}
	return c.recent.rate(now)
}

// window counts successes in the last second, in slots of 100 ms.
type window struct {
	slot [10]float64
	at   int64 // the slot index (in 100 ms since the origin) of the latest add
}

func (w *window) advance(now float64) int64 {
	i := int64(now * 10)
	if d := i - w.at; d > 0 {
		for j := range min(d, 10) {
			w.slot[(w.at+1+j)%10] = 0
		}
		w.at = i
	}
	return i
}

func (w *window) add(now float64, n int) {
	i := w.advance(now)
	if i >= w.at-9 {
		w.slot[i%10] += float64(n)
	}
}

// rate returns the successes per second over the last second.
func (w *window) rate(now float64) float64 {
	sum, _ := w.count(now)
	return sum
}

// count returns the successes counted in the slots and the time they span:
// from the start of the oldest to now, 0.9 s to 1 s.
func (w *window) count(now float64) (sum, span float64) {
	i := w.advance(now)
	for _, v := range w.slot {
		sum += v
	}
	return sum, max(now-float64(i-9)/10, 0.9)
}
