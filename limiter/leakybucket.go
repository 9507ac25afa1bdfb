package limiter

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
	bucket
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
	l.initBucket(c, opts.Queue)
	return l, nil
}

// SetRate changes the pace at once; the wait owed by the last grant is
// converted to the new pace.
func (l *LeakyBucket) SetRate(r Rate) error {
	c, err := newGCRAConfig(r, 1, true)
	if err != nil {
		return err
	}
	l.reconfigure(c)
	return nil
}
