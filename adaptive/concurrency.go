package adaptive

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/rategate/rategate/limiter"
)

// ConcurrencyOptions configures NewConcurrencyLimiter.
type ConcurrencyOptions struct {
	// Floor is the lowest limit: at least this many calls may be in flight,
	// however slow the other side gets. Zero means 1.
	Floor int
	// Initial is the limit to start from; zero starts from Floor.
	Initial int
	// Ceiling is the highest limit: never more calls in flight than this.
	// Required.
	Ceiling int
	// Queue configures Acquire's waiting.
	Queue limiter.QueueOptions
}

// ConcurrencyLimiter is a concurrency limiter whose limit follows what
// keeps the latency of the calls it admits near their latency unloaded,
// learned from the latencies its callers report with
// [limiter.Lease.Report]. See the package documentation for how it moves.
//
// Bound: it is a [limiter.Concurrency] whose limit changes with
// [limiter.Concurrency.SetLimit]: at every instant, the permits held by
// unreleased leases number at most the limit in force, and never more than
// Ceiling. Lowering the limit revokes nothing: it grants nothing more until
// enough leases are released.
//
// It is safe for concurrent use. TryAcquire and Acquire cost what the
// semaphore's do; a report takes a mutex, and does not allocate.
type ConcurrencyLimiter struct {
	sem    *limiter.Concurrency
	origin time.Time

	mu sync.Mutex
	c  latencyControl
}

// NewConcurrencyLimiter returns an adaptive concurrency limiter at Initial
// (or Floor), or an *limiter.OptionError naming the first invalid option.
func NewConcurrencyLimiter(opts ConcurrencyOptions) (*ConcurrencyLimiter, error) {
	floor, initial := opts.Floor, opts.Initial
	if floor == 0 {
		floor = 1
	}
	if initial == 0 {
		initial = floor
	}
	switch {
	case floor < 0:
		return nil, &limiter.OptionError{Field: "Floor", Problem: fmt.Sprintf("must not be negative, got %d", opts.Floor)}
	case initial < 0:
		return nil, &limiter.OptionError{Field: "Initial", Problem: fmt.Sprintf("must not be negative, got %d", opts.Initial)}
	case opts.Ceiling <= 0:
		return nil, &limiter.OptionError{Field: "Ceiling", Problem: fmt.Sprintf("must be positive, got %d", opts.Ceiling)}
	case floor > opts.Ceiling:
		return nil, &limiter.OptionError{Field: "Floor", Problem: fmt.Sprintf("%d is above Ceiling %d", floor, opts.Ceiling)}
	case initial < floor:
		return nil, &limiter.OptionError{Field: "Initial", Problem: fmt.Sprintf("%d is below Floor %d", initial, floor)}
	case initial > opts.Ceiling:
		return nil, &limiter.OptionError{Field: "Initial", Problem: fmt.Sprintf("%d is above Ceiling %d", initial, opts.Ceiling)}
	}
	sem, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: initial, Queue: opts.Queue})
	if err != nil {
		return nil, err
	}
	return &ConcurrencyLimiter{sem: sem, origin: time.Now(), c: newLatencyControl(floor, initial, opts.Ceiling)}, nil
}

// TryAcquire takes n permits if they are free under the limit in force and
// nobody waits; see [limiter.Limiter]. It does not allocate. Report the
// outcome and latency of the work it admits on the returned lease, and
// release it.
func (c *ConcurrencyLimiter) TryAcquire(n int) limiter.Lease {
	return c.wrap(c.sem.TryAcquire(n))
}

// Acquire waits until n permits are free under the limit in force, ctx is
// done, the queue is full, or the limiter is closed; see [limiter.Limiter].
// Report the outcome and latency of the work it admits on the returned
// lease, and release it.
func (c *ConcurrencyLimiter) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	lease, err := c.sem.Acquire(ctx, n)
	return c.wrap(lease), err
}

func (c *ConcurrencyLimiter) wrap(lease limiter.Lease) limiter.Lease {
	if !lease.Granted() {
		return lease
	}
	return limiter.NewLease(lease.Permits(), c)
}

// ReleasePermits gives n permits back; [limiter.Lease.Release] calls it.
func (c *ConcurrencyLimiter) ReleasePermits(n int) { c.sem.ReleasePermits(n) }

// ReportOutcome learns from the outcome of a call: [limiter.Lease.Report]
// calls it. A Succeeded call's latency is a sample of the other side's
// latency (a zero latency teaches nothing); Throttled lowers the limit by a
// tenth at once (at most once per unloaded latency); Failed and Unknown
// teach nothing.
func (c *ConcurrencyLimiter) ReportOutcome(_ int, o limiter.Outcome, latency time.Duration) {
	if o != limiter.Throttled && (o != limiter.Succeeded || latency <= 0) {
		return
	}
	now := time.Since(c.origin).Seconds()
	inUse := c.sem.InUse()
	c.mu.Lock()
	defer c.mu.Unlock()
	var (
		l       float64
		changed bool
	)
	if o == limiter.Throttled {
		l, changed = c.c.throttled(now, latency.Seconds())
	} else {
		l, changed = c.c.sample(now, latency.Seconds(), inUse)
	}
	if n := int(math.Floor(l)); changed && n != c.sem.Limit() {
		c.sem.SetLimit(n) // n is between Floor and Ceiling: it cannot fail
	}
}

// Limit returns the limit in force.
func (c *ConcurrencyLimiter) Limit() int { return c.sem.Limit() }

// InUse returns the permits held by unreleased leases.
func (c *ConcurrencyLimiter) InUse() int { return c.sem.InUse() }

// Stats returns a snapshot of the limiter's state and counters.
func (c *ConcurrencyLimiter) Stats() limiter.Stats { return c.sem.Stats() }

// Quota returns the limiter's policy and state; see [limiter.Quota].
func (c *ConcurrencyLimiter) Quota() limiter.Quota { return c.sem.Quota() }

// Close fails every waiting Acquire with [limiter.ErrClosed]; later
// acquisitions fail with it too. Leases granted before may still be
// released and reported. It returns nil, also when called again.
func (c *ConcurrencyLimiter) Close() error { return c.sem.Close() }
