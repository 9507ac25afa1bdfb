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
	p slidingLog
}

type slidingLog struct {
	limit, window int64
	log           grantLog // keyed by the instant of the grants
}

// NewSlidingLog returns a strict sliding-log limiter, or an *OptionError
// naming the first invalid option.
func NewSlidingLog(opts SlidingLogOptions) (*SlidingLog, error) {
	if err := validWindowed(opts.Limit, opts.Window, opts.Queue); err != nil {
		return nil, err
	}
	s := &SlidingLog{p: slidingLog{limit: int64(opts.Limit), window: int64(opts.Window)}}
	s.p.log.span = s.p.window
	s.init(&s.p, nil, opts.Queue)
	return s, nil
}

// expire drops the grants made at or before now-window: they are out of
// every window that ends after now. (now >= 0, so now-window cannot wrap,
// where at+window could.)
func (p *slidingLog) expire(now int64) { p.log.expire(now - p.window) }

func (p *slidingLog) take(now int64, n int) (bool, int64) {
	p.expire(now)
	need := max(int64(n), 1)
	free := p.limit - p.log.total() // negative after a lowered limit
	if need <= free {
		p.log.add(now, int64(n))
		return true, 0
	}
	if need > p.limit {
		return false, -1 // only SetLimit can make room
	}
	// The earliest instant at which enough of the oldest grants have left.
	at, ok := p.log.keyFreeing(uint64(need - free))
	if !ok {
		return false, -1 // unreachable while need <= limit
	}
	return false, waitUntil(now, at, p.window)
}

// untake exactly undoes a successful take(now, n) made under the same hold
// of base.mu with nothing in between: take merged the grant into the newest
// entry, so the permits come out of it, and the entry goes if that empties it.
func (p *slidingLog) untake(_ int64, n int) { p.log.untake(int64(n)) }

func (p *slidingLog) maxRequest() int64 { return p.limit }

func (p *slidingLog) available(now int64) int64 {
	p.expire(now)
	return p.limit - p.log.total()
}

func (p *slidingLog) idle(now int64) bool {
	p.expire(now)
	return p.log.total() == 0
}

func (p *slidingLog) quota(now int64) Quota {
	p.expire(now)
	q := Quota{Limit: p.limit, Window: time.Duration(p.window), Remaining: p.limit - p.log.total()}
	if at, _, ok := p.log.newest(); ok {
		q.Reset = time.Duration(waitUntil(now, at, p.window))
	}
	return q
}
