package properties_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
	"pgregory.net/rapid"
)

// poolTask is one drawn task: how it is submitted, how long it runs, and how
// it ends.
type poolTask struct {
	pause   time.Duration // before its submission
	mode    int           // 0: Go, 1: GoContext with a timeout, 2: TryGo
	timeout time.Duration // GoContext's
	run     time.Duration // how long it runs unless its context ends first
	ends    int           // 0: returns nil, 1: returns its own error, 2: panics
}

func (t poolTask) String() string {
	return fmt.Sprintf("{pause %v %s timeout %v run %v %s}", t.pause, [...]string{"Go", "GoContext", "TryGo"}[t.mode],
		t.timeout, t.run, [...]string{"nil", "error", "panic"}[t.ends])
}

type poolPlan struct {
	workers       int
	queue         int // Options.Queue
	cancelOnError bool
	firstError    bool
	closeAt       time.Duration // < 0: never
	submitters    [][]poolTask
}

// poolOutcome is what a run recorded.
type poolOutcome struct {
	starts  []grant       // each task start, as a grant of 1 permit
	runs    map[int]int   // task id -> times it ran
	goErr   map[int]error // task id -> its submission's error
	taskErr map[int]error // task id -> the error it returned (or its panic), for tasks that ran
	peak    int
	closed  time.Duration // when Close was called; -1 if never
	waitErr error
	errs    []string
}

type poolPanicValue int

// TestPoolBounds draws a limiter, a pool (workers, CancelOnError,
// FirstError), 1-3 submitters each with a list of tasks submitted by Go,
// GoContext (with a timeout) or TryGo, of drawn durations and endings (nil,
// an error, a panic), and maybe a Close at a drawn instant, and runs it in a
// synctest bubble. Checked: never more than Workers tasks run at once; the
// task starts keep the limiter's bound (they are its grants); every task runs
// exactly once if its submission returned nil and never otherwise; a
// submission fails only with an error its mode allows (ErrClosed only once
// Close was called, a deadline only for GoContext, ErrBusy or ErrLimited
// only for TryGo, ErrQueueFull only with a queue cap); plain Go before Close never fails; Wait returns the error
// of every task that failed (errors.Join, each exactly once) or, with
// FirstError, exactly one of them. With a drawn Options.Queue, a task whose
// Go returned nil may instead not start (only after Close, or refused by a
// limiter's queue cap), and then Wait reports it.
func TestPoolBounds(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		k := kind(rapid.IntRange(0, int(concurrency)).Draw(rt, "kind"))
		c := drawConfig(rt, k, drawOpts{maxLimit: 8})
		u := c.unit()
		plan := poolPlan{
			workers:       rapid.IntRange(1, 6).Draw(rt, "workers"),
			queue:         rapid.SampledFrom([]int{0, 0, 1, 3}).Draw(rt, "queue"),
			cancelOnError: rapid.Bool().Draw(rt, "cancelOnError"),
			firstError:    rapid.Bool().Draw(rt, "firstError"),
			closeAt:       -1,
		}
		if rapid.IntRange(0, 3).Draw(rt, "close") == 0 {
			plan.closeAt = drawSpan(rt, 4*u, "closeAt")
		}
		for s := range rapid.IntRange(1, 3).Draw(rt, "submitters") {
			var ts []poolTask
			for i := range rapid.IntRange(1, 10).Draw(rt, fmt.Sprintf("tasks%d", s)) {
				tk := poolTask{
					pause: drawSpan(rt, u/4, fmt.Sprintf("pause%d.%d", s, i)),
					mode:  rapid.IntRange(0, 2).Draw(rt, "mode"),
					run:   drawSpan(rt, u, "run"),
					ends:  rapid.IntRange(0, 2).Draw(rt, "ends"),
				}
				if tk.mode == 1 {
					tk.timeout = drawSpan(rt, u, "timeout") + 1
				}
				ts = append(ts, tk)
			}
			plan.submitters = append(plan.submitters, ts)
		}

		var out poolOutcome
		failure := runBubble(t, func() string { return fmt.Sprintf("%v %+v", c, plan) }, func(pn *panics) {
			out = poolRun(pn, c, plan)
		})
		if failure != "" {
			rt.Fatalf("%v %+v\n%s", c, plan, failure)
		}
		if len(out.errs) > 0 {
			rt.Fatalf("%v %+v\n%v", c, plan, out.errs)
		}
		poolCheck(rt, c, plan, out)
	})
}

