package pipe

import (
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/limiter"
)

const (
	// timerSlack is how late a timer may fire on a loaded Linux machine:
	// Go's timers wake about a millisecond late for short sleeps. A wait
	// whose permits the limiter can keep accumulating for longer than this
	// loses nothing to a late timer; a shorter one spins for the rest.
	timerSlack = 2 * time.Millisecond

	// chunkTime caps one piece at the permits the limiter's rate refills in
	// this long, so that a slow stream still moves in small steps (a
	// progress line advances, a rate change applies soon, a deadline rarely
	// falls inside one wait).
	chunkTime = 100 * time.Millisecond

	// osLate is how late an OS sleep (nanosleep) may wake, osMin the
	// shortest worth making rather than polling, and osMax the longest: an
	// OS sleep cannot be interrupted, so a wait checks its context (Close, a
	// deadline) at least this often, however long Options.Spin is.
	osLate = 150 * time.Microsecond
	osMin  = 20 * time.Microsecond
	osMax  = time.Millisecond
)

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

// shaper is what a Reader and a Writer share: the limiter, how big a piece
// to ask it for, and how to wait for the piece's permits.
type shaper struct {
	lim     limiter.Limiter
	members []member // what the stream learns the burst and rate from
	known   bool     // every member tells its largest grant

	chunk int           // Options.Chunk; 0: derived from the limiter
	spin  time.Duration // Options.Spin
	mon   *Monitor

	ctx       context.Context // ends when the stream is closed (or the user's context ends)
	cancel    context.CancelFunc
	closed    atomic.Bool
	closedErr error
	dl        *deadline // a Conn's read or write deadline; nil otherwise
	bad       error     // a construction error every call returns

	frozen   bool // the clock stood still across an OS sleep: use timers only
	chunkNow int  // chunkSize
	learned  int  // the largest grant that succeeded after an ErrExceedsLimit; 0: none
	timer    *time.Timer
}

func (s *shaper) init(parent context.Context, lim limiter.Limiter, members []limiter.Limiter, opts Options) {
	if parent == nil {
		parent = context.Background()
	}
	s.ctx, s.cancel = context.WithCancel(parent)
	s.lim = lim
	s.chunk = opts.Chunk
	s.spin = opts.Spin
	s.mon = opts.Monitor
	s.closedErr = ErrClosed
	if lim == nil {
		s.bad = ErrNilLimiter
		return
	}
	if members == nil {
		members = []limiter.Limiter{lim}
	}
	s.known = true
	for _, l := range members {
		m := describe(l)
		s.members = append(s.members, m)
		if m.most() <= 0 {
			s.known = false
		}
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

// chunkSize is the largest piece one acquisition asks for: half the
// smallest burst of the limiter (so that a waiter woken late by up to half
// a burst's refill time loses nothing: the bucket keeps filling), at most
// chunkTime's worth of the slowest rate, or Options.Chunk.
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
				if per := float64(r.Events()) * float64(chunkTime) / float64(r.Period()); per < float64(c) {
					c = max(1, int(per))
				}
			}
		}
	}
	if s.learned > 0 {
		c = min(c, s.learned)
	}
	return c
}

// tolerance is how long past the instant k permits become available the
// limiter keeps accumulating permits, so that a waiter woken that late loses
// nothing; ok is false when a member does not tell.
func (s *shaper) tolerance(k int) (tol time.Duration, ok bool) {
	tol = time.Duration(math.MaxInt64)
	for _, m := range s.members {
		if m.rate == nil {
			return 0, false
		}
		r := m.rate.Rate()
		if m.burst == nil {
			// A pacer: every late instant is lost.
			return 0, true
		}
		spare := float64(m.burst.Burst() - k)
		if spare <= 0 {
			return 0, true
		}
		t := spare * float64(r.Period()) / float64(r.Events())
		if t < float64(tol) {
			tol = time.Duration(t)
		}
	}
	return tol, true
}

