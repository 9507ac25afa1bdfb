package channel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A Send waiting in the limiter must end when the Chan is closed, not only
// when its own context ends. The limiter only takes one context, so Send
// passes it a sendCtx: the caller's context, plus the Chan's closing, and
// cancelled when Acquire returns, as a context.WithCancel context with a
// deferred cancel would be. A limiter may keep the context after Acquire
// returns (for tracing, in a context.AfterFunc, in a goroutine): it stays a
// valid context, with its caller's values, and is done from then on. So a
// sendCtx is never reused: it costs one allocation per Send.
//
// A send with context.Background (or TODO) needs none of this: its context
// is the Chan's closing alone, a closeCtx made with the Chan, which never
// changes and so can be shared by every such send and kept by any limiter.
//
// Merging two Done channels costs more (a channel, an AfterFunc), but a
// limiter asks for ctx.Done only when it has to wait: a grant on the fast
// path reads ctx.Err at most. So sendCtx builds its merged Done channel
// lazily, on the first call to Done.

// gate is a Chan's closing, as sendCtx sees it: a flag, and the waits
// registered by sendCtx.Done, which Close fires.
type gate struct {
	closed atomic.Bool
	mu     sync.Mutex
	waits  *wait // doubly linked list of registered waits
}

// wait is one sendCtx's merged Done channel.
type wait struct {
	done       chan struct{}
	fired      atomic.Bool
	stop       func() bool // stops the AfterFunc on the caller's context
	prev, next *wait
	linked     bool
}

func (w *wait) fire() {
	if w.fired.CompareAndSwap(false, true) {
		close(w.done)
	}
}

// register links w into g, or fires it at once if g is closed.
func (g *gate) register(w *wait) {
	g.mu.Lock()
	if g.closed.Load() {
		g.mu.Unlock()
		w.fire()
		return
	}
	w.next, w.linked = g.waits, true
	if g.waits != nil {
		g.waits.prev = w
	}
	g.waits = w
	g.mu.Unlock()
}

func (g *gate) unregister(w *wait) {
	g.mu.Lock()
	if w.linked {
		if w.prev != nil {
			w.prev.next = w.next
		} else {
			g.waits = w.next
		}
		if w.next != nil {
			w.next.prev = w.prev
		}
		w.prev, w.next, w.linked = nil, nil, false
	}
	g.mu.Unlock()
}

// close marks g closed and fires every registered wait.
func (g *gate) close() {
	g.closed.Store(true)
	g.mu.Lock()
	for w := g.waits; w != nil; {
		next := w.next
		w.prev, w.next, w.linked = nil, nil, false
		w.fire()
		w = next
	}
	g.waits = nil
	g.mu.Unlock()
}

// sendCtx is the context a Send passes to the limiter: parent's deadline,
// values and cancellation, and also done when the gate closes or the
// Acquire it was made for returns (end).
type sendCtx struct {
	parent context.Context
	g      *gate
	mu     sync.Mutex // serialises Done's lazy creation of w with end
	w      atomic.Pointer[wait]
	ended  atomic.Bool
	err    atomic.Pointer[error] // the first non-nil Err, kept
}

// closedchan is the Done channel of a sendCtx that ended before Done was
// called. It is made outside any synctest bubble, so every bubble may use it.
var closedchan = make(chan struct{})

func init() { close(closedchan) }

func (g *gate) context(parent context.Context) *sendCtx {
	return &sendCtx{parent: parent, g: g}
}

// end cancels s once the Acquire it was made for has returned: it stops the
// AfterFunc on the parent and unregisters s's wait from the gate, if Done
// made them, and closes s's Done channel.
func (s *sendCtx) end() {
	s.mu.Lock()
	s.ended.Store(true)
	w := s.w.Load()
	s.mu.Unlock()
	if w != nil {
		if w.stop != nil {
			w.stop()
		}
		s.g.unregister(w)
		w.fire()
	}
}

func (s *sendCtx) Deadline() (time.Time, bool) { return s.parent.Deadline() }

func (s *sendCtx) Value(key any) any { return s.parent.Value(key) }

// Err returns the parent's error, or context.Canceled once the Chan is
// closed (Send reports that as ErrClosed) or the Acquire has returned. Once
// non-nil, it never changes.
func (s *sendCtx) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	err := s.parent.Err()
	if err == nil {
		if !s.g.closed.Load() && !s.ended.Load() {
			return nil
		}
		err = context.Canceled
	}
	return s.keep(err)
}

// keep records err as s's error unless one was recorded first, and returns
// the one recorded. (A function of its own, so that only a non-nil Err
// allocates.)
func (s *sendCtx) keep(err error) error {
	s.err.CompareAndSwap(nil, &err)
	return *s.err.Load()
}

// Done returns a channel closed when the parent is done, the Chan is
// closed or the Acquire has returned, made on the first call.
func (s *sendCtx) Done() <-chan struct{} {
	if w := s.w.Load(); w != nil {
		return w.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.w.Load(); w != nil {
		return w.done
	}
	if s.ended.Load() {
		return closedchan
	}
	w := &wait{done: make(chan struct{})}
	if s.parent.Done() != nil {
		w.stop = context.AfterFunc(s.parent, w.fire)
	}
	s.g.register(w)
	s.w.Store(w)
	return w.done
}

// closeCtx is the context a Send with context.Background passes to the
// limiter: no values, no deadline, done when the Chan is closed.
type closeCtx struct {
	g    *gate
	done chan struct{} // the Chan's done, closed by Close
}

func (*closeCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

func (*closeCtx) Value(any) any { return nil }

func (c *closeCtx) Done() <-chan struct{} { return c.done }

// Err returns context.Canceled once the Chan is closed (Send reports that
// as ErrClosed).
func (c *closeCtx) Err() error {
	if c.g.closed.Load() {
		return context.Canceled
	}
	return nil
}
