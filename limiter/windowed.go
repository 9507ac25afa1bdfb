package limiter

// windowed is what the three window limiters (FixedWindow, SlidingWindow,
// SlidingLog) share beyond the engine: a limit per window that can change.
type windowed struct {
	base
	limit *int64 // the policy's limit, guarded by base.mu
}

// initWindowed makes w a window limiter of policy p, whose limit is *limit.
func (w *windowed) initWindowed(p policy, limit *int64, q QueueOptions) {
	w.limit = limit
	w.init(p, nil, q)
}

// Limit returns the current limit per window.
func (w *windowed) Limit() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(*w.limit)
}

// SetLimit changes the limit at once; the permits already granted in the
// window count against it. Waiters asking for more than limit fail with
// ErrExceedsLimit; a zero or negative limit is an *OptionError.
func (w *windowed) SetLimit(limit int) error {
	if err := validLimit(limit); err != nil {
		return err
	}
	w.mu.Lock()
	*w.limit = int64(limit)
	w.mu.Unlock()
	w.kick()
	return nil
}
