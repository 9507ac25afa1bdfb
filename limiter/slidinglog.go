package limiter

import (
	"context"
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
// (t-Window, t] number at most Limit. Memory grows with the number of
// grants in a window (16 bytes each, at most Limit entries).
//
// With saturating demand it grants exactly at the bound: a log of 2 per
// second serving a loop whose body takes 250 ms starts the body at 0, 250,
// 1000, 1250, 2000, 2250 ms, …
//
// Bound: at most Limit permits in ANY window [t, t+Window).
type SlidingLog struct {
	base
	p slidingLog
}

type logEntry struct{ at, n int64 }

type slidingLog struct {
	limit, window int64
	ents          []logEntry // ring buffer, oldest at head
	head, size    int
	total         int64
}

// NewSlidingLog returns a strict sliding-log limiter, or an *OptionError
// naming the first invalid option.
func NewSlidingLog(opts SlidingLogOptions) (*SlidingLog, error) {
	if err := validLimit(opts.Limit); err != nil {
		return nil, err
	}
	if err := validWindow(opts.Window); err != nil {
		return nil, err
	}
	if err := opts.Queue.validate(); err != nil {
		return nil, err
	}
	s := &SlidingLog{p: slidingLog{limit: int64(opts.Limit), window: int64(opts.Window)}}
	s.init(&s.p, nil, opts.Queue)
	return s, nil
}

func (p *slidingLog) at(i int) *logEntry { return &p.ents[(p.head+i)%len(p.ents)] }

func (p *slidingLog) expire(now int64) {
	for p.size > 0 {
		e := p.at(0)
		if e.at+p.window > now {
			return
		}
		p.total -= e.n
		p.head = (p.head + 1) % len(p.ents)
		p.size--
	}
}

func (p *slidingLog) push(now, n int64) {
	if p.size > 0 {
		if last := p.at(p.size - 1); last.at == now {
			last.n += n
			return
		}
	}
	if p.size == len(p.ents) {
		grown := make([]logEntry, max(2*len(p.ents), 8))
		for i := range p.size {
			grown[i] = *p.at(i)
		}
		p.ents, p.head = grown, 0
	}
	*p.at(p.size) = logEntry{at: now, n: n}
	p.size++
}

func (p *slidingLog) take(now int64, n int) (bool, int64) {
	p.expire(now)
	need := max(int64(n), 1)
	if p.total+need <= p.limit {
		if n > 0 {
			p.push(now, int64(n))
			p.total += int64(n)
		}
		return true, 0
	}
	// The earliest instant at which enough of the oldest grants have left.
	var gone int64
	for i := range p.size {
		e := p.at(i)
		gone += e.n
		if p.total-gone+need <= p.limit {
			return false, e.at + p.window - now
		}
	}
	return false, -1 // unreachable while need <= limit
}

// untake exactly undoes a successful take(now, n) made under the same hold
// of base.mu with nothing in between: take merged the grant into the newest
// entry, so the permits come out of it, and the entry goes if that empties it.
func (p *slidingLog) untake(_ int64, n int) {
	if n == 0 {
		return
	}
	last := p.at(p.size - 1)
	last.n -= int64(n)
	p.total -= int64(n)
	if last.n == 0 {
		p.size--
	}
}

func (p *slidingLog) maxRequest() int64 { return p.limit }

func (p *slidingLog) available(now int64) int64 {
	p.expire(now)
	return p.limit - p.total
}

func (p *slidingLog) idle(now int64) bool {
	p.expire(now)
	return p.total == 0
}

// TryAcquire takes n permits if the log has room for them now and nobody waits.
func (s *SlidingLog) TryAcquire(n int) Lease { return s.tryAcquire(n) }

// Acquire waits until n permits are granted; see Limiter.
func (s *SlidingLog) Acquire(ctx context.Context, n int) (Lease, error) {
	return s.acquire(ctx, n)
}

// Limit returns the current limit per window.
func (s *SlidingLog) Limit() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.p.limit)
}

// SetLimit changes the limit at once; the grants already in the log count
// against it. Waiters asking for more than limit fail with ErrExceedsLimit.
func (s *SlidingLog) SetLimit(limit int) error {
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
func (s *SlidingLog) Stats() Stats { return s.stats() }

// Close fails every waiting Acquire with ErrClosed; later acquisitions fail
// with ErrClosed too. It returns nil, also when called again.
func (s *SlidingLog) Close() error { return s.close() }

func (s *SlidingLog) refund(n int, since time.Time) {
	s.mu.Lock()
	from := s.instant(since) // the permits were taken in [from, now]
	left := int64(n)
	for i := s.p.size - 1; i >= 0 && left > 0; i-- {
		e := s.p.at(i)
		if e.at < from {
			break
		}
		d := min(e.n, left)
		e.n -= d
		s.p.total -= d
		left -= d
	}
	if left == 0 {
		s.granted.Add(-1)
	}
	s.mu.Unlock()
	s.kick()
}
