package channel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A Send waiting in the limiter must end when the Chan is closed, not only
// when its own context ends. The limiter takes one context, so Send passes
// it a sendCtx: the caller's context, plus the Chan's closing, and
// cancelled when Acquire returns, as a context.WithCancel context with a
// deferred cancel would be. A limiter may keep the context after Acquire
// returns (for tracing, in a context.AfterFunc, in a goroutine): it stays a
// valid context, with its caller's values, and is done from then on. So a
// sendCtx is never reused.
//
// The plain way to build that context is context.WithCancel(ctx) plus
// context.AfterFunc(closing, cancel) around every Acquire. It costs each
// send four allocations and two registrations under shared mutexes (one in
// the caller's context, one in the Chan's closing, which every concurrent
// send contends for), yet a limiter looks at ctx.Done only when it has to
// wait: a grant on the fast path reads ctx.Err at most, or nothing. So a
// sendCtx is one small allocation whose Err reads the caller's error and
// the Chan's closed flag, and whose Done builds the plain merged context
// the first time it is asked for: the plain pieces, only on the path that
// waits. BenchmarkChanSendContext in bench/ measures both.
//
// A send with context.Background (or TODO) needs none of this: its context
// is the Chan's closing alone, which never changes and so can be shared by
// every such send and kept by any limiter.

// closing is a Chan's closing as its sends' contexts see it.
type closing struct {
	closed atomic.Bool        // set by Close before ctx is cancelled: the fast check
	ctx    context.Context    // no values, no deadline; cancelled by Close
	cancel context.CancelFunc // cancels ctx
	done   <-chan struct{}    // ctx.Done(), made with the Chan
}

func newClosing() closing {
	ctx, cancel := context.WithCancel(context.Background())
	// Done is called here, so that its channel is made with the Chan
	// (outside any synctest bubble the Chan was made outside of).
	return closing{ctx: ctx, cancel: cancel, done: ctx.Done()}
}

// close marks the Chan closed, then ends every send's context.
func (cl *closing) close() {
	cl.closed.Store(true)
	cl.cancel()
}

// sendCtx is the context a Send passes to the limiter: parent's deadline,
// values and cancellation, and also done when the Chan closes or the
// Acquire it was made for returns (end).
type sendCtx struct {
	parent context.Context
	cl     *closing
	mu     sync.Mutex // serialises Done's lazy merge with end
	m      atomic.Pointer[merged]
	ended  atomic.Bool
	err    atomic.Pointer[error] // the first non-nil Err, kept
}

// merged is the plain merged context, made by sendCtx.Done: parent's
// cancellation, and the Chan's closing through an AfterFunc.
type merged struct {
	done   <-chan struct{}
	cancel context.CancelFunc
	stop   func() bool // stops the AfterFunc on the Chan's closing
}

// closedchan is the Done channel of a sendCtx that ended before Done was
// called. It is made outside any synctest bubble, so every bubble may use it.
var closedchan = make(chan struct{})

func init() { close(closedchan) }

func (cl *closing) context(parent context.Context) *sendCtx {
	return &sendCtx{parent: parent, cl: cl}
}

// end cancels s once the Acquire it was made for has returned: if Done
// made the merged context, it stops its AfterFunc and cancels it, which
// closes s's Done channel.
func (s *sendCtx) end() {
	s.mu.Lock()
	s.ended.Store(true)
	m := s.m.Load()
	s.mu.Unlock()
	if m != nil {
		m.stop()
		m.cancel()
	}
}

// Deadline returns the parent's deadline.
func (s *sendCtx) Deadline() (time.Time, bool) { return s.parent.Deadline() }

// Value returns the parent's value for key.
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
		if !s.cl.closed.Load() && !s.ended.Load() {
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
	if m := s.m.Load(); m != nil {
		return m.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.m.Load(); m != nil {
		return m.done
	}
	if s.ended.Load() {
		return closedchan
	}
	ctx, cancel := context.WithCancel(s.parent)
	m := &merged{done: ctx.Done(), cancel: cancel, stop: context.AfterFunc(s.cl.ctx, cancel)}
	s.m.Store(m)
	return m.done
}
