package limiter

import (
	"context"
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
	base
	p fixedWindow
}

type fixedWindow struct {
	limit, window int64
	win, count    int64
}

// NewFixedWindow returns a fixed-window limiter, or an *OptionError naming
// the first invalid option.
func NewFixedWindow(opts FixedWindowOptions) (*FixedWindow, error) {
	if err := validLimit(opts.Limit); err != nil {
		return nil, err
	}
	if err := validWindow(opts.Window); err != nil {
		return nil, err
	}
	if err := opts.Queue.validate(); err != nil {
		return nil, err
	}
	f := &FixedWindow{p: fixedWindow{limit: int64(opts.Limit), window: int64(opts.Window)}}
	f.init(&f.p, nil, opts.Queue)
	return f, nil
}

func validLimit(limit int) error {
	if limit <= 0 {
		return optErr("Limit", "must be positive, got %d", limit)
	}
	return nil
}

func validWindow(w time.Duration) error {
	if w <= 0 {
		return optErr("Window", "must be positive, got %v", w)
	}
	return nil
}

func (p *fixedWindow) roll(now int64) {
	if idx := now / p.window; idx != p.win {
		p.win, p.count = idx, 0
	}
}

func (p *fixedWindow) take(now int64, n int) (bool, int64) {
	p.roll(now)
	if p.count+max(int64(n), 1) <= p.limit {
		p.count += int64(n)
		return true, 0
	}
	return false, (p.win+1)*p.window - now
}

// untake exactly undoes a successful take(now, n) made under the same hold
// of base.mu with nothing in between.
func (p *fixedWindow) untake(_ int64, n int) { p.count -= int64(n) }

func (p *fixedWindow) maxRequest() int64 { return p.limit }

func (p *fixedWindow) available(now int64) int64 {
	p.roll(now)
	return p.limit - p.count
}

func (p *fixedWindow) idle(now int64) bool {
	p.roll(now)
	return p.count == 0
}

// TryAcquire takes n permits if the current window has room and nobody waits.
func (f *FixedWindow) TryAcquire(n int) Lease { return f.tryAcquire(n) }

// Acquire waits until n permits are granted; see Limiter.
func (f *FixedWindow) Acquire(ctx context.Context, n int) (Lease, error) {
	return f.acquire(ctx, n)
}

// Limit returns the current limit per window.
func (f *FixedWindow) Limit() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int(f.p.limit)
}

// SetLimit changes the limit at once, counting the permits already granted
// in the current window. Waiters asking for more than limit fail with ErrExceedsLimit.
func (f *FixedWindow) SetLimit(limit int) error {
	if err := validLimit(limit); err != nil {
		return err
	}
	f.mu.Lock()
	f.p.limit = int64(limit)
	f.mu.Unlock()
	f.kick()
	return nil
}

// Stats returns a snapshot of the limiter's state and counters.
func (f *FixedWindow) Stats() Stats { return f.stats() }

// Close fails every waiting Acquire with ErrClosed; later acquisitions fail
// with ErrClosed too. It returns nil, also when called again.
func (f *FixedWindow) Close() error { return f.close() }

func (f *FixedWindow) refund(n int, since time.Time) {
	f.mu.Lock()
	f.p.roll(f.now())
	// The permits were taken in [since, now]: in the current window if since is.
	ok := max(f.instant(since), 0)/f.p.window == f.p.win && f.p.count >= int64(n)
	if ok {
		f.p.count -= int64(n)
		f.granted.Add(-1)
	}
	f.mu.Unlock()
	if ok {
		f.kick()
	}
}

// SlidingWindowOptions configures NewSlidingWindow.
type SlidingWindowOptions struct {
	// Limit is the most permits granted in any Segments consecutive segments.
	Limit int
	// Window is the window's length.
	Window time.Duration
	// Segments is the number of segments the window is divided into; the
	// window slides one segment at a time. 1 makes a fixed window; more
	// segments cost memory (8 bytes each) and bring the bound closer to
	// "any window". At most 1<<20, and at most Window in nanoseconds.
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
	base
	p slidingWindow
}

