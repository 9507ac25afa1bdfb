package limiter

import (
	"time"
)

// SlidingLogOptions configures NewSlidingLog.
type SlidingLogOptions struct {
	// Limit is the most permits granted in any window of length Window.
	Limit int
	// Window is the window's length.
	Window time.Duration
	// Queue configures Acquire's waiting.
	Queue QueueOptions
}

// SlidingLog is the strict limiter: it keeps a log of its grants (instant
// and size) for the last Window and grants a request only if the log plus
// the request holds at most Limit permits. There is no burst at a window
// edge and no rounding: at every instant t, the permits granted in
// (t-Window, t] number at most Limit. Memory follows the grants of the last
// Window: 16 bytes per instant at which permits were granted (at most Limit
// entries), given back as they leave the window. A decision costs a binary
// search of the log, not a walk through it.
//
// With saturating demand it grants exactly at the bound: a log of 2 per
// second serving a loop whose body takes 250 ms starts the body at 0, 250,
// 1000, 1250, 2000, 2250 ms, …
//
// Bound: at most Limit permits in ANY window [t, t+Window).
type SlidingLog struct {
	windowed
	p slidingWindow // with one segment per nanosecond: the log of grant instants
}

// NewSlidingLog returns a strict sliding-log limiter, or an *OptionError
// naming the first invalid option.
func NewSlidingLog(opts SlidingLogOptions) (*SlidingLog, error) {
	if err := validWindowed(opts.Limit, opts.Window, opts.Queue); err != nil {
		return nil, err
	}
	w := int64(opts.Window)
	s := &SlidingLog{p: slidingWindow{limit: int64(opts.Limit), window: w, segs: w}}
	s.p.log.span = w
	s.initWindowed(&s.p, &s.p.limit, opts.Queue)
	return s, nil
}
