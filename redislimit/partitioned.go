package redislimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/internal/cellrate"
	"github.com/rategate/rategate/internal/exact"
	"github.com/rategate/rategate/internal/precise"
	"github.com/rategate/rategate/internal/waitq"
	"github.com/rategate/rategate/limiter"
)

// PartitionedOptions configures NewPartitioned.
type PartitionedOptions struct {
	// Rate is the global rate, shared by every process that uses the same
	// Options.Key: limiter.Per(20000, time.Second).
	Rate limiter.Rate
	// Burst is the global burst. Partition i gets Burst/Partitions permits of
	// it (one more for the first Burst%Partitions), so Burst must be at least
	// Partitions. Zero or negative is an error.
	Burst int
	// Partitions is how many leases the capacity is split into, from 1 to
	// MaxPartitions: each carries Rate/Partitions and its share of Burst. More
	// partitions share the capacity more finely among processes; fewer mean
	// fewer leases to renew. Use at least as many as the processes that will
	// be busy at once. Zero or negative is an error.
	Partitions int
	// LeaseTTL is how long a lease lives in Redis after its last renewal, so
	// how long a crashed or stalled holder's partitions stay out of use. A
	// holder renews every LeaseTTL/3 and stops using a partition
	// LeaseTTL/64 + 2ms before its lease can have expired. Zero means
	// DefaultPartitionLeaseTTL; it must be at least MinPartitionLeaseTTL.
	// (Options.LeaseTTL is for NewConcurrency: set here, not there.)
	LeaseTTL time.Duration
	// Queue says how this process's Acquire calls wait for the permits of
	// its partitions, as in package limiter: Limit caps the permits waiting
	// (a zero-permit call counting one; beyond it, ErrQueueFull), Order
	// serves them OldestFirst (the default) or NewestFirst (a full queue
	// then fails its oldest waiters), Spin sets how long before its instant
	// the head waiter waits precisely, and PlainTimers has it wait on a Go
	// timer alone. The queue is this process's: waiters in other processes
	// wait in their own.
	Queue limiter.QueueOptions
}

const (
	// MaxPartitions is the largest PartitionedOptions.Partitions.
	MaxPartitions = 1024
	// DefaultPartitionLeaseTTL is the lease TTL when PartitionedOptions.LeaseTTL is zero.
	DefaultPartitionLeaseTTL = time.Second
	// MinPartitionLeaseTTL is the shortest PartitionedOptions.LeaseTTL.
	MinPartitionLeaseTTL = 30 * time.Millisecond
)

