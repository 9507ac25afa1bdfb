package limiter

// windowed is what the three window limiters (FixedWindow, SlidingWindow,
// SlidingLog) share beyond the engine: a limit per window that can change.
type windowed struct {
	base
}

// limitPolicy is a policy with a limit per window.
type limitPolicy interface {
	limitRef() *int64
}

func (p *fixedWindow) limitRef() *int64   { return &p.limit }
func (p *slidingWindow) limitRef() *int64 { return &p.limit }

// Limit returns the current limit per window.
func (w *windowed) Limit() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(*w.pol.(limitPolicy).limitRef())
}

// SetLimit changes the limit at once; the permits already granted in the
// window count against it. Waiters asking for more than limit fail with
// ErrExceedsLimit; a zero or negative limit is an *OptionError.
func (w *windowed) SetLimit(limit int) error {
	if err := validLimit(limit); err != nil {
		return err
	}
	w.mu.Lock()
	*w.pol.(limitPolicy).limitRef() = int64(limit)
	w.mu.Unlock()
	w.kick()
	return nil
}
