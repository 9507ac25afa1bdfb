package pool

import (
	"context"
	"iter"
	"runtime/debug"

	"github.com/rategate/rategate/limiter"
)

// Order is the order in which Map yields its results.
type Order int

const (
	// InputOrder yields the result of the i-th input i-th, holding results
	// that finish early until those before them are yielded.
	InputOrder Order = iota
	// CompletionOrder yields each result as soon as it is ready.
	CompletionOrder
)

// MapOptions configures Map.
type MapOptions struct {
	// Workers is the most calls of f running at once. It must be at least 1.
	Workers int
	// Limiter, when not nil, must grant one permit before each call of f.
	Limiter limiter.Limiter
	// Order is InputOrder (the default) or CompletionOrder.
	Order Order
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
// running. If opts is invalid, Map yields one pair with the error.
func Map[T, R any](ctx context.Context, seq iter.Seq[T], f func(context.Context, T) (R, error), opts MapOptions) iter.Seq2[R, error] {
	return func(yield func(R, error) bool) {
		var zero R
		mctx, cancel := context.WithCancel(ctx)
		defer cancel()
		p, err := New(Options{Workers: opts.Workers, Limiter: opts.Limiter, Context: mctx})
		if err != nil {
			yield(zero, err)
			return
		}
		defer p.Close()
		if opts.Order == CompletionOrder {
			mapCompletion(cancel, p, seq, f, opts.Workers, yield)
		} else {
			mapInput(cancel, p, seq, f, opts.Workers, yield)
		}
	}
}

func mapInput[T, R any](cancel context.CancelFunc, p *Pool, seq iter.Seq[T], f func(context.Context, T) (R, error), workers int, yield func(R, error) bool) {
	// Each input gets a one-result channel, queued in input order; the
	// queue holds Workers of them, so at most 2·Workers results are held.
	slots := make(chan chan mapResult[R], workers)
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		defer close(slots)
		for v := range seq {
			c := make(chan mapResult[R], 1)
			err := p.Go(mapTask(f, v, c))
			if err != nil {
				c <- mapResult[R]{err: err}
			}
			slots <- c // the consumer reads slots until it is closed
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range slots { // unblock and end the feeder
		}
		<-fed
	}()
	for c := range slots {
		r := <-c
		if !yield(r.v, r.err) {
			return
		}
	}
}

func mapCompletion[T, R any](cancel context.CancelFunc, p *Pool, seq iter.Seq[T], f func(context.Context, T) (R, error), workers int, yield func(R, error) bool) {
	results := make(chan mapResult[R], workers)
	go func() {
		defer close(results)
		var err error
		for v := range seq {
			if err = p.Go(mapTask(f, v, results)); err != nil {
				break
			}
		}
		p.Wait()
		if err != nil { // after every result: the consumer reads results until it is closed
			results <- mapResult[R]{err: err}
		}
	}()
	defer func() {
		cancel()
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
// every started call delivers exactly one result.
func mapTask[T, R any](f func(context.Context, T) (R, error), v T, out chan<- mapResult[R]) func(context.Context) error {
	return func(ctx context.Context) error {
		res := mapResult[R]{err: ErrGoexit} // kept only if f never returns
		defer func() {
			if x := recover(); x != nil {
				res = mapResult[R]{err: &PanicError{Value: x, Stack: debug.Stack()}}
			}
			out <- res
		}()
		res.v, res.err = f(ctx, v)
		return nil
	}
}