// Partitioned is a global rate decided locally: the capacity (Rate and
// Burst) is split into Partitions equal partitions that processes lease in
// Redis, and each process grants from the partitions it holds, from one
// local token bucket, without a round trip.
//
// The model in brief: partition i earns Rate/Partitions and holds at most
// its share of Burst. A process uses a lease only until LeaseTTL minus a
// margin after it sent the request that took or renewed it, so no partition
// is ever used by two processes at once. A partition given back carries its
// bucket's state (the Redis time at which it is full again) to its next
// holder; one never leased is full, so a new limit serves its burst at once;
// one whose holder vanished comes back empty. Partitions flow to
// demand: a process refused for want of capacity asks for more, one that
// does not use its partitions gives them back, and holders above a max-min
// fair share give back the excess when another process that wants more is
// below it. docs/partitioned.md in the repository gives the argument that
// the bound holds, with its numbers, and the measured trade-offs.
//
// Bound: summed over every process using the same Key, at most
// Burst + Rate·t permits are granted in every interval of length t.
//
// TryAcquire and Acquire's fast path read the clock and do one
// compare-and-swap; they never wait for Redis. Leases are taken, renewed and
// given back by one goroutine that runs only while this process holds
// partitions or wants some; an idle Partitioned gives its leases back and
// has no goroutine. The first call after idling finds no partition and is
// refused with limiter.ErrLimited (or, with Acquire, waits) while the lease
// is fetched.
//
// A Redis server restarted without its data has forgotten who holds what,
// so Partitioned always guards against restarts (Options.GuardRestarts or
// not): partitions taken from a server that started less than one LeaseTTL
// ago, or whose state was made by another server, are used only once a
// LeaseTTL has passed, when no lease of the old state can be in use. That
// includes the first use of a freshly started server.
//
// A request takes all its permits from this process's partitions, so the
// largest request the process can be granted is the burst of the
// partitions it holds; a request over the global Burst fails with
// limiter.ErrExceedsLimit.
type Partitioned struct {
	// Hot: read and written by every grant.
	tat atomic.Int64 // scaled debt state of the held partitions' bucket
	cfg atomic.Pointer[pconf]
	// q is this process's Acquire calls waiting, guarded by mu; its Idle
	// and Waiting are read without the lock (TryAcquire does not jump it).
	q        waitq.Queue
	closed   atomic.Bool
	granted  atomic.Int64
	extra    atomic.Int64 // permits granted beyond one per lease
	rejected atomic.Int64
	demand   atomic.Int64 // refusals since the last sync: demand beyond the held partitions
	// keeperRunning mirrors running, for hunger's check without the lock.
	keeperRunning atomic.Bool
	unavail       atomic.Pointer[error]

	origin time.Time
	o      Options
	po     PartitionedOptions
	key    string
	rc     caller // a sync's round trip, within min(Options.Timeout, LeaseTTL/3)
	owner  string
	unit   int64 // scaled units one partition earns per ns
	cost   int64 // scaled units one permit costs
	ttl    time.Duration
	margin time.Duration
	calls  atomic.Int64 // lease round trips

	mu      sync.Mutex
	parts   []int // partitions in use, ascending
	pending []pendingPart

	// The lease keeper goroutine's state, under mu.
	running       bool
	kick          chan struct{}
	done          chan struct{}
	excess        int   // partitions Redis asked us to give back
	leaseDeadline int64 // ns since origin: when the leases of the last sync must no longer be used
	lastSync      int64 // ns since origin
	seenUntil     int64 // Redis µs: the hash must exist until then, by our last sync (0: none)
	lastPermits   int64
}

var (
	_ limiter.Limiter = (*Partitioned)(nil)
	_ limiter.Quoter  = (*Partitioned)(nil)
)

// pconf is the configuration of the local bucket: which capacity the held
// partitions give and until when their leases may be used.
type pconf struct {
	base     int64 // ns since origin at which scaled time is 0
	deadline int64 // ns since origin: no grant at or after it (0: none held)
	rate     int64 // scaled units earned per ns: partitions × unit
	tol      int64 // scaled debt allowed after a grant: burst × cost
	burst    int64 // permits of burst of the partitions in use
	parts    int
}

// pendingPart is a partition leased during a quarantine (after Redis lost
// its state): it is used from notBefore on.
type pendingPart struct {
	idx       int
	notBefore int64 // ns since origin
}

