package limiter

import (
	"math"
	"time"
)

// SlidingWindowOptions configures NewSlidingWindow.
type SlidingWindowOptions struct {
	// Limit is the most permits granted in any Segments consecutive segments.
	Limit int
	// Window is the window's length.
	Window time.Duration
	// Segments is the number of segments the window is divided into; the
	// window slides one segment at a time. 1 makes a fixed window; more
	// segments bring the bound closer to "any window". Memory follows the
	// segments that hold grants (16 bytes each), not Segments, and a decision
	// costs a binary search of them. At most 1<<20, and at most Window in
	// nanoseconds.
	Segments int
	// Queue configures Acquire's waiting.
	Queue QueueOptions
}

// SlidingWindow divides time into segments of Window/Segments (boundaries
// at ⌈i·Window/Segments⌉ ns from the limiter's creation) and counts permits
// per segment; a request is granted when the last Segments segments,
// including the current one, hold at most Limit permits with it.
//
// Bound: at most Limit permits in every window made of Segments consecutive
// segments. Any window of length Window lies within Segments+1 consecutive
// segments, so no window of length Window holds more than 2·Limit; use
// SlidingLog for exactly Limit.
type SlidingWindow struct {
	windowed
	p slidingWindow
}

// slidingWindow is the policy of SlidingWindow and of SlidingLog, which is a
// sliding window of one segment per nanosecond: its segments are the
// instants of its grants.
type slidingWindow struct {
	lockedState
	limit, window, segs int64
	log                 grantLog // keyed by segment: the segments holding grants
}

// NewSlidingWindow returns a segmented sliding-window limiter, or an
// *OptionError naming the first invalid option.
func NewSlidingWindow(opts SlidingWindowOptions) (*SlidingWindow, error) {
	if err := validLimit(opts.Limit); err != nil {
		return nil, err
	}
	if err := validWindow(opts.Window); err != nil {
		return nil, err
	}
	if opts.Segments <= 0 || opts.Segments > 1<<20 {
		return nil, optErr("Segments", "must be between 1 and %d, got %d", 1<<20, opts.Segments)
	}
	if int64(opts.Segments) > int64(opts.Window) {
		return nil, optErr("Segments", "%d segments do not fit in a window of %v", opts.Segments, opts.Window)
	}
	if err := opts.Queue.validate(); err != nil {
		return nil, err
	}
	s := &SlidingWindow{p: slidingWindow{
		limit: int64(opts.Limit), window: int64(opts.Window), segs: int64(opts.Segments),
	}}
	s.p.log.span = s.p.segs
	s.initWindowed(&s.p, &s.p.limit, opts.Queue)
	return s, nil
}

// segOf returns the segment holding instant t >= 0: floor(t·segs/window),
// which is at most t since segs <= window, so it fits.
func (p *slidingWindow) segOf(t int64) int64 {
	if p.segs == p.window {
		return t // a log: one segment per nanosecond
	}
	j, _ := mulDiv(t, p.segs, p.window)
	return j
}

// leaves returns the instant at which segment j leaves the window: the
// start of segment j+segs, ⌈(j+segs)·window/segs⌉, or MaxInt64 when that is
// beyond the clock's range.
func (p *slidingWindow) leaves(j int64) int64 {
	if j > math.MaxInt64-p.segs {
		return math.MaxInt64
	}
	if p.segs == p.window {
		return j + p.segs
	}
	t, ok := mulDivCeil(j+p.segs, p.window, p.segs)
	if !ok {
		return math.MaxInt64
	}
	return t
}

// roll drops the segments that have left the window and returns the
// current segment.
func (p *slidingWindow) roll(now int64) int64 {
	cur := p.segOf(max(now, 0))
	p.log.expire(cur - p.segs)
	return cur
}

func (p *slidingWindow) take(now int64, n int) (bool, int64) {
	cur := p.roll(now)
	need := max(int64(n), 1)
	free := p.limit - p.log.total() // negative after a lowered limit
	if need <= free {
		p.log.add(cur, int64(n))
		return true, 0
	}
	if need > p.limit {
		return false, -1 // only SetLimit can make room
	}
	// Segments leave oldest first: the request fits once the oldest
	// segment that, with those before it, holds need-free permits has left.
	j, ok := p.log.keyFreeing(uint64(need - free))
	if !ok {
		return false, -1 // unreachable while need <= limit
	}
	return false, p.leaves(j) - now
}

// untake exactly undoes a successful take(now, n) made under the same hold
// of base.mu with nothing in between: the permits come out of the current
// segment (the newest entry), where take put them, and the entry goes if
// that empties it.
func (p *slidingWindow) untake(_ int64, n int) { p.log.untake(int64(n)) }

// settle books a settled lease (see policy.settle): overuse is logged as
// granted now (a debt beyond the limit is the same as the limit: no grant
// for a window); unused permits come out of the lease's own entry (its
// segment, or its instant for the log) while it is in the window.
func (p *slidingWindow) settle(now, at, granted, actual int64) {
	cur := p.roll(now)
	if actual > granted {
		p.log.add(cur, min(actual-granted, p.limit))
		return
	}
	if at >= 0 && at <= now {
		p.log.giveBack(p.segOf(at), granted-actual)
	}
}

func (p *slidingWindow) maxRequest() int64 { return p.limit }

func (p *slidingWindow) available(now int64) int64 {
	p.roll(now)
	return p.limit - p.log.total()
}

func (p *slidingWindow) idle(now int64) bool {
	p.roll(now)
	return p.log.total() == 0
}

func (p *slidingWindow) quota(now int64) Quota {
	p.roll(now)
	q := Quota{Limit: p.limit, Window: time.Duration(p.window), Remaining: p.limit - p.log.total()}
	// All is back when the newest segment holding a grant leaves the window.
	if j, _, ok := p.log.newest(); ok {
		q.Reset = time.Duration(p.leaves(j) - now)
	}
	return q
}
