package limiter

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
	bucket
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
	t.initBucket(c, opts.Queue)
	return t, nil
}

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
	t.reconfigure(c)
	return nil
}
