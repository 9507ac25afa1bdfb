package pipe

import (
	"context"
	"errors"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/internal/exact"
	"github.com/rategate/rategate/internal/precise"
	"github.com/rategate/rategate/limiter"
)

// chunkTime caps one piece at the permits the limiter's rate refills in this
// long, so that a slow stream still moves in small steps (a progress line
// advances, a rate change applies soon, a deadline rarely falls inside one
// wait).
const chunkTime = 100 * time.Millisecond

// Optional methods through which a limiter says what it can grant. This
// package's TokenBucket has Burst and Rate, LeakyBucket has Rate, the windows
// and Concurrency have Limit.
type (
	burster     interface{ Burst() int }
	limitHolder interface{ Limit() int }
	rateHolder  interface{ Rate() limiter.Rate }
)

// member is one limiter whose grants a stream must pass, with what it tells
// about itself.
type member struct {
	burst burster
	limit limitHolder
	rate  rateHolder
}

func describe(l limiter.Limiter) member {
	var m member
	m.burst, _ = l.(burster)
	m.limit, _ = l.(limitHolder)
	m.rate, _ = l.(rateHolder)
	return m
}

// most returns the most permits m can grant at once, or 0 if unknown.
func (m member) most() int {
	switch {
	case m.burst != nil:
		return m.burst.Burst()
	case m.limit != nil:
		return m.limit.Limit()
	}
	return 0
}

// refill returns how long m's rate takes to refill k permits, rounded down
// (MaxInt64 if it does not fit), and false when m tells no rate.
func (m member) refill(k int) (time.Duration, bool) {
	if m.rate == nil {
		return 0, false
	}
	r := m.rate.Rate()
	return time.Duration(mulDiv(int64(k), int64(r.Period()), r.Events())), true
}

// mulDiv returns a·b/c rounded down for a, b >= 0 and c > 0, or MaxInt64
// when the quotient does not fit: exact, with no floating point.
func mulDiv(a, b, c int64) int64 {
	if q, ok := exact.MulDiv(a, b, c); ok {
		return q
	}
	return math.MaxInt64
}

// shaper is what a Reader and a Writer share: the limiter, how big a piece
// to ask it for, and how to wait for the piece's permits.
type shaper struct {
	lim     limiter.Limiter // nil: no limit
	members []member        // what the stream learns the burst and rate from

	chunk int // WithChunk; 0: derived from the limiter
	count Counter

	ctx       context.Context // ends when the stream is closed (or the user's context ends)
	cancel    context.CancelFunc
	closed    atomic.Bool
	closedErr error
	dl        *deadline // a Conn's read or write deadline; nil otherwise
	bad       error     // a construction error every call returns

	chunkNow int // chunkSize
	learned  int // the largest grant that succeeded after an ErrExceedsLimit; 0: none
	timer    precise.Timer
}

func (s *shaper) init(lim limiter.Limiter, members []limiter.Limiter, c config) {
	s.ctx, s.cancel = context.WithCancel(c.ctx)
	s.lim = lim
	s.chunk = c.chunk
	s.count = c.count
	s.closedErr = ErrClosed
	if lim != nil && members == nil {
		members = []limiter.Limiter{lim}
	}
	for _, l := range members {
		s.members = append(s.members, describe(l))
	}
	s.refresh()
}

func (s *shaper) close() {
	s.closed.Store(true)
	s.cancel()
}

// check returns the error a call must fail with before doing anything.
func (s *shaper) check() error {
	if s.bad != nil {
		return s.bad
	}
	if s.closed.Load() {
		return s.closedErr
	}
	return nil
}

// counted counts n delivered bytes.
func (s *shaper) counted(n int) {
	if s.count != nil && n > 0 {
		s.count.Add(int64(n))
	}
}

// chunkSize is the largest piece one acquisition asks for: half the
// smallest burst of the limiter (so that a waiter woken late by up to half
// a burst's refill time loses nothing: the bucket keeps filling), at most
// chunkTime's worth of the slowest rate, or WithChunk's.
//
// It is computed when the stream is made and again whenever the stream has
// to wait or is refused a piece as too large, so that the fast path (permits
// at hand) reads one field, and a lowered rate or burst applies from the
// piece after the one that meets it.
func (s *shaper) chunkSize() int { return s.chunkNow }

// refresh recomputes chunkSize from the limiter.
func (s *shaper) refresh() { s.chunkNow = s.computeChunk() }

func (s *shaper) computeChunk() int {
	c := math.MaxInt
	if s.chunk > 0 {
		c = s.chunk
	} else {
		for _, m := range s.members {
			if b := m.most(); b > 0 {
				c = min(c, max(1, b/2))
			}
			if m.rate != nil {
				r := m.rate.Rate()
				c = min(c, max(1, int(mulDiv(r.Events(), int64(chunkTime), int64(r.Period())))))
			}
		}
	}
	if s.learned > 0 {
		c = min(c, s.learned)
	}
	return c
}

