package adaptive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/limiter"
)

// RateOptions configures NewRateLimiter.
type RateOptions struct {
	// Floor is the lowest rate: however often the other side throttles,
	// the limiter keeps granting at least this fast. Required.
	Floor limiter.Rate
	// Initial is the rate to start from; the zero Rate starts from Floor.
	// With no capacity found yet, the rate doubles every 0.4 s of
	// successful calls, so a low Initial costs little.
	Initial limiter.Rate
	// Ceiling is the highest rate: the limiter never grants faster,
	// whatever the other side accepts. Required.
	Ceiling limiter.Rate
	// Burst is the most permits granted at once, as in a token bucket: in
	// every interval, grants stay within Burst plus what the rates in force
	// allowed over it. Zero means 1: grants evenly spaced at the rate.
	Burst int
	// Queue configures Acquire's waiting.
	Queue limiter.QueueOptions
}

// RateLimiter is a rate limiter whose rate follows the capacity of the
// other side, learned from the outcomes its callers report with
// [limiter.Lease.Report]: down at once when calls are throttled, up while
// they succeed, always between Floor and Ceiling. See the package
// documentation for how it moves.
//
// Bound: it is a [limiter.TokenBucket] whose rate changes with
// [limiter.TokenBucket.SetRate], so in every interval the permits granted
// stay within Burst plus the integral, over the interval, of the rate in
// force, and never above Burst + Ceiling·t. Permits already granted when
// the rate falls stay counted: the lower rate applies to what follows. Its
// leases settle ([limiter.Lease.Settle]) as the bucket's own do, and the
// bound then holds over their actual costs.
//
// It is safe for concurrent use. TryAcquire and Acquire cost what the token
// bucket's do; a report takes a mutex, and, when the rate moves by a
// hundredth or more (or falls), changes the bucket's rate.
type RateLimiter struct {
	tb     *limiter.TokenBucket
	origin time.Time
	floor  limiter.Rate
	ceil   limiter.Rate
	epoch  atomic.Uint64 // c.epoch, for the grant path
	slots  [epochSlots]epochSlot

	mu      sync.Mutex
	c       rateControl
	applied float64 // the rate last set in the bucket, per second
}

// epochSlots is how many epochs' leases are told apart: a lease reported
// after this many decreases since its grant counts as recent (rare: it was
// outstanding through that many throttling events).
const epochSlots = 16

// epochSlot is the Releaser of the leases granted in one epoch (the time
// between two decreases), so that a report names the epoch of its grant
// without a per-lease allocation: a throttle of a lease granted before the
// last decrease was answered by it and lowers nothing more.
//
// It embeds the bucket that granted its leases, which keep the instant of
// their grant (limiter.Lease.WithReleaser), so that they settle with the
// bucket exactly as the bucket's own leases do.
type epochSlot struct {
	*limiter.TokenBucket
	l     *RateLimiter
	epoch atomic.Uint64
}

// ReleasePermits does nothing: a rate limiter's permits are spent when granted.
func (s *epochSlot) ReleasePermits(int) {}

// Spent reports true, so that [limiter.Lease.Holds] is false for the
// limiter's leases: their permits are spent when granted.
func (s *epochSlot) Spent() bool { return true }

// ReportOutcome passes an outcome to the limiter; see [limiter.Reporter].
func (s *epochSlot) ReportOutcome(permits int, o limiter.Outcome, latency time.Duration) {
	s.l.report(s.epoch.Load(), permits, o, latency)
}

// NewRateLimiter returns an adaptive rate limiter at Initial (or Floor),
// or an *limiter.OptionError naming the first invalid option.
func NewRateLimiter(opts RateOptions) (*RateLimiter, error) {
	opts, err := opts.validated()
	if err != nil {
		return nil, err
	}
	return newRateLimiter(opts)
}

// validated returns opts with Burst and Initial set when they were left
// zero, or an *limiter.OptionError naming the first invalid option.
func (opts RateOptions) validated() (RateOptions, error) {
	if opts.Burst == 0 {
		opts.Burst = 1
	}
	if opts.Initial.IsZero() {
		opts.Initial = opts.Floor
	}
	// The bucket's own validation, for each rate it will run at, named
	// after the option.
	for _, r := range []struct {
		field string
		rate  limiter.Rate
	}{{"Floor", opts.Floor}, {"Initial", opts.Initial}, {"Ceiling", opts.Ceiling}} {
		tb, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: r.rate, Burst: opts.Burst, Queue: opts.Queue})
		if err != nil {
			return opts, renamed(err, r.field)
		}
		tb.Close()
	}
	switch {
	case compareRates(opts.Floor, opts.Ceiling) > 0:
		return opts, &limiter.OptionError{Field: "Floor", Problem: fmt.Sprintf("%v is above Ceiling %v", opts.Floor, opts.Ceiling)}
	case compareRates(opts.Initial, opts.Floor) < 0:
		return opts, &limiter.OptionError{Field: "Initial", Problem: fmt.Sprintf("%v is below Floor %v", opts.Initial, opts.Floor)}
	case compareRates(opts.Initial, opts.Ceiling) > 0:
		return opts, &limiter.OptionError{Field: "Initial", Problem: fmt.Sprintf("%v is above Ceiling %v", opts.Initial, opts.Ceiling)}
	}
	return opts, nil
}

