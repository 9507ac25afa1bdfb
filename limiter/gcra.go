package limiter

import (
	"math"
	"sync/atomic"
)

// gcra is the generic cell rate algorithm shared by TokenBucket and
// LeakyBucket. Its whole state is one word, the theoretical arrival time
// (tat), so TryAcquire is one compare-and-swap.
//
// Time is kept exactly in scaled units: with the rate reduced to n events per
// d nanoseconds, one nanosecond is n units and one permit costs d units, so
// no rounding ever drifts. Scaled time is counted from cfg.base; when it
// nears overflow (after 2^61/n ns: never for n == 1, seconds for an odd rate
// of a billion a second) the state is rebased under the lock.
//
// Changing the configuration (rate, burst, rebase) swaps tat to the locked
// sentinel, stores the new configuration, then stores the converted tat. The
// fast path reads tat before cfg, so a compare-and-swap that succeeds was
// computed with the configuration that goes with the value it replaced.
type gcra struct {
	tat *atomic.Int64 // the limiter's base.word, beside its counters
	cfg atomic.Pointer[gcraConfig]

	// A Chain decides under base.mu with tat swapped for the locked
	// sentinel (so lock-free fast paths wait on the mutex), taking from
	// pending; settle publishes pending, or saved when every take was undone.
	held           bool
	saved, pending int64
	takes          int
}

type gcraConfig struct {
	n, d     int64 // rate: n permits per d ns, in lowest terms
	base     int64 // ns since origin at which scaled time is 0
	burst    int64 // bucket capacity in permits (1 for the pacer)
	tol      int64 // scaled units of debt allowed after a grant: burst*d; 0 for the pacer
	maxDelta int64 // rebase once now-base exceeds this
	maxReq   int64 // most permits in one request
	pacer    bool
	rate     Rate
}

const (
	tatLocked    = math.MinInt64
	scaledLimit  = int64(1) << 60 // bound on tol and on one request's cost
	scaledWindow = int64(1) << 61 // bound on now's scaled offset from base
)

const (
	takeOK = iota
	takeLimited
	takeSlow
	takeExceeds
)

func newGCRAConfig(rate Rate, burst int64, pacer bool) (*gcraConfig, error) {
	if err := rate.validate("Rate"); err != nil {
		return nil, err
	}
	n, d := rate.reduced()
	c := &gcraConfig{n: n, d: d, burst: burst, rate: rate, pacer: pacer}
	if pacer {
		c.maxReq = scaledLimit / d
		if c.maxReq < 1 {
			return nil, optErr("Rate", "period %v is too long to pace", rate.per)
		}
	} else {
		if burst <= 0 {
			return nil, optErr("Burst", "must be positive, got %d", burst)
		}
		if burst > scaledLimit/d {
			return nil, optErr("Burst", "%d permits at %v overflows the bucket's arithmetic", burst, rate)
		}
		c.tol = burst * d
		c.maxReq = burst
	}
	c.maxDelta = scaledWindow / n
	return c, nil
}

// tryTake attempts to take k permits at now without a lock.
func (g *gcra) tryTake(now, k int64) (status int, retry int64) {
	for {
		tat := g.tat.Load()
		if tat == tatLocked {
			return takeSlow, 0
		}
		c := g.cfg.Load()
		if k > c.maxReq {
			return takeExceeds, 0
		}
		delta := now - c.base
		if delta > c.maxDelta {
			return takeSlow, 0
		}
		next, retry, ok := c.step(tat, delta*c.n, k)
		if !ok {
			return takeLimited, retry
		}
		if next == tat || g.tat.CompareAndSwap(tat, next) {
			return takeOK, 0
		}
	}
}

// step is the GCRA decision, written once: from state tat at scaled instant
// nows, take k permits (k == 0 asks whether one could be taken and takes
// nothing). It returns the new state, or the wait in ns until the request
// could be granted. k <= maxReq and nows is within maxDelta of base.
func (c *gcraConfig) step(tat, nows, k int64) (next, retry int64, ok bool) {
	need := max(k, 1)
	if c.pacer {
		if tat > nows {
			return tat, ceilDiv(tat-nows, c.n), false
		}
	} else if over := max(tat, nows) + need*c.d - nows - c.tol; over > 0 {
		return tat, ceilDiv(over, c.n), false
	}
	if k == 0 {
		return tat, 0, true
	}
	return max(tat, nows) + k*c.d, 0, true
}