func poolRun(pn *panics, c config, plan poolPlan) poolOutcome {
	out := poolOutcome{runs: map[int]int{}, goErr: map[int]error{}, taskErr: map[int]error{}, closed: -1}
	start := time.Now()
	lim, err := c.build()
	if err != nil {
		out.errs = append(out.errs, err.Error())
		return out
	}
	defer lim.Close()
	p, err := pool.New(pool.Options{Workers: plan.workers, Queue: plan.queue, Limiter: lim, CancelOnError: plan.cancelOnError, FirstError: plan.firstError})
	if err != nil {
		out.errs = append(out.errs, err.Error())
		return out
	}
	var mu sync.Mutex
	running := 0
	task := func(id int, tk poolTask) func(context.Context) error {
		return func(ctx context.Context) (err error) {
			mu.Lock()
			out.starts = append(out.starts, grant{at: time.Since(start), n: 1, who: fmt.Sprint(id)})
			out.runs[id]++
			running++
			out.peak = max(out.peak, running)
			mu.Unlock()
			defer func() {
				mu.Lock()
				running--
				if r := recover(); r != nil {
					out.taskErr[id] = &pool.PanicError{Value: r}
					mu.Unlock()
					panic(r)
				}
				out.taskErr[id] = err
				mu.Unlock()
			}()
			timer := time.NewTimer(tk.run)
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
			switch tk.ends {
			case 1:
				return fmt.Errorf("task %d failed", id)
			case 2:
				panic(poolPanicValue(id))
			}
			return nil
		}
	}
	var wg sync.WaitGroup
	id := 0
	for _, ts := range plan.submitters {
		base := id
		id += len(ts)
		wg.Go(func() {
			defer pn.recover("submitter")
			for i, tk := range ts {
				time.Sleep(tk.pause)
				var err error
				switch tk.mode {
				case 0:
					err = p.Go(task(base+i, tk))
				case 1:
					ctx, cancel := context.WithTimeout(context.Background(), tk.timeout)
					err = p.GoContext(ctx, task(base+i, tk))
					cancel()
				case 2:
					err = p.TryGo(task(base+i, tk))
				}
				mu.Lock()
				out.goErr[base+i] = err
				mu.Unlock()
			}
		})
	}
	if plan.closeAt >= 0 {
		wg.Go(func() {
			time.Sleep(plan.closeAt)
			mu.Lock()
			out.closed = time.Since(start)
			mu.Unlock()
			p.Close()
		})
	}
	wg.Wait()
	out.waitErr = p.Wait()
	return out
}

