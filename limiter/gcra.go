package limiter

import (
	"sync/atomic"

	"github.com/rategate/rategate/internal/cellrate"
)

// gcra is the generic cell rate algorithm shared by TokenBucket and
// LeakyBucket. Its whole state is one word, the theoretical arrival time
// (tat), so TryAcquire is one compare-and-swap.
//
// The word also counts the fast path's grants, so that a grant costs that one
// compare-and-swap and no second atomic operation: when the configuration
// leaves room (shift > 0), the word is tat<<shift plus the number of grants
// not yet added to the limiter's Granted counter. When that number would
// overflow its bits, the fast path falls back to the lock, which moves it to
// the counter. Stats reads counter and word under the lock, so its count is
// exact; a configuration without room (huge bursts or periods, the pacer)
// counts each grant with an atomic add instead.
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
// computed with the configuration that goes with the value it replaced: the
// protocol of internal/cellrate, which redislimit's Partitioned follows too.
type gcra struct {
	word  *atomic.Int64 // the limiter's base.word: tat<<shift | uncounted grants
	count *atomic.Int64 // the limiter's base.granted
	cfg   atomic.Pointer[gcraConfig]

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
	limit    int64 // bound on tol, on one request's cost and on a converted tat
	shift    uint  // bits of the word that count grants (0: none)
	mask     int64 // 1<<shift - 1
	pacer    bool
	rate     Rate
	since    int64 // ns since origin when the rate took effect (the units of settlements)
}

const (
	tatLocked   = cellrate.Locked
	scaledLimit = int64(1) << 60 // bound on tol and on one request's cost
	countBits   = 8              // the word's grant count, where there is room
	// The word's tat stays below 4 * limit, so limit<<shift < 2^61.
	countedLimit = scaledLimit >> countBits
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
	c := &gcraConfig{n: n, d: d, burst: burst, rate: rate, pacer: pacer, limit: scaledLimit}
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
	c.maxDelta = 2 * c.limit / n
	return c, nil
}

// countGrants makes room in the state word for a count of grants, when the
// bucket's arithmetic fits in the bits left (see gcra). A shared limiter's
// configuration does; a KeyedTokenBucket's, whose per-key states count
// nothing and whose shards rebase every maxDelta/2, does not.
func (c *gcraConfig) countGrants() {
	if !c.pacer && c.tol <= countedLimit {
		c.limit, c.shift, c.mask = countedLimit, countBits, 1<<countBits-1
		c.maxDelta = 2 * c.limit / c.n
	}
}

// tryTake attempts to take k permits at now without a lock. With counted
// set it counts the grant (the fast paths); the locked path counts its own.
func (g *gcra) tryTake(now, k int64, counted bool) (status int, retry int64) {
	for {
		word := g.word.Load()
		if word == tatLocked {
			return takeSlow, 0
		}
		c := g.cfg.Load()
		if k > c.maxReq {
			return takeExceeds, 0
		}
		delta := now - c.base
		uncounted := word & c.mask
		if delta > c.maxDelta || counted && c.mask != 0 && uncounted == c.mask {
			return takeSlow, 0
		}
		tat := word >> c.shift
		next, early := c.decide(tat, delta*c.n, k)
		if early > 0 {
			return takeLimited, c.ns(early)
		}
		// A grant of permits moves tat forward, so the word it leaves never
		// recurs (a stale compare-and-swap cannot land on it) and may carry
		// the count; a grant of none leaves the word as it is and is counted
		// on the counter.
		inWord := counted && c.mask != 0 && k > 0
		if inWord {
			uncounted++
		}
		if next = next<<c.shift | uncounted; next == word || g.word.CompareAndSwap(word, next) {
			if counted && !inWord {
				g.count.Add(1)
			}
			return takeOK, 0
		}
	}
}

// step is the GCRA decision, written once: from state tat at scaled instant
// nows, take k permits (k == 0 asks whether one could be taken and takes
// nothing). It returns the new state, or the wait in ns until the request
// could be granted. k <= maxReq and nows is within maxDelta of base.
func (c *gcraConfig) step(tat, nows, k int64) (next, retry int64, ok bool) {
	next, early := c.decide(tat, nows, k)
	if early > 0 {
		return tat, c.ns(early), false
	}
	return next, 0, true
}

// decide is step without the conversion of a refusal's wait to nanoseconds,
// small enough to inline into the lock-free fast path: it returns the new
// state, or early > 0, the scaled units by which the request is too soon.
func (c *gcraConfig) decide(tat, nows, k int64) (next, early int64) {
	tol := c.tol
	if c.pacer {
		// The pacer grants once its slot has come (early = tat-nows),
		// whatever the request's size.
		tol = max(k, 1) * c.d
	}
	return cellrate.Decide(tat, nows, k, c.d, tol)
}

// ns converts a span of scaled units to whole nanoseconds, rounding up. Most
// rates reduce to one permit per so many nanoseconds (n == 1), where it is
// the identity and costs no division.
func (c *gcraConfig) ns(units int64) int64 {
	if c.n == 1 {
		return units
	}
	return ceilDiv(units, c.n)
}

// hold starts a Chain's decision: the word becomes the locked sentinel, so
// that lock-free fast paths wait on base.mu, and take decides from pending.
// The caller holds base.mu.
func (g *gcra) hold() {
	if !g.held {
		g.saved, _ = g.lockTat()
		g.pending, g.held, g.takes = g.saved, true, 0
	}
}