// slack is how long past the instant k permits become available every
// member keeps accumulating permits, so that a waiter woken that late loses
// nothing: a token bucket's spare burst (its burst less k) at its rate. A
// pacer, or a member that does not tell its rate and burst, has none.
func (s *shaper) slack(k int) time.Duration {
	slack := time.Duration(math.MaxInt64)
	for _, m := range s.members {
		if m.burst == nil {
			return 0
		}
		t, ok := m.refill(max(m.burst.Burst()-k, 0))
		if !ok {
			return 0
		}
		slack = min(slack, t)
	}
	return slack
}

// acquire acquires up to k permits, waiting as needed, and returns the
// lease and how many it holds (fewer than k only when the limiter said k is
// more than it can ever grant, which the stream then remembers). Its fast
// path, permits at hand, is one TryAcquire; with no limiter, none.
func (s *shaper) acquire(k int) (limiter.Lease, int, error) {
	if s.lim == nil {
		return limiter.Lease{}, k, nil
	}
	l := s.lim.TryAcquire(k)
	if l.Granted() {
		return l, k, nil
	}
	return s.slow(k, l)
}

// slow is acquire after TryAcquire refused k permits with l.
func (s *shaper) slow(k int, l limiter.Lease) (limiter.Lease, int, error) {
	for {
		err := l.Err()
		if !errors.Is(err, limiter.ErrExceedsLimit) {
			if l, err = s.wait(k, l); err == nil {
				return l, k, nil
			}
		}
		if !errors.Is(err, limiter.ErrExceedsLimit) || k <= 1 {
			return l, 0, err
		}
		// The limiter cannot grant k at once (its burst is smaller, or was
		// lowered): ask for less from now on.
		k = max(1, min(k/2, s.grantable()))
		s.learned = k
		s.refresh()
		if l = s.lim.TryAcquire(k); l.Granted() {
			return l, k, nil
		}
	}
}

// grantable is the smallest largest-grant of the members that tell, or
// MaxInt.
func (s *shaper) grantable() int {
	g := math.MaxInt
	for _, m := range s.members {
		if b := m.most(); b > 0 {
			g = min(g, b)
		}
	}
	return g
}

// wait obtains k permits after TryAcquire refused them with l.
//
// When the limiter said when the permits would be there, it waits until
// then precisely (on the stream's reusable timer, then, if the limiter's
// spare burst cannot absorb a late timer, a short spin: see
// internal/precise) and takes them with TryAcquire. If they are gone (others
// took them, or the rate was lowered), or the limiter could not say when (a
// queue ahead, a concurrency limit), it waits in the limiter's queue with
// Acquire, which serves waiters in order.
func (s *shaper) wait(k int, l limiter.Lease) (limiter.Lease, error) {
	s.refresh()
	queue := false
	for !l.Granted() {
		if err := l.Err(); !errors.Is(err, limiter.ErrLimited) {
			return l, s.failure(err)
		}
		ctx := s.context()
		var err error
		if r := l.RetryAfter(); r > 0 && !queue {
			queue = true
			if s.timer.Until(ctx, nil, time.Now().Add(r), s.slack(k)) == precise.Done {
				err = ctx.Err()
			}
		} else if l, err = s.lim.Acquire(ctx, k); err == nil {
			return l, nil
		}
		if err != nil {
			if s.dl == nil || !s.dl.moved(ctx) {
				return limiter.Lease{}, s.failure(err)
			}
			queue = false // a new deadline: wait again
		}
		l = s.lim.TryAcquire(k)
	}
	return l, nil
}

// context is the context waits run under: the stream's, or a Conn's
// current deadline.
func (s *shaper) context() context.Context {
	if s.dl != nil {
		return s.dl.context()
	}
	return s.ctx
}

// failure translates a wait's error: a closed stream reports closedErr, a
// Conn's passed deadline os.ErrDeadlineExceeded, as net.Conn does.
func (s *shaper) failure(err error) error {
	if s.closed.Load() {
		return s.closedErr
	}
	if s.dl != nil && errors.Is(err, context.DeadlineExceeded) && s.ctx.Err() == nil {
		return os.ErrDeadlineExceeded
	}
	return err
}

// deadline is one direction's deadline of a Conn, as a context that ends at
// it. Setting a new deadline cancels the old context; a wait that sees its
// context cancelled while the Conn is open picks up the new one.
type deadline struct {
	mu     sync.Mutex
	parent context.Context
	ctx    context.Context
	cancel context.CancelFunc
}

func (d *deadline) init(parent context.Context) {
	d.parent, d.ctx = parent, parent
}

func (d *deadline) context() context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ctx
}

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel != nil {
		d.cancel()
	}
	if t.IsZero() {
		d.ctx, d.cancel = d.parent, nil
		return
	}
	d.ctx, d.cancel = context.WithDeadline(d.parent, t)
}

// moved reports whether ctx was replaced by a new deadline (rather than
// ended by its own deadline or by Close).
func (d *deadline) moved(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled) && d.parent.Err() == nil && d.context() != ctx
}

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel != nil {
		d.cancel()
		d.cancel = nil
	}
}