// NewPartitioned returns a Partitioned limiter that holds no partition yet,
// or an *limiter.OptionError naming the first invalid option.
func NewPartitioned(o Options, opts PartitionedOptions) (*Partitioned, error) {
	if err := o.validate(false); err != nil {
		return nil, err
	}
	if opts.Rate.Events() <= 0 {
		return nil, optErr("Rate", "events must be positive, got %d (use limiter.Per(n, d) with n > 0)", opts.Rate.Events())
	}
	if opts.Rate.Period() <= 0 {
		return nil, optErr("Rate", "period must be positive, got %v", opts.Rate.Period())
	}
	if opts.Partitions <= 0 || opts.Partitions > MaxPartitions {
		return nil, optErr("Partitions", "must be from 1 to %d, got %d", MaxPartitions, opts.Partitions)
	}
	if opts.Burst < opts.Partitions {
		return nil, optErr("Burst", "must be at least Partitions (%d): every partition needs one permit of burst; got %d", opts.Partitions, opts.Burst)
	}
	if err := validQueue(opts.Queue); err != nil {
		return nil, err
	}
	ttl := opts.LeaseTTL
	if ttl == 0 {
		ttl = DefaultPartitionLeaseTTL
	}
	if ttl < MinPartitionLeaseTTL || ttl > 24*time.Hour {
		return nil, optErr("LeaseTTL", "must be from %v to 24h, got %v", MinPartitionLeaseTTL, opts.LeaseTTL)
	}
	// One partition earns Rate/Partitions: n permits per d·P ns. In scaled
	// units one ns is unit = n/g units and one permit cost = d·P/g units.
	n, per, parts := opts.Rate.Events(), int64(opts.Rate.Period()), int64(opts.Partitions)
	if per > math.MaxInt64/parts {
		return nil, optErr("Rate", "period %v split into %d partitions overflows", opts.Rate.Period(), parts)
	}
	g := partGCD(n, per*parts)
	unit, cost := n/g, per*parts/g
	if cost > partScaledMax/int64(opts.Burst) {
		return nil, optErr("Burst", "%d permits at %v in %d partitions overflows the bucket's arithmetic", opts.Burst, opts.Rate, parts)
	}
	if unit > partScaledMax/parts || int64(ttl) > partScaledMax/(unit*parts) {
		return nil, optErr("LeaseTTL", "%v at %v in %d partitions overflows the bucket's arithmetic", ttl, opts.Rate, parts)
	}
	var id [12]byte
	rand.Read(id[:])
	opts.LeaseTTL = ttl
	p := &Partitioned{
		origin: time.Now(),
		o:      o,
		po:     opts,
		key:    redisKey("pt", o.Key, "", false, ""),
		rc:     newCaller(o.Client, min(o.timeout(), ttl/3)),
		owner:  hex.EncodeToString(id[:]),
		unit:   unit,
		cost:   cost,
		ttl:    ttl,
		margin: ttl/64 + 2*time.Millisecond,
		kick:   make(chan struct{}, 1),
	}
	p.cfg.Store(&pconf{})
	p.q.Init(&p.mu, waitq.Options{
		Limit:       int64(opts.Queue.Limit),
		NewestFirst: opts.Queue.Order == limiter.NewestFirst,
		Full:        limiter.ErrQueueFull,
		Timer:       precise.Timer{Spin: opts.Queue.Spin, Plain: opts.Queue.PlainTimers},
	})
	return p, nil
}

// partScaledMax bounds the scaled quantities (a bucket's tolerance, the scaled
// time within one lease), so that their sums stay within an int64.
const partScaledMax = int64(1) << 60