// chainTake is take for a Chain's decision at now: the caller holds
// base.mu and calls settle before releasing it.
func (g *gcra) chainTake(now int64, n int) (bool, int64) {
	if !g.held {
		g.saved = g.lockTat()
		g.pending, g.held, g.takes = g.saved, true, 0
	}
	c := g.cfg.Load()
	delta := now - c.base
	if int64(n) > c.maxReq {
		return false, -1
	}
	if delta > c.maxDelta {
		// Rebase first: publish the state, convert it, and hold it again.
		g.tat.Store(g.pending)
		nc := *c
		g.reconfigure(now, &nc)
		c = g.cfg.Load()
		delta = 0
		old := g.lockTat()
		if g.takes == 0 {
			g.saved = old
		}
		g.pending = old
	}
	next, retry, ok := c.step(g.pending, delta*c.n, int64(n))
	if ok && n > 0 {
		g.pending = next
		g.takes++
	}
	return ok, retry
}

// chainUndo undoes the latest chainTake of n permits in this hold.
func (g *gcra) chainUndo(n int) {
	if n > 0 {
		g.pending -= int64(n) * g.cfg.Load().d
		g.takes--
	}
}

// settle ends a Chain's hold: it publishes the state the chain decided.
func (g *gcra) settle() {
	if !g.held {
		return
	}
	if g.takes == 0 {
		g.tat.Store(g.saved)
	} else {
		g.tat.Store(g.pending)
	}
	g.held = false
}

// lockTat swaps tat for the sentinel and returns the value it held.
// The caller holds base.mu, so no other goroutine holds the sentinel.
func (g *gcra) lockTat() int64 {
	for {
		old := g.tat.Load()
		if g.tat.CompareAndSwap(old, tatLocked) {
			return old
		}
	}
}

// reconfigure converts the state to nc (whose base is set to now): the
// permits owed under the old configuration are owed under the new one.
// The caller holds base.mu.
func (g *gcra) reconfigure(now int64, nc *gcraConfig) {
	old := g.lockTat()
	c := g.cfg.Load()
	var debt int64 // in c's scaled units
	delta := now - c.base
	if delta < 0 {
		delta = 0
	}
	if delta <= old/c.n { // tat is not in the past, and delta*c.n <= old cannot overflow
		debt = max(old-delta*c.n, 0)
	}
	// Owed permits = debt/c.d; in the new units they cost debt*nc.d/c.d.
	newTat, ok := mulDivCeil(debt, nc.d, c.d)
	if !ok || newTat > scaledLimit {
		newTat = scaledLimit
	}
	if newTat == old {
		// Never restore the value a stale compare-and-swap (computed with c)
		// expects, without changing the state it stands for:
		switch {
		case newTat == 0:
			newTat = -1 // no debt either way: any tat <= now reads as a full bucket
		case c.n != nc.n || c.d != nc.d || c.base != now:
			newTat++ // a different state: err by one unit on the safe side
		}
		// Otherwise the units and origin are unchanged, and a stale
		// compare-and-swap lands as if it ran before the change.
	}
	nc.base = now
	g.cfg.Store(nc)
	g.tat.Store(newTat)
}

// take is the locked path: it rebases when needed, then takes.
func (g *gcra) take(now int64, n int) (bool, int64) {
	for {
		st, retry := g.tryTake(now, int64(n))
		switch st {
		case takeOK:
			return true, 0
		case takeLimited:
			return false, retry
		case takeExceeds:
			return false, -1
		}
		c := *g.cfg.Load()
		g.reconfigure(now, &c)
	}
}

func (g *gcra) available(now int64) int64 {
	c := g.cfg.Load()
	tat := g.tat.Load()
	delta := now - c.base
	if delta > c.maxDelta || tat == tatLocked {
		return c.maxReq // a bucket's maxReq is its burst
	}
	debt := max(tat-delta*c.n, 0)
	if c.pacer {
		// Once its slot has come, a pacer grants any request up to its
		// maximum (and then paces the next grant by its size).
		return c.maxReq * boolInt(debt == 0)
	}
	return max((c.tol-debt)/c.d, 0)
}

func (g *gcra) idle(now int64) bool {
	c := g.cfg.Load()
	tat := g.tat.Load()
	delta := now - c.base
	return tat != tatLocked && (delta > c.maxDelta || tat <= delta*c.n)
}

func (g *gcra) maxRequest() int64 { return g.cfg.Load().maxReq }
