package pool

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"runtime/debug"
	"sync"

	"github.com/rategate/rategate/limiter"
)

// MapOrder is the order in which Map yields its results.
type MapOrder int

const (
	// InputOrder yields the result of the i-th input i-th, holding results
	// that finish early until those before them are yielded.
	InputOrder MapOrder = iota
	// CompletionOrder yields each result as soon as it is ready.
	CompletionOrder
)

// MapOptions configures Map and MapKey.
type MapOptions struct {
	// Workers is the most calls of f running at once. It must be at least 1.
	Workers int
	// Limiter, when not nil, must grant one permit before each call of f;
	// the outcome of the error f returns is reported on the permit's lease,
	// as for a Pool's tasks.
	Limiter limiter.Limiter
	// Order is InputOrder (the default) or CompletionOrder; another value
	// is an *limiter.OptionError.
	Order MapOrder
	// PerKey, for MapKey, returns the limiter of a key, as Options.PerKey.
	PerKey func(key string) limiter.Limiter
	// Queue, for MapKey, is the most values waiting for their keys'
	// limiters, as Options.Queue for GoKey; 0 means DefaultKeyQueue.
	Queue int
}

type mapResult[R any] struct {
	v   R
	err error
}

// Map returns an iterator that calls f on each value of seq, on at most
// opts.Workers goroutines at once, each call starting only when
// opts.Limiter grants, and yields f's results in opts.Order.
//
// Memory is bounded: at most Workers calls run and at most Workers results
// wait to be yielded (in InputOrder, a result finished ahead of its turn
// waits too); while they wait, no more calls start and seq is not read
// further. seq is ranged over on another goroutine.
//
// A call that panics yields a *PanicError, one that calls runtime.Goexit
// ErrGoexit. When a call cannot start (ctx
// ended, the limiter refused with an error), Map yields that error as its
// last pair, after the results of the calls already started. Breaking out of
// the loop, or ctx ending, cancels the context the calls get and stops
// the workers; the iterator returns once every call has returned and seq's
// goroutine has stopped (seq stops at its next value), so nothing is left
// running. If opts is invalid, Map yields one pair with the error. A nil ctx
// panics.
func Map[T, R any](ctx context.Context, seq iter.Seq[T], f func(context.Context, T) (R, error), opts MapOptions) iter.Seq2[R, error] {
	if ctx == nil {
		panic("pool: nil Context")
	}
	return mapSeq(ctx, seq, nil, f, opts)
}

// MapKey is Map for values with a key (a URL's host, given by key): each
// call of f starts once a worker is free and both opts.Limiter and
// opts.PerKey(key(v)) grant, as with Pool.GoKey, so a key whose limiter is
// not ready holds up only its own values while the workers call f on the
// others. Up to opts.Queue values (DefaultKeyQueue with 0) are read ahead
// and wait for their keys; in InputOrder, up to that many results finished
// ahead of their turn wait too. A value whose call cannot start (its
// key's limiter failed, ctx ended) yields its error in its place, and the
// others go on. A nil ctx panics.
func MapKey[T, R any](ctx context.Context, seq iter.Seq[T], key func(T) string, f func(context.Context, T) (R, error), opts MapOptions) iter.Seq2[R, error] {
	if ctx == nil {
		panic("pool: nil Context")
	}
	if key == nil {
		key = func(T) string { return "" }
	}
	return mapSeq(ctx, seq, key, f, opts)
}

func mapSeq[T, R any](ctx context.Context, seq iter.Seq[T], key func(T) string, f func(context.Context, T) (R, error), opts MapOptions) iter.Seq2[R, error] {
	return func(yield func(R, error) bool) {
		var zero R
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		popts := Options{Workers: opts.Workers, Limiter: opts.Limiter, Context: mctx}
		if opts.Order != InputOrder && opts.Order != CompletionOrder {
			yield(zero, &limiter.OptionError{Field: "Order", Problem: fmt.Sprintf("is %d, must be InputOrder or CompletionOrder", opts.Order)})
			return
		}
		ahead := opts.Workers
		if key != nil {
			popts.PerKey, popts.Queue = opts.PerKey, opts.Queue
			ahead += cmp.Or(opts.Queue, DefaultKeyQueue)
		}
		p, err := New(popts)
		if err != nil {
			yield(zero, err)
			return
		}
		p.keepErrors = false // each call's error is its result
		defer p.Close()
		m := &mapper[T, R]{p: p, ctx: mctx, key: key, f: f, cancel: cancel}
		if opts.Order == CompletionOrder {
			m.completion(seq, opts.Workers, yield)
		} else {
			m.input(seq, ahead, yield)
		}
	}
}

// mapper runs one Map or MapKey.
type mapper[T, R any] struct {
	p      *Pool
	ctx    context.Context
	key    func(T) string // nil for Map
	f      func(context.Context, T) (R, error)
	cancel context.CancelFunc
}

