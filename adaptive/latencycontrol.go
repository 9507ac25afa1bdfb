package adaptive

import "math"

// latencyControl decides the limit of a ConcurrencyLimiter from the
// latencies reported to it, round by round. A round gathers the samples of
// at least one unloaded latency, and enough of them for their mean to be
// known within about 3% (more samples when latencies vary more). Its mean,
// against the unloaded latency, says whether calls queued at the other side.
type latencyControl struct {
	floor, ceil float64
	l           float64 // the limit, unrounded
	found       float64 // the capacity found when calls last queued; 0 while none is known
	base        float64 // the unloaded latency, in seconds; 0 while unknown
	cv2         float64 // the squared coefficient of variation of latencies

	start      float64 // of the round, in seconds since the origin
	sum, sumSq float64 // of the round's latencies
	n          int     // samples in the round
	peak       int     // the most calls in flight seen in the round
	prevPeak   float64 // the previous round's: its calls are those this round's latencies measure

	settle       bool // the next round's calls were granted before a cut: skip it
	back         bool // after the round skipped, go back to the capacity found
	cuts         int  // cuts in a row, with no round between that did not queue
	lastThrottle float64
}

const (
	queueing   = 0.05 // a round whose mean exceeds the unloaded latency by this (or by 4 standard errors of the mean) queued
	below      = 0.95 // after queueing: the limit goes to this share of the capacity found
	fastGrowth = 1.25 // per round, far from the capacity found
	saturated  = 0.9  // a round grows the limit only if this share of it was in use
	precision  = 0.03 // the relative standard error a round's mean aims at
	smoothing  = 0.2  // of the unloaded latency and the variation, per round
	maxCuts    = 3    // cuts in a row before the unloaded latency is taken to have moved
)

func newLatencyControl(floor, initial, ceil int) latencyControl {
	return latencyControl{floor: float64(floor), ceil: float64(ceil), l: float64(initial), cv2: 0.09}
}

// sample records one latency (seconds) with inUse calls in flight; it
// returns the new limit and whether it may have changed.
func (c *latencyControl) sample(now, latency float64, inUse int) (float64, bool) {
	if c.n == 0 {
		c.start = now
	}
	c.sum += latency
	c.sumSq += latency * latency
	c.n++
	c.peak = max(c.peak, inUse)
	if float64(c.n) < min(max(2, c.cv2/(precision*precision)), 1000) || now-c.start < c.base {
		return c.l, false
	}
	m := c.sum / float64(c.n)
	c.cv2 += smoothing * (max(c.sumSq/float64(c.n)/(m*m)-1, 0) - c.cv2)
	r := round{
		mean:  m,
		rate:  float64(c.n) / max(now-c.start, 1e-9),
		peak:  max(float64(c.peak), c.prevPeak),
		queue: max(queueing, 4*math.Sqrt(c.cv2/float64(c.n))),
	}
	c.prevPeak = float64(c.peak)
	c.sum, c.sumSq, c.n, c.peak = 0, 0, 0, 0
	c.decide(r)
	c.l = min(max(c.l, c.floor), c.ceil)
	return c.l, true
}

// round is what a round measured: the mean latency, the calls completed
// per second, the most calls in flight over it and the round before (whose
// calls it saw complete), and how far over the unloaded latency the mean
// must be to say that calls queued (more than the noise of a mean of so
// many samples).
type round struct{ mean, rate, peak, queue float64 }

func (c *latencyControl) decide(r round) {
	switch {
	case c.base == 0:
		c.base = r.mean
		return
	case c.settle:
		c.settle = false
		return
	}
	q := r.mean / c.base
	switch {
	case q > 1+r.queue && c.cuts == maxCuts:
		// Cut after cut, and the calls still wait as long: they do not
		// queue, the other side got slower. That is its unloaded latency.
		c.base, c.cuts = r.mean, 0
		return
	case q > 1+r.queue:
		// Calls queued, so the other side works at its capacity: by
		// Little's law, the calls it completes per second times its
		// unloaded latency. Go under it, so that the queue drains and
		// the next rounds see the unloaded latency again.
		c.found = max(r.rate*c.base, 1)
		c.l = c.found * below
		c.settle, c.back = true, true
		c.cuts++
		return
	case q < 1 || c.found == 0 || r.peak <= c.found*below:
		// Under the capacity found, the mean is the unloaded latency;
		// near it, only a faster round says something of it.
		c.base += smoothing * (r.mean - c.base)
	}
	c.cuts = 0
	c.grow(r, q)
}

// grow raises the limit after a round without queueing.
func (c *latencyControl) grow(r round, q float64) {
	switch {
	case c.back:
		c.back = false
		c.l = max(c.l, c.found) // the queue drained: back to the capacity found
	case r.peak < saturated*math.Floor(c.l):
		// Too few calls to tell whether more would queue.
	case c.found == 0 || c.l < 0.8*c.found:
		c.l *= fastGrowth
	case c.l > 1.2*c.found && r.peak > 1.2*c.found && q < 1+r.queue/2:
		c.found = 0 // well past the capacity found without queueing: it moved
		c.l *= fastGrowth
	default:
		c.l += max(1, math.Sqrt(c.l)/4)
	}
}

// throttled records a call the other side refused for overload after
// latency: the limit falls by a tenth at once, once per unloaded latency
// (or per the throttled call's latency, if longer: the calls in flight with
// it were admitted before the cut).
func (c *latencyControl) throttled(now, latency float64) (float64, bool) {
	if c.lastThrottle > 0 && now-c.lastThrottle < max(c.base, latency) {
		return c.l, false
	}
	c.lastThrottle = now
	c.found = c.l
	c.l = max(c.l*0.9, c.floor)
	return c.l, true
}
