package properties_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	failed, notStarted := poolCheckSubmissions(rt, c, plan, out)
	if id := len(out.goErr); id != taskCount(plan.submitters) {
		rt.Fatalf("%d submissions recorded of %d", id, taskCount(plan.submitters))
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
	poolCheckWait(rt, c, plan, out, failed, notStarted)
}

// poolCheckSubmissions checks each task's runs against its submission's
// error, and returns the tasks that ran and failed and those that were
// queued and never started.
func poolCheckSubmissions(rt *rapid.T, c config, plan poolPlan, out poolOutcome) (failed, notStarted []int) {
	for id, goErr := range out.goErr {
		tk := taskOf(plan.submitters, id)
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
	return failed, notStarted
}

// poolCheckWait checks that Wait reports every failed task once (or, with
// FirstError, one of them) and every task that did not start.
func poolCheckWait(rt *rapid.T, c config, plan poolPlan, out poolOutcome, failed, notStarted []int) {
	matches := func(err error, id int) bool { return poolErrMatches(out, err, id) }
	// notStartedErr: a queued task's error for not starting.
	notStartedErr := func(err error) bool {
		return errors.Is(err, pool.ErrClosed) && out.closed >= 0 || errors.Is(err, limiter.ErrQueueFull) && c.queue.Limit > 0
	}
	if plan.firstError {
		if !slices.ContainsFunc(failed, func(id int) bool { return matches(out.waitErr, id) }) &&
			!(len(notStarted) > 0 && notStartedErr(out.waitErr)) {
			rt.Fatalf("FirstError: Wait = %v, not one of the failed tasks %v", out.waitErr, failed)
		}
		return
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

// poolErrMatches reports whether err is task id's error (or its panic).
func poolErrMatches(out poolOutcome, err error, id int) bool {
	var pe *pool.PanicError
	if errors.As(err, &pe) {
		return pe.Value == poolPanicValue(id)
	}
	return err != nil && err.Error() == out.taskErr[id].Error()
}

// keyTask is one drawn task of the per-key mode.
type keyTask struct {
	key     int
	pause   time.Duration // before its GoKey
	run     time.Duration // how long it runs unless its context ends first
	timeout time.Duration // > 0: GoKey's ctx ends then, maybe before the task starts
}

type poolKeyPlan struct {
	workers    int
	queue      int           // Options.Queue: the cap on queued keyed tasks
	decide     time.Duration // how long each key limiter's TryAcquire takes
	keys       []config
	global     *config // Options.Limiter, chained with each key's
	closeAt    time.Duration
	submitters [][]keyTask
}

func (p poolKeyPlan) String() string {
	g := "none"
	if p.global != nil {
		g = p.global.String()
	}
	return fmt.Sprintf("{workers %d queue %d decide %v keys %v global %s closeAt %v submitters %+v}", p.workers, p.queue, p.decide, p.keys, g, p.closeAt, p.submitters)
}

type poolKeyOutcome struct {
	starts    [][]grant // per key
	all       []grant
	runs      map[int]int
	goErr     map[int]error
	peak      int   // tasks running at once, at any instant
	keyPeak   []int // per key
	closed    bool
	waitErr   error
	buildErrs []string
	// Instants: Wait returned; the submitters were done; the last task
	// returned; Close; each task's ctx's deadline.
	waited, submitted, lastEnd, closeAt time.Duration
	deadline                            map[int]time.Duration
}

// slowTry is a limiter whose TryAcquire takes decide (a limiter that asks a
// server), so that Close and contexts ending can come while the pool waits
// for its answer.
type slowTry struct {
	limiter.Limiter
	decide time.Duration
}

func (s slowTry) TryAcquire(n int) limiter.Lease {
	time.Sleep(s.decide)
	return s.Limiter.TryAcquire(n)
}

// TestPoolKeyBounds draws 1-4 keys, each with a drawn limiter of any kind,
// maybe a pool-wide Limiter chained with them, a pool (Workers, a cap on
// queued keyed tasks), and 1-3 submitters of GoKey calls in any order, some
// with a ctx that times out, and maybe a Close, and runs it in a synctest
// bubble. Checked: never more than Workers tasks run at once (at every start,
// under one lock with every finish); every key's starts keep its limiter's
// bound, and all starts keep the pool Limiter's (a Concurrency limiter's:
// tasks in use at once); every task runs at most once, never when its GoKey
// failed, and GoKey fails only with ErrClosed after Close or its ctx's
// deadline; every task that was queued and did not run is reported by Wait,
// with an error its plan allows; without Close, timeouts or limiter
// queue caps, every task runs; and Wait returns as soon as nothing is left
// to run: by the last task's end, the last timeout of a task that did not
// run, or the Close, whichever is last (plus one TryAcquire's time, drawn:
// the key limiters may take time to decide, as a server's do).
func TestPoolKeyBounds(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		plan := drawPoolKeyPlan(rt)
		var out poolKeyOutcome
		failure := runBubble(t, plan.String, func(pn *panics) {
			out = poolKeyRun(pn, plan)
		})
		if failure != "" {
			rt.Fatalf("%v\n%s", plan, failure)
		}
		if len(out.buildErrs) > 0 {
			rt.Fatalf("%v\n%v", plan, out.buildErrs)
		}
		poolKeyCheck(rt, plan, out)
	})
}

func drawPoolKeyPlan(rt *rapid.T) poolKeyPlan {
	plan := poolKeyPlan{
		workers: rapid.IntRange(1, 6).Draw(rt, "workers"),
		queue:   rapid.SampledFrom([]int{0, 1, 2, 5}).Draw(rt, "queue"),
		closeAt: -1,
	}
	if rapid.Bool().Draw(rt, "slow") {
		plan.decide = time.Duration(rapid.IntRange(1, 3).Draw(rt, "decideMs")) * time.Millisecond
	}
	u := time.Duration(0)
	for range rapid.IntRange(1, 4).Draw(rt, "keys") {
		c := drawConfig(rt, kind(rapid.IntRange(0, int(concurrency)).Draw(rt, "kind")), drawOpts{maxLimit: 6})
		plan.keys = append(plan.keys, c)
		u = max(u, c.unit())
	}
	if rapid.IntRange(0, 2).Draw(rt, "global") == 0 {
		g := drawConfig(rt, kind(rapid.IntRange(0, int(concurrency)).Draw(rt, "globalKind")), drawOpts{maxLimit: 8})
		plan.global = &g
	}
	if rapid.IntRange(0, 3).Draw(rt, "close") == 0 {
		plan.closeAt = drawSpan(rt, 4*u, "closeAt")
	}
	for s := range rapid.IntRange(1, 3).Draw(rt, "submitters") {
		var ts []keyTask
		for range rapid.IntRange(1, 10).Draw(rt, fmt.Sprintf("tasks%d", s)) {
			k := rapid.IntRange(0, len(plan.keys)-1).Draw(rt, "key")
			ku := plan.keys[k].unit()
			tk := keyTask{key: k, pause: drawSpan(rt, ku/4, "pause"), run: drawSpan(rt, ku, "run")}
			if rapid.IntRange(0, 4).Draw(rt, "timeoutDie") == 0 {
				tk.timeout = drawSpan(rt, 2*ku, "timeout") + 1
			}
			ts = append(ts, tk)
		}
		plan.submitters = append(plan.submitters, ts)
	}
	return plan
}

// poolKeyPool builds plan's limiters and pool, and a function that closes
// the limiters.
func poolKeyPool(plan poolKeyPlan) (*pool.Pool, func(), error) {
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	var lims []limiter.Limiter
	for _, c := range plan.keys {
		l, err := c.build()
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, l.Close)
		lims = append(lims, l)
	}
	opts := pool.Options{Workers: plan.workers, Queue: plan.queue, PerKey: func(k string) limiter.Limiter {
		var i int
		fmt.Sscan(k, &i)
		if plan.decide > 0 {
			return slowTry{lims[i], plan.decide}
		}
		return lims[i]
	}}
	if plan.global != nil {
		g, err := plan.global.build()
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, g.Close)
		opts.Limiter = g
	}
	p, err := pool.New(opts)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return p, closeAll, nil
}

