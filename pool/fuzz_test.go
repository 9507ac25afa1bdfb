package pool_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
)

// countable is how many workers and queued tasks a pool must take: New may
// refuse more as "too large to count", but not a million.
const countable = 1 << 20

// taskErr is the error of the i-th task of a fuzzed pool or Map.
type taskErr int

func (e taskErr) Error() string { return fmt.Sprintf("task %d failed", int(e)) }

// checkOptionErr checks that err is an *limiter.OptionError naming want
// (one of wants when want is ""), in its text too.
func checkOptionErr(t *testing.T, what string, err error, want string, wants ...string) {
	t.Helper()
	var oe *limiter.OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("%s: error %T %v, want an *limiter.OptionError", what, err, err)
	}
	ok := want != "" && oe.Field == want
	for _, w := range wants {
		ok = ok || want == "" && oe.Field == w
	}
	if !ok || !strings.Contains(err.Error(), oe.Field) {
		t.Fatalf("%s: error %q names %q, want %q (or one of %q)", what, err, oe.Field, want, wants)
	}
}

// FuzzNew: New accepts Workers from 1 and Queue from 0 (up to sizes too
// large to count, which it may refuse naming either), and refuses the rest
// with an *limiter.OptionError naming a field that breaks its rule. A Pool it returns runs every task submitted with Go and GoKey, at
// most Workers at once; Wait returns nil, or the tasks' error (errors.Is),
// and later submissions fail with ErrClosed.
func FuzzNew(f *testing.F) {
	f.Add(1, 0, false, false, uint8(3), uint8(255))
	f.Add(4, 8, true, false, uint8(7), uint8(2))
	f.Add(2, 1, false, true, uint8(5), uint8(0))
	f.Add(3, 0, true, true, uint8(7), uint8(7))
	f.Add(countable, 0, false, false, uint8(2), uint8(1))
	f.Add(1, countable-1, false, false, uint8(2), uint8(255))
	f.Add(0, 0, false, false, uint8(1), uint8(0))
	f.Add(-1, 5, false, false, uint8(1), uint8(0))
	f.Add(1, -1, false, false, uint8(1), uint8(0))
	f.Add(math.MinInt, math.MinInt, false, false, uint8(1), uint8(0))
	f.Add(math.MaxInt, 0, false, false, uint8(1), uint8(0))
	f.Add(1, math.MaxInt, false, false, uint8(1), uint8(0))
	f.Add(math.MaxInt, math.MaxInt, false, false, uint8(1), uint8(0))
	f.Add(math.MaxInt-56, -28, false, true, uint8(1), uint8(102)) // both wrong
	f.Fuzz(func(t *testing.T, workers, queue int, cancelOnError, firstError bool, tasks, failAt uint8) {
		opts := pool.Options{Workers: workers, Queue: queue, CancelOnError: cancelOnError, FirstError: firstError}
		what := fmt.Sprintf("New(%+v)", opts)
		p, err := pool.New(opts)
		if err != nil {
			if p != nil {
				t.Fatalf("%s: a Pool and the error %v", what, err)
			}
			// Too large to count: more than countable workers, or
			// workers and queued tasks.
			big := workers > countable || queue > countable || workers >= 1 && queue > countable-workers
			var fields []string
			if workers < 1 || big {
				fields = append(fields, "Workers")
			}
			if queue < 0 || big {
				fields = append(fields, "Queue")
			}
			if len(fields) == 0 {
				t.Fatalf("%s: valid options refused: %v", what, err)
			}
			checkOptionErr(t, what, err, "", fields...)
			return
		}
		if p == nil {
			t.Fatalf("%s: nil Pool and nil error", what)
		}
		if workers < 1 || queue < 0 {
			p.Close()
			t.Fatalf("%s: accepted", what)
		}
		runPool(t, what, p, workers, int(tasks%8)+1, int(failAt%16))
	})
}

