package limiter

import (
	"context"
	"math"
	"sync/atomic"
)

// ConcurrencyOptions configures NewConcurrency.
type ConcurrencyOptions struct {
	// Limit is the most permits in use at once.
	Limit int
	// Queue configures Acquire's waiting.
	Queue QueueOptions
}

// Concurrency is a counting semaphore: a granted lease holds its permits
// until Lease.Release gives them back. TryAcquire is one compare-and-swap.
//
// Bound: at every instant, the permits held by unreleased leases number at
// most Limit.
type Concurrency struct {
	base
	p concurrency
}

type concurrency struct {
	lockedState
	avail *atomic.Int64 // the limiter's base.word, beside its counters
	limit atomic.Int64
}

// NewConcurrency returns a concurrency limiter with all Limit permits free,
// or an *OptionError naming the first invalid option.
func NewConcurrency(opts ConcurrencyOptions) (*Concurrency, error) {
	if err := validLimit(opts.Limit); err != nil {
		return nil, err
	}
	if err := opts.Queue.validate(); err != nil {
		return nil, err
	}
	c := &Concurrency{}
	c.p.avail = &c.word
	c.p.avail.Store(int64(opts.Limit))
	c.p.limit.Store(int64(opts.Limit))
	c.init(&c.p, c, opts.Queue)
	return c, nil
}

func (p *concurrency) tryTake(n int64) bool {
	need := max(n, 1)
	for {
		a := p.avail.Load()
		if a < need {
			return false
		}
		if n == 0 || p.avail.CompareAndSwap(a, a-n) {
			return true
		}
	}
}

func (p *concurrency) take(now int64, n int) (bool, int64) {
	if p.tryTake(int64(n)) {
		return true, 0
	}
	return false, -1
}

// give adds n free permits (n < 0 takes them away, as SetLimit lowering
// the limit does) and returns the new count. It saturates at MaxInt64
// instead of wrapping, so that no over-release, however large, can make the
// count negative (which would refuse every request from then on); the
// caller then caps the count at the limit. A negative n saturates at
// MinInt64 likewise (only a settled overuse of absurd size gets there).
func (p *concurrency) give(n int64) int64 {
	if n > 0 {
		// A release is one atomic add, which two goroutines cannot make
		// each other retry as they do a compare-and-swap. It wrapped iff
		// the sum came out below MinInt64+n; then it is undone (exactly:
		// addition is modular) and saturated below. Only an over-release
		// near MaxInt64, a caller's bug, gets there.
		if b := p.avail.Add(n); b >= math.MinInt64+n {
			return b
		}
		p.avail.Add(-n)
	}
	for {
		a := p.avail.Load()
		b := a + n
		switch {
		case n > 0 && b < a:
			b = math.MaxInt64
		case n < 0 && b > a: // a settled overuse beyond any count: saturate
			b = math.MinInt64
		}
		if p.avail.CompareAndSwap(a, b) {
			return b
		}
	}
}

// capAtLimit brings the free permits down to the limit after an
// over-release. The caller holds base.mu (see capOverRelease).
func (p *concurrency) capAtLimit() {
	for {
		a, lim := p.avail.Load(), p.limit.Load()
		if a <= lim || p.avail.CompareAndSwap(a, lim) {
			return
		}
	}
}

// untake exactly undoes a successful take(now, n) made under the same hold
// of base.mu with nothing in between: the permits go back as by a release.
func (p *concurrency) untake(_ int64, n int) {
	if n > 0 && p.give(int64(n)) > p.limit.Load() {
		p.capAtLimit()
	}
}

// settle books a settled lease's actual cost: unused permits come back
// now, as by a release; overuse is taken from the free permits at once,
// which may go below zero: a debt that releases pay (the settled lease's
// among them, which gives back its actual permits).
func (p *concurrency) settle(_, _, granted, actual int64) {
	if actual > granted {
		p.give(granted - actual)
		return
	}
	p.untake(0, int(granted-actual))
}

func (p *concurrency) maxRequest() int64 { return p.limit.Load() }

func (p *concurrency) available(int64) int64 { return p.avail.Load() }

func (p *concurrency) idle(int64) bool { return p.avail.Load() == p.limit.Load() }

// TryAcquire takes n permits if they are free and nobody waits. It never
// blocks and does not allocate.
func (c *Concurrency) TryAcquire(n int) Lease {
	if c.q.Idle() && n >= 0 && int64(n) <= c.p.limit.Load() {
		if c.p.tryTake(int64(n)) {
			return c.grant(n, 0)
		}
		return c.reject(reasonLimited, 0)
	}
	return c.tryAcquire(n)
}

// Acquire waits until n permits are free; see Limiter. Release the lease
// when done with it.
func (c *Concurrency) Acquire(ctx context.Context, n int) (Lease, error) {
	if ctx == nil {
		panic("limiter: nil Context")
	}
	// When nobody waits and n permits are free, take them without a lock.
	if c.q.Idle() && n >= 0 && int64(n) <= c.p.limit.Load() && ctx.Err() == nil && c.p.tryTake(int64(n)) {
		return c.grant(n, 0), nil
	}
	return c.acquire(ctx, n)
}

// ReleasePermits gives n permits back and serves waiters they make room for.
// Lease.Release calls it; call it directly only for permits you account for
// yourself. Releasing more than is held is a caller's bug; the free permits
// are capped at Limit so that it cannot grow the limiter.
func (c *Concurrency) ReleasePermits(n int) {
	if n <= 0 {
		return
	}
	if c.p.give(int64(n)) > c.p.limit.Load() {
		c.capOverRelease()
	}
	if c.q.Waiting() {
		c.kick()
	}
}

// capOverRelease brings the free permits back down to Limit after an
// over-release. It runs under the lock, where SetLimit's two stores are seen
// together: free permits above a lowered limit that SetLimit has not yet
// taken back are not an over-release, and capping them would lose permits.
func (c *Concurrency) capOverRelease() {
	c.mu.Lock()
	c.p.capAtLimit()
	c.mu.Unlock()
}

// Limit returns the current limit.
func (c *Concurrency) Limit() int { return int(c.p.limit.Load()) }

// SetLimit changes the limit at once. Lowering it below the permits in use
// grants nothing more until enough are released. Waiters asking for more
// than limit fail with ErrExceedsLimit.
func (c *Concurrency) SetLimit(limit int) error {
	if err := validLimit(limit); err != nil {
		return err
	}
	c.mu.Lock()
	old := c.p.limit.Swap(int64(limit))
	// Saturating, then capped: an over-release not yet capped may have
	// left the count near MaxInt64, where adding would wrap.
	c.p.give(int64(limit) - old)
	c.p.capAtLimit()
	c.mu.Unlock()
	c.kick()
	return nil
}

// InUse returns the permits held by unreleased leases.
func (c *Concurrency) InUse() int { return int(c.p.limit.Load() - c.p.avail.Load()) }