func poolKeyRun(pn *panics, plan poolKeyPlan) poolKeyOutcome {
	out := poolKeyOutcome{runs: map[int]int{}, goErr: map[int]error{}, deadline: map[int]time.Duration{}, starts: make([][]grant, len(plan.keys)), keyPeak: make([]int, len(plan.keys))}
	start := time.Now()
	p, closeLimiters, err := poolKeyPool(plan)
	if err != nil {
		out.buildErrs = append(out.buildErrs, err.Error())
		return out
	}
	defer closeLimiters()
	var mu sync.Mutex
	running, keyRunning := 0, make([]int, len(plan.keys))
	task := func(id int, tk keyTask) func(context.Context) error {
		return func(ctx context.Context) error {
			mu.Lock()
			g := grant{at: time.Since(start), n: 1, who: fmt.Sprint(id)}
			out.starts[tk.key] = append(out.starts[tk.key], g)
			out.all = append(out.all, g)
			out.runs[id]++
			running++
			keyRunning[tk.key]++
			out.peak = max(out.peak, running)
			out.keyPeak[tk.key] = max(out.keyPeak[tk.key], keyRunning[tk.key])
			mu.Unlock()
			timer := time.NewTimer(tk.run)
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
			mu.Lock()
			running--
			keyRunning[tk.key]--
			out.lastEnd = max(out.lastEnd, time.Since(start))
			mu.Unlock()
			return nil
		}
	}
	var wg sync.WaitGroup
	var cancels []context.CancelFunc
	id := 0
	for _, ts := range plan.submitters {
		base := id
		id += len(ts)
		wg.Go(func() {
			defer pn.recover("submitter")
			for i, tk := range ts {
				time.Sleep(tk.pause)
				ctx := context.Background()
				if tk.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tk.timeout)
					mu.Lock()
					cancels = append(cancels, cancel)
					mu.Unlock()
				}
				err := p.GoKey(ctx, fmt.Sprint(tk.key), task(base+i, tk))
				mu.Lock()
				out.goErr[base+i] = err
				if deadline, ok := ctx.Deadline(); ok {
					out.deadline[base+i] = deadline.Sub(start)
				}
				mu.Unlock()
			}
		})
	}
	if plan.closeAt >= 0 {
		wg.Go(func() {
			time.Sleep(plan.closeAt)
			mu.Lock()
			out.closed, out.closeAt = true, time.Since(start)
			mu.Unlock()
			p.Close()
		})
	}
	wg.Wait()
	out.submitted = time.Since(start)
	out.waitErr = p.Wait()
	out.waited = time.Since(start)
	for _, cancel := range cancels {
		cancel()
	}
	return out
}