// spinWindow is how much of the end of a wait for k permits is spent polling
// the limiter instead of sleeping on a timer.
func (s *shaper) spinWindow(k int) time.Duration {
	switch {
	case s.spin > 0:
		return s.spin
	case s.spin < 0:
		return 0
	}
	tol, ok := s.tolerance(k)
	if !ok || tol >= timerSlack {
		return 0
	}
	return timerSlack - tol
}

// acquire acquires up to k permits, waiting as needed, and returns the
// lease and how many it holds (fewer than k only when the limiter said k is
// more than it can ever grant, which the stream then remembers). Its fast
// path, permits at hand, is one TryAcquire.
func (s *shaper) acquire(k int) (limiter.Lease, int, error) {
	l := s.lim.TryAcquire(k)
	if l.Granted() {
		return l, k, nil
	}
	return s.slow(k, l)
}

// slow is acquire after TryAcquire refused k permits with l.
func (s *shaper) slow(k int, l limiter.Lease) (limiter.Lease, int, error) {
	for {
		var err error
		if !errors.Is(l.Err(), limiter.ErrExceedsLimit) {
			if l, err = s.wait(k, l); err == nil {
				return l, k, nil
			}
		} else {
			err = l.Err()
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
// It sleeps on its own timer (reused: no allocation) until the limiter said
// the permits would be there, finishing the last spinWindow by polling
// TryAcquire, and only then, if the permits are still not there (others took
// them, or the rate was lowered), or the limiter could not say when they
// would be (a queue ahead, a concurrency limit), waits in the limiter's
// queue with Acquire, which serves waiters in order.
func (s *shaper) wait(k int, l limiter.Lease) (limiter.Lease, error) {
	s.refresh()
	ctx := s.context()
	missed := false
	prev, still := time.Duration(-1), 0
	for {
		if err := l.Err(); !errors.Is(err, limiter.ErrLimited) {
			return l, s.failure(err)
		}
		r := l.RetryAfter()
		if r <= 0 || missed {
			var err error
			l, err = s.lim.Acquire(ctx, k)
			if err == nil {
				return l, nil
			}
			if s.dl != nil && s.dl.moved(ctx) {
				ctx, missed = s.context(), false
				if l = s.lim.TryAcquire(k); l.Granted() {
					return l, nil
				}
				continue
			}
			return l, s.failure(err)
		}
		S := s.spinWindow(k)
		switch {
		case r > S:
			if err := s.sleep(ctx, r-S); err != nil {
				if s.dl != nil && s.dl.moved(ctx) {
					ctx = s.context()
					break
				}
				return limiter.Lease{}, s.failure(err)
			}
			missed = S == 0
			prev, still = -1, 0
		case prev >= 0 && r > prev:
			// The wait grew while we polled: others took the permits.
			missed = true
			continue
		case r == prev:
			// The clock stands still while we poll, as in a testing/synctest
			// bubble: only a timer moves it.
			if still++; still >= 8 {
				if err := s.sleep(ctx, r); err != nil {
					if s.dl != nil && s.dl.moved(ctx) {
						ctx = s.context()
						break
					}
					return limiter.Lease{}, s.failure(err)
				}
				missed = true
				prev, still = -1, 0
			} else {
				runtime.Gosched()
			}
		default:
			if err := ctx.Err(); err != nil {
				if s.dl != nil && s.dl.moved(ctx) {
					ctx = s.context()
					break
				}
				return limiter.Lease{}, s.failure(err)
			}
			prev, still = r, 0
			// Sleep with the OS as long as its lateness stays within what
			// the limiter absorbs, then poll.
			tol, _ := s.tolerance(k)
			if d := min(r, r+tol-osLate, osMax); d >= osMin && !s.frozen {
				t0 := time.Now()
				if osSleep(d) {
					if time.Since(t0) == 0 {
						s.frozen = true // a synctest bubble: its clock moves only for timers
					}
					break
				}
			}
			runtime.Gosched()
		}
		l = s.lim.TryAcquire(k)
		if l.Granted() {
			return l, nil
		}
	}
}

// sleep waits d on the stream's timer, or until ctx ends.
func (s *shaper) sleep(ctx context.Context, d time.Duration) error {
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.timer.C:
		return nil
	case <-ctx.Done():
		s.timer.Stop()
		return ctx.Err()
	}
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