// chainTake is take while a Chain holds the state.
func (g *gcra) chainTake(now int64, n int) (bool, int64) {
	c := g.cfg.Load()
	delta := now - c.base
	if int64(n) > c.maxReq {
		return false, -1
	}
	if delta > c.maxDelta {
		// Rebase first: publish the state, convert it, and hold it again.
		g.publish(g.pending)
		nc := *c
		g.reconfigure(now, &nc)
		c = g.cfg.Load()
		delta = 0
		old, _ := g.lockTat()
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

// untake undoes the latest take of n permits in a Chain's hold.
func (g *gcra) untake(_ int64, n int) {
	if g.held && n > 0 {
		g.pending -= int64(n) * g.cfg.Load().d
		g.takes--
	}
}

// unhold ends a Chain's hold: it publishes the state the chain decided.
func (g *gcra) unhold() {
	if !g.held {
		return
	}
	if g.takes == 0 {
		g.publish(g.saved)
	} else {
		g.publish(g.pending)
	}
	g.held = false
}

// lockTat swaps the word for the sentinel, moves its uncounted grants to
// the counter, and returns its tat and the word it held. The caller holds
// base.mu, so no other goroutine holds the sentinel, and Stats (which takes
// base.mu too) never sees a grant in neither place.
func (g *gcra) lockTat() (tat, word int64) {
	word = cellrate.Lock(g.word)
	c := g.cfg.Load()
	if n := word & c.mask; n != 0 {
		g.count.Add(n)
	}
	return word >> c.shift, word
}

// publish ends a hold of the sentinel: the word becomes tat, with no
// uncounted grants.
func (g *gcra) publish(tat int64) { g.word.Store(tat << g.cfg.Load().shift) }

// uncounted returns the grants the word holds that the counter does not.
// The caller holds base.mu.
func (g *gcra) uncounted() int64 {
	word := g.word.Load()
	if word == tatLocked {
		return 0
	}
	return word & g.cfg.Load().mask
}

// load returns the tat, or false while a Chain holds the word.
func (g *gcra) load() (int64, bool) {
	word := g.word.Load()
	return word >> g.cfg.Load().shift, word != tatLocked
}

// reconfigure converts the state to nc (whose base is set to now): the
// permits owed under the old configuration are owed under the new one.
// The caller holds base.mu.
func (g *gcra) reconfigure(now int64, nc *gcraConfig) {
	old, word := g.lockTat()
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
	if !ok || newTat > nc.limit {
		newTat = nc.limit
	}
	if newTat<<nc.shift == word && (newTat == 0 || c.n != nc.n || c.d != nc.d || c.base != now || c.shift != nc.shift) {
		// Never restore the value a stale compare-and-swap (computed with c)
		// expects for a different state. (With the units and origin
		// unchanged, a stale compare-and-swap lands as if it ran before the
		// change.)
		newTat = cellrate.Fresh(newTat)
	}
	nc.base = now
	if nc.n != c.n || nc.d != c.d {
		nc.since = now
	} else {
		nc.since = c.since
	}
	g.cfg.Store(nc)
	g.publish(newTat)
}

// settle books a settled lease at now (see policy.settle): the state moves
// by the permits' cost, computed by settled, in the units of the rate the
// lease was granted at; a lease granted before the rate last changed gives
// nothing back.
func (g *gcra) settle(now, at, granted, actual int64) {
	c := g.cfg.Load()
	if now-c.base > c.maxDelta {
		nc := *c
		g.reconfigure(now, &nc) // rebase, as take does
		c = g.cfg.Load()
	}
	ago := int64(-1)
	if at >= c.since && at <= now && granted <= c.maxReq {
		ago = now - at
	}
	tat, _ := g.lockTat()
	g.publish(c.settled(tat, (now-c.base)*c.n, ago, granted, actual))
}

// settled returns the state tat, at scaled instant nows, after a lease of
// granted permits, granted ago ns before (negative: unknown), is settled
// at its actual cost.
//
// Overuse adds its cost to the state: later grants wait until it is paid
// (capped where the arithmetic ends, two limits of scaled time ahead). When
// the grant's instant is not known, the debt runs from now, not from the
// state, which may be in the past: the cost is then charged as if the
// lease had been granted now, on the safe side.
//
// Unused permits come back only as far as no grant since can have relied
// on them. The state is never below what a bucket charged the actual
// costs all along would hold: giving back u permits lowers that one by
// min(u·d, the least debt any later grant found), and every later grant
// found a debt of at least the lease's own cost, granted·d, less the time
// since: so the cost not yet refilled since the grant comes back, at most
// the unused permits'. Settled at once, a lease gives back all it did not
// use; settled after its permits have refilled, nothing.
func (c *gcraConfig) settled(tat, nows, ago, granted, actual int64) int64 {
	if actual > granted {
		if ago < 0 {
			tat = max(tat, nows)
		}
		if room := nows + 2*c.limit - tat; room > 0 {
			return tat + min(actual-granted, room/c.d)*c.d
		}
		return tat
	}
	cost := granted * c.d // granted <= maxReq: no overflow
	if ago < 0 || ago > cost/c.n {
		return tat
	}
	return tat - min((granted-actual)*c.d, cost-ago*c.n)
}

// take is the locked path: it moves a full count of uncounted grants to the
// counter (so the fast path can count again), rebases when needed, then takes.
func (g *gcra) take(now int64, n int) (bool, int64) {
	if g.held {
		return g.chainTake(now, n)
	}
	if c := g.cfg.Load(); c.mask != 0 && g.uncounted() == c.mask {
		tat, _ := g.lockTat()
		g.publish(tat)
	}
	for {
		st, retry := g.tryTake(now, int64(n), false)
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
	tat, ok := g.load()
	delta := now - c.base
	if delta > c.maxDelta || !ok {
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
	tat, ok := g.load()
	delta := now - c.base
	return ok && (delta > c.maxDelta || tat <= delta*c.n)
}

func (g *gcra) maxRequest() int64 { return g.cfg.Load().maxReq }