// newRateLimiter returns a limiter of validated options.
func newRateLimiter(opts RateOptions) (*RateLimiter, error) {
	tb, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: opts.Initial, Burst: opts.Burst, Queue: opts.Queue})
	if err != nil {
		return nil, err // validated
	}
	l := &RateLimiter{tb: tb, origin: time.Now(), floor: opts.Floor, ceil: opts.Ceiling}
	for i := range l.slots {
		l.slots[i].TokenBucket, l.slots[i].l = tb, l
	}
	l.c = newRateControl(perSecond(opts.Floor), perSecond(opts.Initial), perSecond(opts.Ceiling))
	l.applied = perSecond(opts.Initial)
	return l, nil
}

// renamed returns err with its field renamed when it names the bucket's Rate.
func renamed(err error, field string) error {
	var oe *limiter.OptionError
	if errors.As(err, &oe) && oe.Field == "Rate" {
		return &limiter.OptionError{Field: field, Problem: oe.Problem}
	}
	return err
}

// TryAcquire takes n permits if the rate in force has them now and nobody
// waits in Acquire; see [limiter.Limiter]. It does not allocate. Report the
// outcome of the work it admits on the returned lease.
func (l *RateLimiter) TryAcquire(n int) limiter.Lease {
	return l.wrap(l.tb.TryAcquire(n))
}

// Acquire waits until n permits are granted at the rate in force, ctx is
// done, the queue is full, or the limiter is closed; see [limiter.Limiter].
// Report the outcome of the work it admits on the returned lease.
func (l *RateLimiter) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	lease, err := l.tb.Acquire(ctx, n)
	return l.wrap(lease), err
}

// wrap gives a granted lease the Releaser of the current epoch, which takes
// its reports and settles it with the bucket.
func (l *RateLimiter) wrap(lease limiter.Lease) limiter.Lease {
	if !lease.Granted() {
		return lease
	}
	return lease.WithReleaser(&l.slots[l.epoch.Load()%epochSlots])
}

// Rate returns the rate in force: the one the limiter grants at now.
func (l *RateLimiter) Rate() limiter.Rate { return l.tb.Rate() }

// Stats returns a snapshot of the limiter's state and counters.
func (l *RateLimiter) Stats() limiter.Stats { return l.tb.Stats() }

// Quota returns the policy and state of the rate in force; see [limiter.Quota].
func (l *RateLimiter) Quota() limiter.Quota { return l.tb.Quota() }

// Foresee returns the wait of a request for n permits behind the queue at
// the rate in force; see [limiter.Foreseer].
func (l *RateLimiter) Foresee(n int) (time.Duration, bool) { return l.tb.Foresee(n) }

// Close fails every waiting Acquire with [limiter.ErrClosed]; later
// acquisitions fail with it too. Reports on leases granted before keep
// being taken. It returns nil, also when called again.
func (l *RateLimiter) Close() error { return l.tb.Close() }

// report moves the rate after an outcome of a lease granted in epoch.
func (l *RateLimiter) report(epoch uint64, permits int, o limiter.Outcome, latency time.Duration) {
	if o != limiter.Succeeded && o != limiter.Throttled {
		return // says nothing about capacity
	}
	now := time.Since(l.origin).Seconds()
	l.mu.Lock()
	defer l.mu.Unlock()
	var r float64
	if o == limiter.Succeeded {
		r = l.c.succeeded(now, permits, epoch, latency.Seconds())
		// Rises are applied in steps of a hundredth, and when they reach
		// the ceiling: each change of rate is a change of the bucket.
		if r < l.applied*1.01 && (r < l.c.ceil || l.applied == l.c.ceil) {
			return
		}
	} else {
		var down bool
		if r, down = l.c.throttled(now, epoch, latency.Seconds()); !down {
			return
		}
		l.slots[l.c.epoch%epochSlots].epoch.Store(l.c.epoch)
		l.epoch.Store(l.c.epoch)
	}
	l.apply(r)
}

// apply sets the bucket's rate to r per second, exactly Floor or Ceiling at
// the ends, and otherwise to r rounded down to about 1 part in 1,000.
func (l *RateLimiter) apply(r float64) {
	rate := l.rounded(r)
	if err := l.tb.SetRate(rate); err != nil {
		return // cannot happen: rate lies between two rates the bucket took
	}
	l.applied = perSecond(rate)
}

// rounded returns r per second as a Rate between Floor and Ceiling, never
// above r (but at least Floor).
func (l *RateLimiter) rounded(r float64) limiter.Rate {
	if r >= l.c.ceil {
		return l.ceil
	}
	// The shortest period of a second, a minute, an hour or a day over which
	// r is at least 1,000 events.
	per := time.Second
	for _, p := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour} {
		if r*per.Seconds() >= 1000 {
			break
		}
		per = p
	}
	n := math.Floor(r * per.Seconds())
	switch {
	case n < 1:
		return l.floor
	case n > 1e18: // past any ceiling a bucket takes
		return l.ceil
	}
	rate := limiter.Per(int(n), per)
	switch {
	case compareRates(rate, l.floor) <= 0:
		return l.floor
	case compareRates(rate, l.ceil) >= 0:
		return l.ceil
	}
	return rate
}

// perSecond returns r in events per second.
func perSecond(r limiter.Rate) float64 {
	return float64(r.Events()) / r.Period().Seconds()
}