func poolKeyCheck(rt *rapid.T, plan poolKeyPlan, out poolKeyOutcome) {
	if out.peak > plan.workers {
		rt.Fatalf("%d tasks ran at once, over %d workers", out.peak, plan.workers)
	}
	for k, c := range plan.keys {
		checkPoolKeyBound(rt, c, out.starts[k], out.keyPeak[k], fmt.Sprintf("key %d", k))
	}
	if plan.global != nil {
		checkPoolKeyBound(rt, *plan.global, out.all, out.peak, "the pool Limiter")
	}
	queueCapped := plan.global != nil && plan.global.queue.Limit > 0
	for _, c := range plan.keys {
		queueCapped = queueCapped || c.queue.Limit > 0
	}
	notRun, timeouts := checkGoKeyErrors(rt, plan, out)
	if n := len(out.goErr); n != taskCount(plan.submitters) {
		rt.Fatalf("%d GoKey calls recorded of %d", n, taskCount(plan.submitters))
	}
	if notRun > 0 && !out.closed && !timeouts && !queueCapped {
		rt.Fatalf("%d queued tasks never ran, without Close, a timeout or a limiter queue cap; Wait = %v", notRun, out.waitErr)
	}
	var errs []error
	if out.waitErr != nil {
		joined, ok := out.waitErr.(interface{ Unwrap() []error })
		if !ok {
			rt.Fatalf("Wait = %v (%T), want errors.Join", out.waitErr, out.waitErr)
		}
		errs = joined.Unwrap()
	}
	if len(errs) != notRun {
		rt.Fatalf("%d queued tasks did not run, Wait reports %d: %v", notRun, len(errs), out.waitErr)
	}
	for _, err := range errs {
		ok := errors.Is(err, pool.ErrClosed) && out.closed || errors.Is(err, context.DeadlineExceeded) && timeouts ||
			errors.Is(err, limiter.ErrQueueFull) && queueCapped
		if !ok {
			rt.Fatalf("Wait reports %v for a task that did not start", err)
		}
	}
	checkWaitReturned(rt, plan, out)
}

