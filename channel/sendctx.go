package channel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A Send waiting in the limiter must end when the Chan is closed, not only
// when its own context ends. The limiter only takes one context, so Send
// passes it a sendCtx: the caller's context, plus the Chan's closing.
//
// Merging two contexts costs allocations (a channel, an AfterFunc), but a
// limiter asks for ctx.Done only when it has to wait: a grant on the fast
// path reads ctx.Err at most. So sendCtx builds its merged Done channel
// lazily, on the first call to Done, and a sendCtx whose Done was never
// called is recycled through a sync.Pool: the Send that does not wait
// allocates nothing. A sendCtx whose Done was called is never recycled (the
// limiter has seen its channel), and the pool never holds one that refers to
// a channel, so nothing in the pool belongs to a synctest bubble.

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
// values and cancellation, and also done when the gate closes.
type sendCtx struct {
	parent context.Context
	g      *gate
	mu     sync.Mutex // serialises the lazy creation of w
	w      atomic.Pointer[wait]
}

var sendCtxPool = sync.Pool{New: func() any { return new(sendCtx) }}

func (g *gate) context(parent context.Context) *sendCtx {
	s := sendCtxPool.Get().(*sendCtx)
	s.parent, s.g = parent, g
	return s
}

// release ends s's use by one Acquire: it unregisters s's wait, if Done made
// one, and otherwise recycles s.
func (g *gate) release(s *sendCtx) {
	if w := s.w.Load(); w != nil {
		if w.stop != nil {
			w.stop()
		}
		g.unregister(w)
		return
	}
	s.parent, s.g = nil, nil
	sendCtxPool.Put(s)
}

func (s *sendCtx) Deadline() (time.Time, bool) { return s.parent.Deadline() }

func (s *sendCtx) Value(key any) any { return s.parent.Value(key) }

// Err returns the parent's error, or context.Canceled once the Chan is
// closed (Send reports that as ErrClosed).
func (s *sendCtx) Err() error {
	if err := s.parent.Err(); err != nil {
		return err
	}
	if s.g.closed.Load() {
		return context.Canceled
	}
	return nil
}

// Done returns a channel closed when the parent is done or the Chan is
// closed, made on the first call.
func (s *sendCtx) Done() <-chan struct{} {
	if w := s.w.Load(); w != nil {
		return w.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.w.Load(); w != nil {
		return w.done
	}
	w := &wait{done: make(chan struct{})}
	if s.parent.Done() != nil {
		w.stop = context.AfterFunc(s.parent, w.fire)
	}
	s.g.register(w)
	s.w.Store(w)
	return w.done
}