func poolCheck(rt *rapid.T, c config, plan poolPlan, out poolOutcome) {
	if out.peak > plan.workers {
		rt.Fatalf("%d tasks ran at once, over %d workers", out.peak, plan.workers)
	}
	if c.kind == concurrency {
		if out.peak > c.limit {
			rt.Fatalf("%d tasks ran at once, over the concurrency limit %d (leases must be held while a task runs)", out.peak, c.limit)
		}
	} else if err := checkSafety(c, out.starts); err != nil {
		rt.Fatalf("%v: the task starts broke the limiter's bound: %v", c, err)
	}
	var failed, notStarted []int
	for id, goErr := range out.goErr {
		tk := poolTaskOf(plan, id)
		if goErr == nil {
			if plan.queue > 0 && out.runs[id] == 0 {
				// Queued, then not started: Wait must report it.
				notStarted = append(notStarted, id)
				continue
			}
			if out.runs[id] != 1 {
				rt.Fatalf("task %d %v: Go returned nil, it ran %d times", id, tk, out.runs[id])
			}
			if out.taskErr[id] != nil {
				failed = append(failed, id)
			}
			continue
		}
		if out.runs[id] != 0 {
			rt.Fatalf("task %d %v: Go returned %v, yet it ran %d times", id, tk, goErr, out.runs[id])
		}
		switch {
		case errors.Is(goErr, pool.ErrClosed):
			if out.closed < 0 {
				rt.Fatalf("task %d %v: ErrClosed without Close", id, tk)
			}
		case tk.mode == 1 && errors.Is(goErr, context.DeadlineExceeded):
		case tk.mode != 2 && c.queue.Limit > 0 && errors.Is(goErr, limiter.ErrQueueFull):
		case tk.mode == 2 && (errors.Is(goErr, pool.ErrBusy) || errors.Is(goErr, limiter.ErrLimited)):
		default:
			rt.Fatalf("task %d %v: Go failed with %v", id, tk, goErr)
		}
	}
	if id := len(out.goErr); id != poolTaskCount(plan) {
		rt.Fatalf("%d submissions recorded of %d", id, poolTaskCount(plan))
	}
	if len(notStarted) > 0 && out.closed < 0 && c.queue.Limit == 0 {
		rt.Fatalf("tasks %v were queued and never started, without Close or a limiter queue cap", notStarted)
	}
	if len(failed)+len(notStarted) == 0 {
		if out.waitErr != nil {
			rt.Fatalf("no task failed, Wait = %v", out.waitErr)
		}
		return
	}
	matches := func(err error, id int) bool {
		var pe *pool.PanicError
		if errors.As(err, &pe) {
			return pe.Value == poolPanicValue(id)
		}
		return err != nil && err.Error() == out.taskErr[id].Error()
	}
	// notStartedErr: a queued task's error for not starting.
	notStartedErr := func(err error) bool {
		return errors.Is(err, pool.ErrClosed) && out.closed >= 0 || errors.Is(err, limiter.ErrQueueFull) && c.queue.Limit > 0
	}
	if plan.firstError {
		for _, id := range failed {
			if matches(out.waitErr, id) {
				return
			}
		}
		if len(notStarted) > 0 && notStartedErr(out.waitErr) {
			return
		}
		rt.Fatalf("FirstError: Wait = %v, not one of the failed tasks %v", out.waitErr, failed)
	}
	joined, ok := out.waitErr.(interface{ Unwrap() []error })
	if !ok {
		rt.Fatalf("Wait = %v (%T), want errors.Join of %d errors", out.waitErr, out.waitErr, len(failed))
	}
	errs := joined.Unwrap()
	if len(errs) != len(failed)+len(notStarted) {
		rt.Fatalf("Wait joined %d errors, %d tasks failed and %d did not start: %v", len(errs), len(failed), len(notStarted), out.waitErr)
	}
	n := 0
	for _, e := range errs {
		if notStartedErr(e) {
			n++
		}
	}
	if n != len(notStarted) {
		rt.Fatalf("Wait has %d errors of tasks that did not start, %d did not: %v", n, len(notStarted), out.waitErr)
	}
	for _, id := range failed {
		n := 0
		for _, e := range errs {
			if matches(e, id) {
				n++
			}
		}
		if n != 1 {
			rt.Fatalf("task %d's error %v is %d times in Wait's", id, out.taskErr[id], n)
		}
	}
}

func poolTaskOf(plan poolPlan, id int) poolTask {
	for _, ts := range plan.submitters {
		if id < len(ts) {
			return ts[id]
		}
		id -= len(ts)
	}
	return poolTask{}
}

func poolTaskCount(plan poolPlan) int {
	n := 0
	for _, ts := range plan.submitters {
		n += len(ts)
	}
	return n
}