type slidingWindow struct {
	limit, window, segs int64
	counts              []int64
	cur, total          int64
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
		counts: make([]int64, opts.Segments),
	}}
	s.init(&s.p, nil, opts.Queue)
	return s, nil
}

func (p *slidingWindow) segOf(t int64) int64 {
	j, _ := mulDiv(t, p.segs, p.window)
	return j
}

func (p *slidingWindow) segStart(j int64) int64 {
	t, _ := mulDivCeil(j, p.window, p.segs)
	return t
}

func (p *slidingWindow) roll(now int64) {
	j := p.segOf(max(now, 0))
	if j <= p.cur {
		return
	}
	if j-p.cur >= p.segs {
		clear(p.counts)
		p.total = 0
	} else {
		for i := p.cur + 1; i <= j; i++ {
			p.total -= p.counts[i%p.segs]
			p.counts[i%p.segs] = 0
		}
	}
	p.cur = j
}

func (p *slidingWindow) take(now int64, n int) (bool, int64) {
	p.roll(now)
	need := max(int64(n), 1)
	if p.total+need <= p.limit {
		p.counts[p.cur%p.segs] += int64(n)
		p.total += int64(n)
		return true, 0
	}
	// At the start of segment cur+i, segment cur+i-segs leaves the window.
	var gone int64
	for i := int64(1); i <= p.segs; i++ {
		if old := p.cur + i - p.segs; old >= 0 {
			gone += p.counts[old%p.segs]
		}
		if p.total-gone+need <= p.limit {
			return false, p.segStart(p.cur+i) - now
		}
	}
	return false, p.segStart(p.cur+p.segs) - now
}

// untake exactly undoes a successful take(now, n) made under the same hold
// of base.mu with nothing in between: the permits come out of the current
// segment, where take put them.
func (p *slidingWindow) untake(_ int64, n int) {
	p.counts[p.cur%p.segs] -= int64(n)
	p.total -= int64(n)
}

func (p *slidingWindow) maxRequest() int64 { return p.limit }

func (p *slidingWindow) available(now int64) int64 {
	p.roll(now)
	return p.limit - p.total
}

func (p *slidingWindow) idle(now int64) bool {
	p.roll(now)
	return p.total == 0
}

// TryAcquire takes n permits if the window has room and nobody waits.
func (s *SlidingWindow) TryAcquire(n int) Lease { return s.tryAcquire(n) }

// Acquire waits until n permits are granted; see Limiter.
func (s *SlidingWindow) Acquire(ctx context.Context, n int) (Lease, error) {
	return s.acquire(ctx, n)
}

// Limit returns the current limit per window.
func (s *SlidingWindow) Limit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.p.limit)
}

// SetLimit changes the limit at once, counting the permits already granted
// in the window. Waiters asking for more than limit fail with ErrExceedsLimit.
func (s *SlidingWindow) SetLimit(limit int) error {
	if err := validLimit(limit); err != nil {
		return err
	}
	s.mu.Lock()
	s.p.limit = int64(limit)
	s.mu.Unlock()
	s.kick()
	return nil
}

// Stats returns a snapshot of the limiter's state and counters.
func (s *SlidingWindow) Stats() Stats { return s.stats() }

// Close fails every waiting Acquire with ErrClosed; later acquisitions fail
// with ErrClosed too. It returns nil, also when called again.
func (s *SlidingWindow) Close() error { return s.close() }

func (s *SlidingWindow) refund(n int, since time.Time) {
	s.mu.Lock()
	s.p.roll(s.now())
	i := s.p.cur % s.p.segs
	// The permits were taken in [since, now]: in the current segment if since is.
	ok := s.p.segOf(max(s.instant(since), 0)) == s.p.cur && s.p.counts[i] >= int64(n)
	if ok {
		s.p.counts[i] -= int64(n)
		s.p.total -= int64(n)
		s.granted.Add(-1)
	}
	s.mu.Unlock()
	if ok {
		s.kick()
	}
}