func partGCD(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (p *Partitioned) now() int64 { return int64(time.Since(p.origin)) }

// instant returns t in ns since origin.
func (p *Partitioned) instant(t time.Time) int64 { return int64(t.Sub(p.origin)) }

// partBurst is partition i's share of the burst.
func (p *Partitioned) partBurst(i int) int64 {
	b, P := int64(p.po.Burst), int64(p.po.Partitions)
	if int64(i) < b%P {
		return b/P + 1
	}
	return b / P
}

// Outcomes of take.
const (
	ptOK      = iota
	ptLimited // not yet: retry is when
	ptShort   // more than the held partitions' burst: more partitions needed
	ptNoLease // no partition in use
	ptSlow    // the configuration is being changed: retry under the lock

	ptQueued // not take's: Acquire calls wait, and TryAcquire does not jump them
)

// take tries to take k permits at now (ns since origin) from the held
// partitions, without a lock: the lock-free decision of internal/cellrate,
// with the held partitions' bucket as its configuration (scaled time runs
// c.rate units a ns from c.base; a permit costs p.cost units).
func (p *Partitioned) take(now, k int64) (status int, retry int64) {
	for {
		tat := p.tat.Load()
		if tat == cellrate.Locked {
			return ptSlow, 0
		}
		c := p.cfg.Load()
		if now >= c.deadline {
			return ptNoLease, 0
		}
		if max(k, 1)*p.cost > c.tol {
			return ptShort, 0
		}
		next, early := cellrate.Decide(tat, (now-c.base)*c.rate, k, p.cost, c.tol)
		if early > 0 {
			return ptLimited, exact.CeilDiv(early, c.rate)
		}
		if next == tat || p.tat.CompareAndSwap(tat, next) {
			return ptOK, 0
		}
	}
}

// lockDebt swaps the state for the locked sentinel and returns the bucket's
// debt at now in scaled units, and the swapped value. The caller holds mu.
func (p *Partitioned) lockDebt(now int64) (debt, old int64) {
	old = cellrate.Lock(&p.tat)
	c := p.cfg.Load()
	if c.rate == 0 || old <= 0 {
		return 0, old
	}
	delta := max(now-c.base, 0)
	if delta > old/c.rate {
		return 0, old
	}
	return old - delta*c.rate, old
}

// install stores a new configuration for the partitions in p.parts, valid
// until deadline, with the given debt, and unlocks the state. The caller
// holds mu and has locked the state with lockDebt.
func (p *Partitioned) install(now, deadline, debt, old int64) {
	c := &pconf{base: now, parts: len(p.parts)}
	if len(p.parts) > 0 {
		c.deadline = deadline
		c.rate = int64(len(p.parts)) * p.unit
		for _, i := range p.parts {
			c.burst += p.partBurst(i)
		}
		c.tol = c.burst * p.cost
	} else {
		debt = 0
	}
	if debt == old {
		debt = cellrate.Fresh(debt) // never the value a stale compare-and-swap expects
	}
	p.cfg.Store(c)
	p.tat.Store(debt)
	p.serve(time.Now())
}

// TryAcquire takes n permits if the partitions this process holds have
// them now and no Acquire call waits. It never waits for Redis and does not
// allocate. When this process holds no partition (it was idle, or its
// leases lapsed), it is refused with limiter.ErrLimited and a lease is
// sought in the background; when that is because Redis cannot be reached,
// Options.OnError decides.
func (p *Partitioned) TryAcquire(n int) limiter.Lease {
	if n < 0 {
		p.rejected.Add(1)
		return limiter.Denied(limiter.ErrInvalidCount, 0)
	}
	for p.q.Idle() {
		st, retry := p.take(p.now(), int64(n))
		switch st {
		case ptOK:
			p.counted(n)
			return limiter.NewLease(n, nil)
		case ptLimited:
			// Demand beyond what the held partitions give: the next sync
			// asks for more.
			p.demand.Add(1)
			p.rejected.Add(1)
			return limiter.Denied(limiter.ErrLimited, time.Duration(retry))
		case ptSlow:
			p.mu.Lock() // the configuration changes under mu
			p.mu.Unlock()
			continue
		}
		return p.tryRefuse(n, st)
	}
	return p.tryRefuse(n, ptQueued)
}

// tryRefuse refuses a TryAcquire that the held partitions could not decide
// (st ptShort or ptNoLease) or that waits behind Acquire calls (ptQueued),
// saying why; for want of partitions it asks for more, and with none usable
// because Redis cannot be reached, Options.OnError decides.
func (p *Partitioned) tryRefuse(n, st int) limiter.Lease {
	var err error
	switch {
	case n > p.po.Burst:
		err = limiter.ErrExceedsLimit
	case p.closed.Load():
		err = ErrClosed
	case st == ptQueued || p.q.Waiting():
		err = limiter.ErrLimited
	default:
		if p.hungry() {
			p.wake()
		}
		if st == ptNoLease {
			if l, ok := p.onError(n); ok {
				return l
			}
		}
		err = limiter.ErrLimited
	}
	p.rejected.Add(1)
	return limiter.Denied(err, 0)
}

// counted counts a lease of n permits granted from the partitions: one
// atomic add for the usual single permit.
func (p *Partitioned) counted(n int) {
	p.granted.Add(1)
	if n != 1 {
		p.extra.Add(int64(n - 1))
	}
}

// permits returns the permits granted from the partitions so far.
func (p *Partitioned) permits() int64 { return p.granted.Load() + p.extra.Load() }

// onError applies Options.OnError to a TryAcquire when this process holds
// no usable partition because Redis could not be reached.
func (p *Partitioned) onError(n int) (limiter.Lease, bool) {
	e := p.unavail.Load()
	if e == nil {
		return limiter.Lease{}, false
	}
	l := p.o.policyTry(n, *e)
	if l.Granted() {
		p.granted.Add(1)
	} else {
		p.rejected.Add(1)
	}
	return l, true
}

// Acquire waits until n permits are granted from this process's partitions,
// ctx is done, or the limiter is closed; see limiter.Limiter. Waiters are
// served in PartitionedOptions.Queue's order (first in, first out by
// default). While this process holds too few partitions it waits for the
// lease keeper to take more; when Redis cannot be reached and no lease is
// left, Options.OnError decides for every waiter within one Timeout of the
// failed lease call (FailClosed fails them with an error wrapping
// ErrUnavailable; FailOpen and UseFallback serve them). When the wait it
// knows of (its own, or in a first-in-first-out queue the head's) would
// outlast ctx's deadline, it fails at once with an error wrapping
// context.DeadlineExceeded, whose RetryAfter is that wait.
func (p *Partitioned) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	if ctx == nil {
		panic("redislimit: nil Context")
	}
	if n < 0 {
		p.rejected.Add(1)
		return limiter.Denied(limiter.ErrInvalidCount, 0), limiter.ErrInvalidCount
	}
	if n > p.po.Burst {
		p.rejected.Add(1)
		return limiter.Denied(limiter.ErrExceedsLimit, 0), limiter.ErrExceedsLimit
	}
	if err := ctx.Err(); err != nil {
		p.rejected.Add(1)
		return limiter.Denied(err, 0), err
	}
	// Served at once, without the lock, when nobody waits.
	if p.q.Idle() {
		if st, _ := p.take(p.now(), int64(n)); st == ptOK {
			p.counted(n)
			return limiter.NewLease(n, nil), nil
		}
	}
	p.mu.Lock()
	t := time.Now()
	now := p.instant(t)
	w, granted, retry, err := p.q.Take(ctx, t, int64(n), func(k int64) (bool, time.Duration) {
		ok, retry, _ := p.decide(now, k)
		return ok, retry
	})
	p.mu.Unlock()
	switch {
	case granted:
		p.counted(n)
		return limiter.NewLease(n, nil), nil
	case err != nil:
		p.rejected.Add(1)
		return limiter.Denied(err, retry), err
	}
	switch err := p.q.Wait(ctx, w, p.serve); {
	case err == nil:
		return limiter.NewLease(n, nil), nil // counted by serve
	case errors.Is(err, ErrUnavailable): // see serve
		return p.onErrorWait(ctx, n, err)
	default:
		p.rejected.Add(1)
		return limiter.Denied(err, w.RetryAfter()), err
	}
}