// runPool submits n tasks with Go and one with GoKey to p, the task failAt
// (if any) failing, and checks what p does with them.
func runPool(t *testing.T, what string, p *pool.Pool, workers, n, failAt int) {
	t.Helper()
	var running, most, ran atomic.Int64
	accepted, failing := 0, false
	submit := func(i int, err error) {
		if err != nil {
			t.Errorf("%s: submitting task %d: %v", what, i, err)
			return
		}
		accepted++
		failing = failing || i == failAt
	}
	task := func(i int) func(context.Context) error {
		return func(context.Context) error {
			cur := running.Add(1)
			for m := most.Load(); cur > m && !most.CompareAndSwap(m, cur); m = most.Load() {
			}
			ran.Add(1)
			running.Add(-1)
			if i == failAt {
				return taskErr(i)
			}
			return nil
		}
	}
	for i := range n {
		submit(i, p.Go(task(i)))
	}
	submit(n, p.GoKey(context.Background(), "key", task(n)))
	werr := p.Wait()
	switch {
	case most.Load() > int64(workers):
		t.Errorf("%s: %d tasks ran at once", what, most.Load())
	case ran.Load() > int64(accepted):
		t.Errorf("%s: %d tasks ran, %d submitted", what, ran.Load(), accepted)
	case !failing && ran.Load() != int64(accepted):
		t.Errorf("%s: %d tasks ran, %d submitted", what, ran.Load(), accepted)
	case !failing && werr != nil:
		t.Errorf("%s: Wait: %v, want nil: no task failed", what, werr)
	case failing && !errors.Is(werr, taskErr(failAt)):
		t.Errorf("%s: Wait: %v, want the error of task %d", what, werr, failAt)
	}
	if err := p.Go(task(-1)); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("%s: Go after Wait: %v, want ErrClosed", what, err)
	}
	if err := p.TryGo(task(-1)); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("%s: TryGo after Wait: %v, want ErrClosed", what, err)
	}
}

// FuzzMap: Map and MapKey validate MapOptions as New does (Workers from
// 1; Queue, which only MapKey uses, from 0), yielding one pair with the
// *limiter.OptionError for invalid options; with valid ones they yield one
// result per value, in input order with InputOrder. Workers and Queue are
// int16s: Map allocates room for Workers results at once.
func FuzzMap(f *testing.F) {
	f.Add(int16(1), int16(0), false, false, uint8(5))
	f.Add(int16(3), int16(2), true, false, uint8(9))
	f.Add(int16(2), int16(1), false, true, uint8(12))
	f.Add(int16(4), int16(0), true, true, uint8(15))
	f.Add(int16(math.MaxInt16), int16(math.MaxInt16), true, true, uint8(3))
	f.Add(int16(0), int16(0), false, false, uint8(3))
	f.Add(int16(-1), int16(0), false, true, uint8(3))
	f.Add(int16(2), int16(-1), false, true, uint8(3))
	f.Add(int16(2), int16(-1), false, false, uint8(3)) // Map ignores Queue
	f.Add(int16(math.MinInt16), int16(math.MinInt16), true, true, uint8(0))
	f.Fuzz(func(t *testing.T, workers, queue int16, completion, keyed bool, n uint8) {
		opts := pool.MapOptions{Workers: int(workers), Queue: int(queue)}
		if completion {
			opts.Order = pool.CompletionOrder
		}
		what := fmt.Sprintf("Map(%+v, keyed %v)", opts, keyed)
		values := int(n % 16)
		seq := func(yield func(int) bool) {
			for i := range values {
				if !yield(i) {
					return
				}
			}
		}
		square := func(_ context.Context, v int) (int, error) {
			if v%5 == 3 {
				return 0, taskErr(v)
			}
			return v * v, nil
		}
		it := pool.Map(context.Background(), seq, square, opts)
		if keyed {
			it = pool.MapKey(context.Background(), seq, func(v int) string { return fmt.Sprint(v % 3) }, square, opts)
		}
		var results []int // the value each pair is for
		var errs []error
		for r, err := range it {
			var te taskErr
			switch {
			case err == nil:
				results = append(results, int(math.Sqrt(float64(r))))
			case errors.As(err, &te):
				results = append(results, int(te))
			default:
				errs = append(errs, err)
			}
		}
		var invalid string
		switch {
		case workers < 1:
			invalid = "Workers"
		case keyed && queue < 0:
			invalid = "Queue"
		}
		if invalid != "" {
			if len(errs) != 1 || len(results) != 0 {
				t.Fatalf("%s: yielded %v and errors %v, want one *limiter.OptionError naming %s", what, results, errs, invalid)
			}
			checkOptionErr(t, what, errs[0], invalid)
			return
		}
		if len(errs) != 0 || len(results) != values {
			t.Fatalf("%s: yielded %v and errors %v, want a result for each of %d values", what, results, errs, values)
		}
		seen := make([]bool, values)
		for i, v := range results {
			if v < 0 || v >= values || seen[v] || !completion && v != i {
				t.Fatalf("%s: yielded results for %v, want each of 0 to %d once (in order: %v)", what, results, values-1, !completion)
			}
			seen[v] = true
		}
	})
}