// submit starts (Map) or queues (MapKey) the call of f on v, which sends
// its result to out; for MapKey, fail receives the error of a call that
// cannot start.
func (m *mapper[T, R]) submit(v T, out chan<- mapResult[R], fail func(error)) error {
	if m.key == nil {
		return m.p.Go(mapTask(m.f, v, out))
	}
	return m.p.goKey(m.ctx, m.key(v), mapTask(m.f, v, out), fail)
}

func (m *mapper[T, R]) input(seq iter.Seq[T], ahead int, yield func(R, error) bool) {
	// Each input gets a one-result channel, queued in input order; at most
	// ahead of them are queued, which bounds the results held.
	q := newSlots[R](ahead)
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		defer q.close()
		for v := range seq {
			q.reserve() // the consumer frees a place until the queue is closed
			c := make(chan mapResult[R], 1)
			err := m.submit(v, c, func(err error) { c <- mapResult[R]{err: err} })
			if err != nil {
				c <- mapResult[R]{err: err}
			}
			q.push(c)
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		m.cancel()
		for range q.all() { // unblock and end the feeder
		}
		<-fed
	}()
	for c := range q.all() {
		r := <-c
		if !yield(r.v, r.err) {
			return
		}
	}
}

// slots is the queue of input order's result channels, between the
// goroutine that reads the input and the one that yields: at most a
// given number queued, in a buffer that grows as they come (a Go
// channel of that capacity would allocate all of it up front: 128 KiB
// for DefaultKeyQueue).
type slots[R any] struct {
	room chan struct{} // one token per place taken; its capacity bounds the queue
	more chan struct{} // a signal that a channel was pushed or the queue closed

	mu     sync.Mutex
	q      fifo[chan mapResult[R]]
	closed bool
}

func newSlots[R any](capacity int) *slots[R] {
	// A channel of empty structs allocates no buffer, whatever its capacity.
	return &slots[R]{room: make(chan struct{}, capacity), more: make(chan struct{}, 1)}
}

// reserve takes a place for the next push, waiting while the queue is full.
func (s *slots[R]) reserve() { s.room <- struct{}{} }

func (s *slots[R]) push(c chan mapResult[R]) {
	s.mu.Lock()
	s.q.push(c)
	s.mu.Unlock()
	s.signal()
}

// close ends all once the queued channels are taken.
func (s *slots[R]) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
}

func (s *slots[R]) signal() {
	select {
	case s.more <- struct{}{}:
	default:
	}
}

// all yields the queued channels in order, freeing each one's place, until
// the queue is closed and empty. One goroutine calls it at a time.
func (s *slots[R]) all() iter.Seq[chan mapResult[R]] {
	return func(yield func(chan mapResult[R]) bool) {
		for {
			s.mu.Lock()
			n, closed := s.q.len(), s.closed
			var c chan mapResult[R]
			if n > 0 {
				c = s.q.pop()
			}
			s.mu.Unlock()
			switch {
			case n > 0:
				<-s.room
				if !yield(c) {
					return
				}
			case closed:
				return
			default:
				<-s.more
			}
		}
	}
}

func (m *mapper[T, R]) completion(seq iter.Seq[T], workers int, yield func(R, error) bool) {
	results := make(chan mapResult[R], workers)
	go func() {
		defer close(results)
		var fails sync.WaitGroup // sends the errors of calls that could not start
		fail := func(err error) { fails.Go(func() { results <- mapResult[R]{err: err} }) }
		var err error
		for v := range seq {
			if err = m.submit(v, results, fail); err != nil {
				break
			}
		}
		m.p.Wait()
		fails.Wait()
		if err != nil { // after every result: the consumer reads results until it is closed
			results <- mapResult[R]{err: err}
		}
	}()
	defer func() {
		m.cancel()
		for range results { // until the feeder has waited for every call
		}
	}()
	for r := range results {
		if !yield(r.v, r.err) {
			return
		}
	}
}

// mapTask is the pool task that calls f(v) and sends its result to out, also
// when f panics (a *PanicError) or calls runtime.Goexit (ErrGoexit), so that
// every started call delivers exactly one result. It returns f's error, so
// that the pool reports the call's outcome on its lease.
func mapTask[T, R any](f func(context.Context, T) (R, error), v T, out chan<- mapResult[R]) func(context.Context) error {
	return func(ctx context.Context) (err error) {
		res := mapResult[R]{err: ErrGoexit} // kept only if f never returns
		defer func() {
			if x := recover(); x != nil {
				res = mapResult[R]{err: &PanicError{Value: x, Stack: debug.Stack()}}
			}
			err = res.err
			out <- res
		}()
		res.v, res.err = f(ctx, v)
		return res.err
	}
}