// decide is take for the queue: granted, or the wait until k permits could
// be (-1: unknown, until the held partitions change), and take's outcome.
// Refused for want of partitions, it has the lease keeper sync soon. The
// caller holds mu.
func (p *Partitioned) decide(now, k int64) (bool, time.Duration, int) {
	st, retry := p.take(now, k)
	switch st {
	case ptOK:
		return true, 0, st
	case ptLimited:
		return false, time.Duration(retry), st
	case ptSlow:
		return false, 0, st // cannot be: every change of the state holds mu
	}
	if p.hungry() {
		p.wakeLocked()
	}
	return false, -1, st
}

// serve grants the waiters in order while the held partitions allow, at t
// (see waitq.Queue.Serve), and counts the grants. When the head cannot be
// served because this process holds no usable partition and Redis cannot
// be reached, it fails the head with the failed sync's error, which wraps
// ErrUnavailable: its Acquire then lets Options.OnError decide, without
// the lock, and the next head is served (and fails) in turn. It runs whenever the held partitions change, at a
// failed sync, and in the head waiter's own wait. The caller holds mu.
func (p *Partitioned) serve(t time.Time) {
	now := p.instant(t)
	st := ptOK
	p.q.Serve(t, func(w *waitq.Waiter) (bool, time.Duration) {
		ok, retry, s := p.decide(now, w.N())
		if ok {
			p.counted(int(w.N()))
		}
		st = s
		return ok, retry
	})
	if h := p.q.Head(); h != nil && st == ptNoLease {
		if e := p.unavail.Load(); e != nil {
			p.q.Fail(h, *e)
		}
	}
}

