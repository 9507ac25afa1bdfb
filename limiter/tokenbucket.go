package limiter

import (
	"context"
)

// TokenBucketOptions configures NewTokenBucket.
type TokenBucketOptions struct {
	// Rate is how fast the bucket refills: limiter.Per(100, time.Second).
	Rate Rate
	// Burst is the bucket's capacity: the most permits granted at once, and
	// the largest request. Zero or negative is an error.
	Burst int
	// Queue configures Acquire's waiting.
	Queue QueueOptions
}

// TokenBucket is a token bucket, implemented as the generic cell rate
// algorithm: its state is one word, so TryAcquire is a clock read and one
// compare-and-swap, with no lock and no allocation.
//
// Bound: in every interval of length t, it grants at most Burst + Rate·t
// permits. A new bucket is full.
type TokenBucket struct {
	base
	g gcra
}

// NewTokenBucket returns a full token bucket, or an *OptionError naming the
// first invalid option.
func NewTokenBucket(opts TokenBucketOptions) (*TokenBucket, error) {
	if err := opts.Queue.validate(); err != nil {
		return nil, err
	}
	c, err := newGCRAConfig(opts.Rate, int64(opts.Burst), false)
	if err != nil {
		return nil, err
	}
	t := &TokenBucket{}
	t.g.tat = &t.word
	t.g.cfg.Store(c)
	t.init(&t.g, nil, opts.Queue)
	return t, nil
}

// TryAcquire takes n permits if the bucket holds them now and nobody waits
// in Acquire. It never blocks and does not allocate.
func (t *TokenBucket) TryAcquire(n int) Lease {
	if t.gate.Load() == 0 && n >= 0 {
		switch st, retry := t.g.tryTake(t.now(), int64(n)); st {
		case takeOK:
			return t.grant(n)
		case takeLimited:
			return t.reject(reasonLimited, retry)
		}
	}
	return t.tryAcquire(n)
}

// Acquire waits until n permits are granted; see Limiter. When nobody
// waits and the bucket holds n permits, it takes them without a lock.
func (t *TokenBucket) Acquire(ctx context.Context, n int) (Lease, error) {
	if t.gate.Load() == 0 && n >= 0 && ctx.Err() == nil {
		now := t.now()
		if st, _ := t.g.tryTake(now, int64(n)); st == takeOK {
			return t.grant(n), nil
		}
	}
	return t.acquire(ctx, n)
}

// Rate returns the current refill rate.
func (t *TokenBucket) Rate() Rate { return t.g.cfg.Load().rate }

// Burst returns the current capacity.
func (t *TokenBucket) Burst() int { return int(t.g.cfg.Load().burst) }

// SetRate changes the refill rate at once. Permits already spent stay spent:
// the bucket's deficit is carried over in permits, so the bound holds across
// the change (Burst + old rate before it, Burst + new rate after it).
func (t *TokenBucket) SetRate(r Rate) error { return t.set(r, t.Burst()) }

// SetBurst changes the capacity at once; a smaller bucket keeps its deficit.
// Waiters that ask for more than the new Burst fail with ErrExceedsLimit.
func (t *TokenBucket) SetBurst(burst int) error { return t.set(t.Rate(), burst) }

func (t *TokenBucket) set(r Rate, burst int) error {
	c, err := newGCRAConfig(r, int64(burst), false)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.g.reconfigure(t.now(), c)
	t.mu.Unlock()
	t.kick()
	return nil
}

// Stats returns a snapshot of the bucket's state and counters.
func (t *TokenBucket) Stats() Stats { return t.stats() }

// Close fails every waiting Acquire with ErrClosed; later acquisitions fail
// with ErrClosed too. It returns nil, also when called again.
func (t *TokenBucket) Close() error { return t.close() }

// LeakyBucketOptions configures NewLeakyBucket.
type LeakyBucketOptions struct {
	// Rate is the pace: grants are spaced by at least 1/Rate per permit.
	Rate Rate
	// Queue configures Acquire's waiting; a pacer usually wants a Limit.
	Queue QueueOptions
}

// LeakyBucket is a pacer: it spaces grants evenly and never bursts. After a
// grant of k permits at t, the next grant comes no earlier than t + k/Rate.
// Callers that arrive early wait in its queue (bounded by Queue.Limit), and
// leave it one at a time at the pace, like water from a leaky bucket.
//
// Bound: consecutive grants are at least (permits of the first)/Rate apart.
type LeakyBucket struct {
	base
	g gcra
}

// NewLeakyBucket returns a pacer whose first grant may come at once, or an
// *OptionError naming the first invalid option.
func NewLeakyBucket(opts LeakyBucketOptions) (*LeakyBucket, error) {
	if err := opts.Queue.validate(); err != nil {
		return nil, err
	}
	c, err := newGCRAConfig(opts.Rate, 1, true)
	if err != nil {
		return nil, err
	}
	l := &LeakyBucket{}
	l.g.tat = &l.word
	l.g.cfg.Store(c)
	l.init(&l.g, nil, opts.Queue)
	return l, nil
}

// TryAcquire takes n permits if the pacer's next slot has come and nobody
// waits in Acquire. It never blocks and does not allocate.
func (l *LeakyBucket) TryAcquire(n int) Lease {
	if l.gate.Load() == 0 && n >= 0 {
		switch st, retry := l.g.tryTake(l.now(), int64(n)); st {
		case takeOK:
			return l.grant(n)
		case takeLimited:
			return l.reject(reasonLimited, retry)
		}
	}
	return l.tryAcquire(n)
}

// Acquire waits for the pacer's next slot; see Limiter. When nobody waits
// and the slot has come, it takes it without a lock.
func (l *LeakyBucket) Acquire(ctx context.Context, n int) (Lease, error) {
	if l.gate.Load() == 0 && n >= 0 && ctx.Err() == nil {
		now := l.now()
		if st, _ := l.g.tryTake(now, int64(n)); st == takeOK {
			return l.grant(n), nil
		}
	}
	return l.acquire(ctx, n)
}

// Rate returns the current pace.
func (l *LeakyBucket) Rate() Rate { return l.g.cfg.Load().rate }

// SetRate changes the pace at once; the wait owed by the last grant is
// converted to the new pace.
func (l *LeakyBucket) SetRate(r Rate) error {
	c, err := newGCRAConfig(r, 1, true)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.g.reconfigure(l.now(), c)
	l.mu.Unlock()
	l.kick()
	return nil
}

// Stats returns a snapshot of the pacer's state and counters.
func (l *LeakyBucket) Stats() Stats { return l.stats() }

// Close fails every waiting Acquire with ErrClosed; later acquisitions fail
// with ErrClosed too. It returns nil, also when called again.
func (l *LeakyBucket) Close() error { return l.close() }
