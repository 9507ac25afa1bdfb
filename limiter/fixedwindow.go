package limiter

import (
	"math"
	"time"
)

// FixedWindowOptions configures NewFixedWindow.
type FixedWindowOptions struct {
	// Limit is the most permits granted in one window.
	Limit int
	// Window is the window's length; windows are aligned to the limiter's
	// creation: [0, Window), [Window, 2·Window), …
	Window time.Duration
	// Queue configures Acquire's waiting.
	Queue QueueOptions
}

// FixedWindow counts permits in consecutive aligned windows and resets the
// count when a window ends. It is the cheapest window, and the loosest: up to
// 2·Limit permits can be granted across a window boundary. Use SlidingLog
// when at most Limit in any window of length Window is what you need.
//
// Bound: at most Limit permits in each aligned window.
type FixedWindow struct {
	windowed
	p fixedWindow
}

type fixedWindow struct {
	lockedState
	limit, window int64
	win, count    int64
}

// NewFixedWindow returns a fixed-window limiter, or an *OptionError naming
// the first invalid option.
func NewFixedWindow(opts FixedWindowOptions) (*FixedWindow, error) {
	if err := validWindowed(opts.Limit, opts.Window, opts.Queue); err != nil {
		return nil, err
	}
	f := &FixedWindow{p: fixedWindow{limit: int64(opts.Limit), window: int64(opts.Window)}}
	f.initWindowed(&f.p, &f.p.limit, opts.Queue)
	return f, nil
}

func (p *fixedWindow) roll(now int64) {
	if idx := now / p.window; idx != p.win {
		p.win, p.count = idx, 0
	}
}

func (p *fixedWindow) take(now int64, n int) (bool, int64) {
	p.roll(now)
	// need <= limit-count, not count+need <= limit: that sum wraps for a
	// limit near MaxInt.
	if max(int64(n), 1) <= p.limit-p.count {
		p.count += int64(n)
		return true, 0
	}
	return false, p.untilNext(now)
}

// untilNext returns the wait from now until the next window starts.
func (p *fixedWindow) untilNext(now int64) int64 {
	return waitUntil(now, p.win*p.window, p.window)
}

// waitUntil returns the wait from now until from+d (from <= now, d > 0),
// saturated so that now plus the wait is at most MaxInt64: an instant
// beyond the clock's range is never reached, and must not wrap into the past.
func waitUntil(now, from, d int64) int64 {
	if from > math.MaxInt64-d {
		return math.MaxInt64 - now
	}
	return from + d - now
}

func (p *fixedWindow) quota(now int64) Quota {
	p.roll(now)
	q := Quota{Limit: p.limit, Window: time.Duration(p.window), Remaining: p.limit - p.count}
	if p.count > 0 {
		q.Reset = time.Duration(p.untilNext(now))
	}
	return q
}

// untake exactly undoes a successful take(now, n) made under the same hold
// of base.mu with nothing in between.
func (p *fixedWindow) untake(_ int64, n int) { p.count -= int64(n) }

// settle books a settled lease (see policy.settle): overuse counts in the
// current window (a debt beyond the limit is the same as the limit: no
// grant until the window ends); unused permits come back while the window
// the lease was granted in is current.
func (p *fixedWindow) settle(now, at, granted, actual int64) {
	p.roll(now)
	if actual > granted {
		p.count += min(actual-granted, p.limit)
		return
	}
	if at >= 0 && at/p.window == p.win {
		p.count -= min(granted-actual, p.count)
	}
}

func (p *fixedWindow) maxRequest() int64 { return p.limit }

func (p *fixedWindow) available(now int64) int64 {
	p.roll(now)
	return p.limit - p.count
}

func (p *fixedWindow) idle(now int64) bool {
	p.roll(now)
	return p.count == 0
}