// onErrorWait applies Options.OnError to an Acquire that serve failed
// with cause, a failed sync's error, and counts it.
func (p *Partitioned) onErrorWait(ctx context.Context, n int, cause error) (limiter.Lease, error) {
	l, err := p.o.policyAcquire(ctx, n, cause)
	if l.Granted() {
		p.granted.Add(1)
	} else {
		p.rejected.Add(1)
	}
	return l, err
}

// hungry records that a caller was refused for want of partitions, and
// reports whether the lease keeper must be woken to sync soon.
func (p *Partitioned) hungry() bool { return p.demand.Add(1) == 1 || !p.keeperRunning.Load() }

// Partitions returns how many partitions this process holds and uses now
// (leased partitions waiting out a quarantine after a Redis restart are not
// counted). Together with Stats it shows how the capacity is shared.
func (p *Partitioned) Partitions() int {
	c := p.cfg.Load()
	if p.now() >= c.deadline {
		return 0
	}
	return c.parts
}

// LeaseCalls returns how many lease round trips to Redis this limiter has
// made: its lease traffic.
func (p *Partitioned) LeaseCalls() int64 { return p.calls.Load() }

// available returns the permits the held partitions could grant now.
func (p *Partitioned) available(now int64) (avail, debt int64, c *pconf) {
	c = p.cfg.Load()
	tat := p.tat.Load()
	if now >= c.deadline || tat == cellrate.Locked {
		return 0, 0, c
	}
	debt = max(tat-(now-c.base)*c.rate, 0)
	return max(c.tol-debt, 0) / p.cost, debt, c
}

// Stats returns a snapshot: Available is what this process's partitions
// could grant now; Granted and Rejected count this process's calls.
func (p *Partitioned) Stats() limiter.Stats {
	avail, _, _ := p.available(p.now())
	p.mu.Lock()
	s := limiter.Stats{Available: avail, Queued: p.q.Queued(), Waiters: p.q.Len()}
	p.mu.Unlock()
	s.Granted = p.granted.Load()
	s.Rejected = p.rejected.Load()
	return s
}

// Quota reports the global policy (Limit = Burst permits per Window, the
// time the global bucket takes to refill from empty) and this process's
// state: Remaining is what its partitions could grant now (0 while Acquire
// calls wait), Reset how long until they are full.
func (p *Partitioned) Quota() limiter.Quota {
	q := limiter.Quota{Limit: int64(p.po.Burst)}
	n, per := p.po.Rate.Events(), int64(p.po.Rate.Period())
	if w, ok := exact.MulDivCeil(int64(p.po.Burst), per, n); ok {
		q.Window = time.Duration(w)
	} else {
		q.Window = time.Duration(math.MaxInt64)
	}
	avail, debt, c := p.available(p.now())
	if !p.q.Waiting() {
		q.Remaining = avail
	}
	if c.rate > 0 {
		q.Reset = time.Duration(exact.CeilDiv(debt, c.rate))
	}
	return q
}

// Close gives this process's leases back (with their buckets' state, so
// that the next holder starts where this one left off) and fails waiting
// Acquire calls with ErrClosed; later calls fail with ErrClosed too. It
// returns nil, also when called again.
func (p *Partitioned) Close() error {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return nil
	}
	p.closed.Store(true)
	p.q.Close(ErrClosed)
	done := p.done
	running := p.running
	p.mu.Unlock()
	if running {
		select {
		case p.kick <- struct{}{}:
		default:
		}
		<-done
	}
	// The keeper gave the partitions back; make sure none is used locally.
	p.mu.Lock()
	if len(p.parts) > 0 || len(p.pending) > 0 {
		now := p.now()
		_, old := p.lockDebt(now)
		p.parts, p.pending = nil, nil
		p.install(now, 0, 0, old)
	}
	p.mu.Unlock()
	return nil
}