// checkWaitReturned checks that Wait returned as soon as nothing was left
// to run: a queued task that did not run failed when its ctx ended or Close
// came (plus one TryAcquire's time, if its key was being tried then), not
// when its key's limiter would next have let it.
func checkWaitReturned(rt *rapid.T, plan poolKeyPlan, out poolKeyOutcome) {
	by := max(out.submitted, out.lastEnd)
	for id, goErr := range out.goErr {
		if goErr != nil || out.runs[id] > 0 {
			continue
		}
		end, ok := out.deadline[id]
		if out.closed && (!ok || out.closeAt < end) {
			end, ok = out.closeAt, true
		}
		if !ok {
			return // refused by a limiter's queue cap: when, this check cannot say
		}
		by = max(by, end+plan.decide)
	}
	if out.waited > by {
		rt.Fatalf("Wait returned at %v, want by %v (submitted %v, last task end %v, Close %v)",
			out.waited, by, out.submitted, out.lastEnd, out.closeAt)
	}
}

// checkGoKeyErrors checks each task's runs against its GoKey's error, and
// returns how many were queued and never ran, and whether any had a timeout.
func checkGoKeyErrors(rt *rapid.T, plan poolKeyPlan, out poolKeyOutcome) (notRun int, timeouts bool) {
	for id, goErr := range out.goErr {
		tk := taskOf(plan.submitters, id)
		timeouts = timeouts || tk.timeout > 0
		switch {
		case out.runs[id] > 1:
			rt.Fatalf("task %d %+v ran %d times", id, tk, out.runs[id])
		case goErr != nil && out.runs[id] != 0:
			rt.Fatalf("task %d %+v: GoKey returned %v, yet it ran", id, tk, goErr)
		case goErr == nil && out.runs[id] == 0:
			notRun++
		case goErr == nil:
		case errors.Is(goErr, pool.ErrClosed) && out.closed:
		case tk.timeout > 0 && errors.Is(goErr, context.DeadlineExceeded):
		default:
			rt.Fatalf("task %d %+v: GoKey failed with %v", id, tk, goErr)
		}
	}
	return notRun, timeouts
}

// checkPoolKeyBound checks starts (or, for a Concurrency limiter, the tasks
// running at once) against c's bound.
func checkPoolKeyBound(rt *rapid.T, c config, starts []grant, peak int, who string) {
	if c.kind == concurrency {
		if peak > c.limit {
			rt.Fatalf("%s: %d tasks ran at once, over its concurrency limit %d", who, peak, c.limit)
		}
		return
	}
	if err := checkSafety(c, starts); err != nil {
		rt.Fatalf("%s %v: the task starts broke its bound: %v", who, c, err)
	}
}

// taskOf returns the id-th task of the submitters' lists, counted in order.
func taskOf[T any](submitters [][]T, id int) T {
	for _, ts := range submitters {
		if id < len(ts) {
			return ts[id]
		}
		id -= len(ts)
	}
	var zero T
	return zero
}

// taskCount returns how many tasks the submitters' lists hold.
func taskCount[T any](submitters [][]T) int {
	n := 0
	for _, ts := range submitters {
		n += len(ts)
	}
	return n
}
