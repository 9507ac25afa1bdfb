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
	past        history // the rate in force over the last seconds
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
	// Above the capacity found, the rate is at most probeLead above the
	// rate in force when the lease whose success is reported was granted
	// (its latency ago), or probeCalls calls more per round trip, and
	// while searching at most searchLead above it, or searchCalls calls
	// more: growth waits for the outcomes of the calls sent at the rate it
	// grows from, so that few calls go out past the capacity before a
	// throttle can say so, also when calls take long.
	probeLead   = 0.03
	probeCalls  = 0.3
	searchLead  = 0.25
	searchCalls = 1.0
	// A throttle reported within tail round trips of a decrease (its
	// latency) is of a call that reached the other side with the calls
	// granted before the decrease, and says nothing of the rate after it.
	tail = 1.1
)

func newRateControl(floor, initial, ceil float64) rateControl {
	c := rateControl{floor: floor, ceil: ceil, search: true}
	c.set(0, initial)
	return c
}

// succeeded records permits that went through, latency seconds after their
// grant (0 if not known); it returns the new rate.
func (c *rateControl) succeeded(now float64, permits int, epoch uint64, latency float64) float64 {
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
	// A success never lowers the rate: the lead bounds only how far it
	// grows.
	dt := float64(permits) / c.r
	c.tau += dt
	switch {
	case c.search:
		c.r = max(c.r, min(c.r*math.Exp2(dt/doubling), c.lead(now, latency, searchLead, searchCalls)))
	case c.tau < c.k:
		// Concave: back to w quickly, then gently.
		x := 1 - c.tau/c.k
		c.r = c.w * (1 - (1-backoff)*x*x*x)
	default:
		x := c.tau - c.k
		c.r = max(c.r, min(c.w*(1+probeGrowth*x*x*x), c.lead(now, latency, probeLead, probeCalls)))
		if c.r > c.w*(1+searchAbove) {
			c.search = true
		}
	}
	c.set(now, min(max(c.r, c.floor), c.ceil))
	return c.r
}

// lead returns the most the rate may be now: share above the rate in force
// latency seconds ago, when the lease reported was granted, or calls more
// calls per round trip if that is more (a lead of a fraction of a call is
// no risk, and would hold back a rate of few calls a round trip). A latency
// of 0 sets no bound.
func (c *rateControl) lead(now, latency, share, calls float64) float64 {
	if latency <= 0 {
		return math.Inf(1)
	}
	p := c.past.rateAt(now - latency)
	return p + max(p*share, calls/latency)
}

// set makes r the rate in force from now.
func (c *rateControl) set(now, r float64) {
	c.r = r
	c.past.record(now, r)
}

// throttled records a throttle of a lease granted in epoch; it returns the
// new rate and whether it changed.
func (c *rateControl) throttled(now float64, epoch uint64, latency float64) (float64, bool) {
	switch {
	case epoch != c.epoch:
		return c.r, false // granted before the last decrease: already answered
	case c.epoch > 0 && now-c.since < tail*latency:
		// Granted just after the last decrease, the call reached the other
		// side among the last calls granted before it, which still find
		// its capacity spent.
		return c.r, false
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
	c.set(now, max(c.w*backoff, c.floor))
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

// history keeps the rate in force over the last historySlots slots of
// historySlot seconds: for each slot, the highest rate in force during it.
type history struct {
	slot [historySlots]float64
	last int64   // the index of the latest slot recorded
	cur  float64 // the rate in force since the latest record
}

const (
	historySlots = 64
	historySlot  = 0.05 // seconds: 3.2 s in all
)

// record notes that r is in force from now on.
func (h *history) record(now, r float64) {
	i := int64(now / historySlot)
	switch {
	case h.cur == 0: // the first record
		for j := range h.slot {
			h.slot[j] = r
		}
		h.last = i
	case i <= h.last:
		h.slot[h.last%historySlots] = max(h.slot[h.last%historySlots], r)
	default:
		for j := h.last + 1; j < i && j <= h.last+historySlots; j++ {
			h.slot[j%historySlots] = h.cur // it stayed in force
		}
		h.slot[i%historySlots] = max(h.cur, r) // both were in force in slot i
		h.last = i
	}
	h.cur = r
}

// rateAt returns the highest rate in force in the slot of t; for a t before
// the history kept, its oldest slot's, and after its latest, the rate in
// force.
func (h *history) rateAt(t float64) float64 {
	i := int64(t / historySlot)
	if i > h.last {
		return h.cur
	}
	return h.slot[max(i, h.last-historySlots+1, 0)%historySlots]
}
