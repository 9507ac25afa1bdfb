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
		nows := delta * c.n
		need := max(k, 1)
		if c.pacer {
			if tat > nows {
				return takeLimited, ceilDiv(tat-nows, c.n)
			}
		} else if over := max(tat, nows) + need*c.d - nows - c.tol; over > 0 {
			return takeLimited, ceilDiv(over, c.n)
		}
		if k == 0 {
			return takeOK, 0
		}
		if g.tat.CompareAndSwap(tat, max(tat, nows)+k*c.d) {
			return takeOK, 0
		}
	}
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
		return c.burst
	}
	debt := max(tat-delta*c.n, 0)
	if c.pacer {
		return boolInt(debt == 0)
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

// refund gives back the cost of k permits taken at most elapsed ns ago. It
// is exact while the permits' cost has not drained (elapsed < cost): until
// then tat stays ahead of the clock, so later grants added their cost on top
// of ours and subtracting ours restores what they would have seen without it.
func (g *gcra) refund(now int64, k int64, elapsed int64) bool {
	c := g.cfg.Load()
	cost := k * c.d
	if elapsed >= cost/c.n {
		return false
	}
	for {
		tat := g.tat.Load()
		if tat == tatLocked {
			return false
		}
		if g.tat.CompareAndSwap(tat, tat-cost) {
			return true
		}
	}
}
