package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/rategate/rategate/limiter"
)

var (
	// ErrClosed: the pool no longer takes tasks, because Wait or Close was
	// called. It wraps limiter.ErrClosed, so errors.Is(err, limiter.ErrClosed)
	// holds too.
	ErrClosed = fmt.Errorf("pool: closed (Wait or Close was called): %w", limiter.ErrClosed)
	// ErrBusy: TryGo found every worker busy. It wraps limiter.ErrLimited.
	ErrBusy = fmt.Errorf("pool: every worker is busy: %w", limiter.ErrLimited)
	// ErrNilTask: a nil task was submitted.
	ErrNilTask = errors.New("pool: nil task")
	// ErrGoexit: a task called runtime.Goexit (t.FailNow, for one) instead
	// of returning. The pool reports it as the task's error.
	ErrGoexit = errors.New("pool: task called runtime.Goexit")
)

// Options configures New.
type Options struct {
	// Workers is the most tasks running at once. It must be at least 1.
	Workers int
	// Limiter, when not nil, must grant one permit before each task starts;
	// nil means no limit. A lease it grants is released when the task
	// returns, so a limiter.Concurrency shared by several pools bounds them
	// together.
	Limiter limiter.Limiter
	// PerKey returns the limiter of a key (a host, a tenant) for GoKey and
	// TryGoKey: a keyed task starts only when Limiter and PerKey(key) both
	// grant, at the same instant (limiter.Chain). nil, or a nil limiter for
	// a key, means no per-key limit. (*limiter.Keyed[string]).For and
	// (*limiter.KeyedTokenBucket[string]).For fit it. PerKey is called when
	// a key's queue is made, not once per task.
	PerKey func(key string) limiter.Limiter
	// Context is the parent of the context the tasks get; nil means
	// context.Background. When it ends, the tasks' context ends too, later
	// Go calls fail with its error, and keyed tasks that have not started
	// never start.
	Context context.Context
	// CancelOnError cancels the tasks' context when a task first returns an
	// error (or panics), as golang.org/x/sync/errgroup does. Tasks already
	// submitted still run, with a cancelled context.
	CancelOnError bool
	// Queue caps the tasks waiting to start, so memory stays bounded.
	//
	// For Go: when positive, Go returns as soon as its task is queued behind
	// at most Queue others waiting for a worker, instead of waiting for a
	// free worker: submitters then run ahead of the workers, which drain the
	// queue without a hand-off per task. The limiter is then passed by the
	// worker, right before the task starts (so the bound on task starts
	// holds the same), and a task that cannot start (the limiter refused, or
	// Close came first) does not run: its error is reported by Wait instead
	// of by Go.
	//
	// For GoKey, which always queues, it is the most keyed tasks waiting in
	// their keys' queues; 0 means DefaultKeyQueue. GoKey waits only while
	// the cap is reached.
	Queue int
	// FirstError makes Wait return only the first error a task returned.
	// By default Wait returns errors.Join of all of them, in the order the
	// tasks returned.
	FirstError bool
}

// DefaultKeyQueue is the cap on keyed tasks waiting to start when
// Options.Queue is 0.
const DefaultKeyQueue = 1024

// PanicError is the error of a task that panicked: the pool recovers the
// panic, so the process does not crash and Wait still returns.
type PanicError struct {
	// Value is what the task passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, as runtime/debug.Stack
	// formats it.
	Stack []byte
}

// Error returns the panic value followed by the stack.
func (e *PanicError) Error() string {
	return fmt.Sprintf("pool: task panicked: %v\n\n%s", e.Value, e.Stack)
}

// Unwrap returns the panic value if it is an error, so errors.Is and
// errors.As see through a panic(err).
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Pool runs tasks on at most Options.Workers goroutines at once; each
// task's start passes Options.Limiter (and the key's limiter for GoKey).
// Make it with New, submit with Go, GoContext, GoKey or TryGo, and end it
// with Wait or Close. Its methods are safe for concurrent use.
type Pool struct {
	workers       int64
	capacity      int64 // workers + queue: the slots Go may reserve
	queued        bool  // Queue > 0: workers pass the limiter
	spins         int   // waitSlot's polls before it parks
	maxSpinning   int64 // idle workers that may poll at once
	lim           limiter.Limiter
	perKey        func(string) limiter.Limiter
	keyCap        int // the most keyed tasks waiting
	cancelOnError bool
	firstError    bool

	life      context.Context // ends on Close or when Options.Context ends
	endLife   context.CancelCauseFunc
	tasksCtx  context.Context // the tasks' context: life, also ended by the first error or Wait
	endTasks  context.CancelCauseFunc
	closedErr atomic.Bool // Close was called

	// state packs three counters in one word, so that a task costs one
	// atomic operation to submit and one to finish: the worker slots
	// reserved (tasks handed over or running, and Go calls passing the
	// limiter) in the low bits, the pending Go calls and unfinished tasks
	// above them, and closedBit, set by Wait and Close.
	state    atomic.Int64
	spawned  atomic.Int64 // worker goroutines started
	spinning atomic.Int64 // idle workers polling for a job
	waiters  atomic.Int64 // Go calls parked for a slot
	wake     chan struct{}
	jobs     chan job
	workWG   sync.WaitGroup

	idle     chan struct{} // closed once closed and nothing pending
	idleOnce sync.Once

	keys keySched // GoKey's queues, one per key with work

	mu     sync.Mutex
	errs   []error
	result error
	waited bool
}

const (
	activeMask = 1<<24 - 1
	pendingOne = 1 << 24
	closedBit  = 1 << 62
	maxWorkers = activeMask // the largest Workers + Queue
)

type job struct {
	fn    func(context.Context) error
	lease limiter.Lease
	lim   limiter.Limiter // with Queue: the limiter the worker must pass first
}

// New returns a Pool, or an *limiter.OptionError naming the field if
// Options.Workers is less than 1 or Options.Queue is negative (or either
// is too large to count). Worker goroutines start as tasks need them, up to
// Workers; Wait or Close ends them.
func New(opts Options) (*Pool, error) {
	if opts.Workers < 1 || opts.Workers > maxWorkers {
		return nil, &limiter.OptionError{Field: "Workers", Problem: fmt.Sprintf("is %d, must be from 1 to %d", opts.Workers, maxWorkers)}
	}
	if opts.Queue < 0 || opts.Queue > maxWorkers-opts.Workers {
		return nil, &limiter.OptionError{Field: "Queue", Problem: fmt.Sprintf("is %d, must be from 0 to %d less Workers", opts.Queue, maxWorkers)}
	}
	parent := opts.Context
	if parent == nil {
		parent = context.Background()
	}
	p := &Pool{
		workers:       int64(opts.Workers),
		capacity:      int64(opts.Workers + opts.Queue),
		queued:        opts.Queue > 0,
		lim:           opts.Limiter,
		perKey:        opts.PerKey,
		keyCap:        cmp.Or(opts.Queue, DefaultKeyQueue),
		cancelOnError: opts.CancelOnError,
		firstError:    opts.FirstError,
		wake:          make(chan struct{}, 1),
		jobs:          make(chan job, opts.Workers+opts.Queue),
		idle:          make(chan struct{}),
	}
	if opts.Queue == 0 {
		p.spins, p.maxSpinning = spins, maxSpinning
	}
	p.life, p.endLife = context.WithCancelCause(parent)
	p.tasksCtx, p.endTasks = context.WithCancelCause(p.life)
	return p, nil
}

// Go submits task and returns once it has started on a worker. It waits
// until a worker is free and then until Options.Limiter grants a permit;
// the task starts right after the grant. It returns an error, and the task
// never runs, exactly when the task could not start: ErrClosed after Wait or
// Close (also when Close ends the wait), the Options.Context's error when it
// ends, or the limiter's error (say limiter.ErrExceedsLimit).
//
// With Options.Queue, Go returns once the task is queued (it waits only
// while the queue is full), the worker passes the limiter, and a task that
// cannot start is reported by Wait instead.
//
// Go never waits on its own for anything but the pool: a caller that wants
// to give up waiting uses GoContext. Do not call Go from inside a task of the
// same pool when every worker may be busy: it waits for a worker that only
// its own return would free. For tasks with a key (a host), GoKey does not
// wait for a worker at all.
func (p *Pool) Go(task func(ctx context.Context) error) error {
	return p.submit(context.Background(), p.lim, false, task)
}

// GoContext is Go with a context for the wait: when ctx ends before the task
// could start, GoContext returns ctx's error (errors.Is(err, ctx.Err())) and
// the task never runs. ctx only bounds the wait; the task gets the pool's
// context. A nil ctx panics.
func (p *Pool) GoContext(ctx context.Context, task func(ctx context.Context) error) error {
	if ctx == nil {
		panic("pool: nil Context")
	}
	return p.submit(ctx, p.lim, false, task)
}

// TryGo starts task only if a worker is free and Options.Limiter grants a
// permit now; it never waits. It returns nil when the task started,
// ErrBusy when every worker is busy, the lease's error (limiter.ErrLimited)
// when the limiter refused, or ErrClosed. With Options.Queue it queues the
// task if the queue has room (ErrBusy when full) and leaves the limiter to
// the worker.
func (p *Pool) TryGo(task func(ctx context.Context) error) error {
	return p.submit(context.Background(), p.lim, true, task)
}

// TryGoKey starts task with a key only if a worker is free and both
// Options.Limiter and Options.PerKey(key) grant a permit now; it never waits
// and does not use the key's queue. Like TryGo it returns ErrBusy or the
// refusal (limiter.ErrLimited), also while tasks of the same key wait in its
// queue: it does not jump them. With Options.Queue it queues the task as
// TryGo does, and the worker passes both limiters.
func (p *Pool) TryGoKey(key string, task func(ctx context.Context) error) error {
	if task == nil {
		return ErrNilTask
	}
	if p.keys.waiting(key) {
		return fmt.Errorf("pool: tasks of key %q are waiting: %w", key, limiter.ErrLimited)
	}
	return p.submit(context.Background(), p.keyLimiter(key), true, task)
}

// keyLimiter is what a task of key must pass: Options.Limiter chained with
// PerKey(key), either alone, or nil for no limit.
func (p *Pool) keyLimiter(key string) limiter.Limiter {
	var kl limiter.Limiter
	if p.perKey != nil {
		kl = p.perKey(key)
	}
	switch {
	case kl == nil:
		return p.lim
	case p.lim == nil:
		return kl
	}
	return limiter.Chain(p.lim, kl)
}

// submit reserves a worker, passes lim, and hands task over. A ctx that is
// never done (context.Background) waits on the pool's life alone.
func (p *Pool) submit(ctx context.Context, lim limiter.Limiter, try bool, task func(context.Context) error) error {
	if task == nil {
		return ErrNilTask
	}
	// Fast path: enter and reserve a slot in one compare-and-swap.
	reserved := false
	for {
		s := p.state.Load()
		if s&closedBit != 0 {
			return ErrClosed
		}
		if s&activeMask >= p.capacity {
			if p.state.Add(pendingOne)&closedBit != 0 {
				p.leave()
				return ErrClosed
			}
			break
		}
		if p.state.CompareAndSwap(s, s+pendingOne+1) {
			p.spawn(s & activeMask)
			reserved = true
			break
		}
	}
	if err := p.submitEntered(ctx, lim, try, reserved, task); err != nil {
		p.leave()
		return err
	}
	return nil
}

func (p *Pool) submitEntered(ctx context.Context, lim limiter.Limiter, try, reserved bool, task func(context.Context) error) error {
	if p.life.Err() != nil {
		if reserved {
			p.unreserve()
		}
		return p.lifeErr()
	}
	if ctx.Err() != nil { // ended before the task could start
		if reserved {
			p.unreserve()
		}
		return context.Cause(ctx)
	}
	if !reserved {
		if try {
			return ErrBusy
		}
		if err := p.waitSlot(ctx); err != nil {
			return err
		}
	}
	if p.queued {
		p.jobs <- job{fn: task, lim: lim} // never blocks: a reserved slot is a free place
		return nil
	}
	var lease limiter.Lease
	if lim != nil {
		var err error
		if lease, err = p.pass(ctx, lim, try); err != nil {
			p.unreserve()
			return err
		}
	}
	p.jobs <- job{fn: task, lease: lease} // never blocks: a reserved slot is a free place
	return nil
}

// pass takes one permit from lim, waiting unless try.
func (p *Pool) pass(ctx context.Context, lim limiter.Limiter, try bool) (limiter.Lease, error) {
	if try || ctx.Done() != nil {
		lease := lim.TryAcquire(1)
		if lease.Granted() || try || !errors.Is(lease.Err(), limiter.ErrLimited) {
			return lease, lease.Err()
		}
	}
	if ctx.Done() == nil { // Go: wait on the pool's life alone, allocating nothing
		lease, err := lim.Acquire(p.life, 1)
		if err != nil && p.life.Err() != nil {
			err = p.lifeErr()
		}
		return lease, err
	}
	// Wait on both ctx and the pool's life: this allocates, but only when
	// the caller has to wait anyway.
	wctx, stop := p.waitContext(ctx)
	lease, err := lim.Acquire(wctx, 1)
	return lease, stop(err)
}

// lifeErr is why the pool's life ended: ErrClosed after Close, else the
// Options.Context's cause.
func (p *Pool) lifeErr() error {
	if p.closedErr.Load() {
		return ErrClosed
	}
	return context.Cause(p.life)
}

// reserve takes a slot if fewer than limit are taken, starting a worker
// goroutine when the reserved slots outnumber them. Go reserves up to
// capacity (Workers plus Options.Queue); a keyed task up to Workers, so that
// it is granted only when a worker will start it at once.
func (p *Pool) reserve(limit int64) bool {
	for {
		s := p.state.Load()
		if s&activeMask >= limit {
			return false
		}
		if p.state.CompareAndSwap(s, s+1) {
			p.spawn(s & activeMask)
			return true
		}
	}
}

// spawn makes sure a worker goroutine exists for the slot just reserved
// above n others, up to Workers.
func (p *Pool) spawn(n int64) {
	for s := p.spawned.Load(); s <= n && s < p.workers; s = p.spawned.Load() {
		if p.spawned.CompareAndSwap(s, s+1) {
			p.workWG.Add(1)
			go p.worker()
		}
	}
}

// unreserve gives a slot back and wakes a parked Go or a ready key.
func (p *Pool) unreserve() {
	p.state.Add(-1)
	p.wakeWaiter()
	if p.keys.nready.Load() > 0 {
		p.dispatch()
	}
}

// wakeWaiter wakes a Go call parked for a slot, if there is one.
func (p *Pool) wakeWaiter() {
	if p.waiters.Load() > 0 {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

// spins is how many times waitSlot yields before it parks when Go waits
// for a worker: with short tasks a worker is usually free again within a
// few yields, and parking costs more. With Options.Queue a full queue drains
// one task at a time and waitSlot parks at once (measured: polling there
// costs more than it saves).
const (
	spins      = 64
	yieldEvery = 1 // polls between two yields
)

// waitSlot waits until reserve succeeds, ctx ends or the pool's life ends.
func (p *Pool) waitSlot(ctx context.Context) error {
	for i := range p.spins {
		if p.reserve(p.capacity) {
			return nil
		}
		if i%yieldEvery == yieldEvery-1 {
			runtime.Gosched()
		}
	}
	done := ctx.Done() // nil, blocking forever, for context.Background
	p.waiters.Add(1)
	defer p.waiters.Add(-1)
	for {
		if p.reserve(p.capacity) {
			// Pass the wake-up on: another waiter may fit too.
			if p.state.Load()&activeMask < p.capacity {
				select {
				case p.wake <- struct{}{}:
				default:
				}
			}
			return nil
		}
		select {
		case <-p.wake:
		case <-done:
			return context.Cause(ctx)
		case <-p.life.Done():
			return p.lifeErr()
		}
	}
}

func (p *Pool) worker() {
	defer p.workWG.Done()
	for {
		j, ok := p.next()
		if !ok {
			return
		}
		if !p.run(j) {
			// The task called runtime.Goexit: this goroutine is ending,
			// so run started a replacement.
			return
		}
	}
}

// workerSpins is how many times an idle worker polls for a job, yielding
// between polls, before it parks: when Go hands each task over, a burst of
// short tasks then flows without a park and a wake-up per task. Only
// maxSpinning idle workers poll at once; the others park at once, so that
// many idle workers do not take the CPU from the goroutines that submit.
// With Options.Queue no worker polls: the queue keeps them busy, and
// measured, polling there cost more than it saved.
const (
	workerSpins = 64
	maxSpinning = 1
)

// next returns the next job, or false once the pool is finished.
func (p *Pool) next() (job, bool) {
	if p.maxSpinning > 0 { // not with Options.Queue: no counter to share then
		if p.spinning.Add(1) <= p.maxSpinning {
			for i := range workerSpins {
				select {
				case j, ok := <-p.jobs:
					p.spinning.Add(-1)
					return j, ok
				default: // an empty channel is seen without taking its lock
				}
				if i%16 == 15 {
					runtime.Gosched()
				}
			}
		}
		p.spinning.Add(-1)
	}
	j, ok := <-p.jobs
	return j, ok
}

// run runs one job and does its bookkeeping, also when the task panics or
// calls runtime.Goexit. It reports whether the task returned or panicked.
func (p *Pool) run(j job) (ok bool) {
	normal := false
	defer func() {
		if normal {
			return
		}
		var err error
		{
			if v := recover(); v != nil {
				err, ok = &PanicError{Value: v, Stack: debug.Stack()}, true
			} else {
				err = ErrGoexit // Goexit cannot be stopped: replace this worker.
				p.workWG.Add(1)
				go p.worker()
			}
		}
		p.done(j, err)
	}()
	if p.queued {
		if err := p.admit(&j); err != nil {
			normal = true
			p.done(j, err)
			return true
		}
	}
	err := j.fn(p.tasksCtx)
	normal = true
	p.done(j, err)
	return true
}

// admit passes a queued job's limiter, in the worker, right before the task
// starts. A job queued when Close came does not start.
func (p *Pool) admit(j *job) error {
	if p.life.Err() != nil {
		return fmt.Errorf("pool: a queued task did not start: %w", p.lifeErr())
	}
	if j.lim == nil {
		return nil
	}
	lease, err := j.lim.Acquire(p.life, 1)
	if err != nil {
		if p.life.Err() != nil {
			err = p.lifeErr()
		}
		return fmt.Errorf("pool: a queued task did not start: %w", err)
	}
	j.lease = lease
	return nil
}

// done finishes a job: releases its lease, records its error, frees its slot.
// run calls it once, on its normal path or in its deferred function.
func (p *Pool) done(j job, err error) {
	j.lease.Release()
	if err != nil {
		p.record(err)
	}
	// Free the slot and leave in one operation.
	if p.state.Add(-pendingOne-1) == closedBit {
		p.finish()
	}
	p.wakeWaiter()
	if p.keys.nready.Load() > 0 {
		p.dispatch()
	}
}

// record keeps a task's error and, with CancelOnError, ends the tasks'
// context on the first one.
func (p *Pool) record(err error) {
	p.mu.Lock()
	first := len(p.errs) == 0
	if first || !p.firstError {
		p.errs = append(p.errs, err)
	}
	p.mu.Unlock()
	if first && p.cancelOnError {
		p.endTasks(err)
	}
}

// leave ends one pending Go call or task; the last one after Wait or Close
// stops the workers.
func (p *Pool) leave() {
	if p.state.Add(-pendingOne) == closedBit {
		p.finish()
	}
}

// shut refuses new tasks from now on.
func (p *Pool) shut() {
	if p.state.Or(closedBit) == 0 {
		p.finish()
	}
}

// finish runs once nothing is pending after shut: no Go call can send any
// more, so the workers can stop.
func (p *Pool) finish() {
	p.idleOnce.Do(func() {
		close(p.jobs)
		close(p.idle)
	})
}

// Wait refuses new tasks (later Go calls fail with ErrClosed), waits until
// every submitted task has returned and every Go call in progress has
// started its task or failed, stops the workers, ends the tasks' context,
// and returns the tasks' errors: errors.Join of all of them in the order
// they returned, or only the first with Options.FirstError; nil if every
// task returned nil. A panic is a *PanicError. Errors of Go calls are not
// included: Go returned them. The error of each queued task that could not
// start (with Options.Queue, and every GoKey task: ErrClosed, its GoKey
// context's error, the limiter's error) is included. Wait may be called any
// number of times, also concurrently and after Close; each returns the same.
// A task must not call Wait on its own pool: Wait would wait for it. Wait
// ends the pool: see the package doc on why a Pool is used once.
func (p *Pool) Wait() error {
	p.shut()
	<-p.idle
	p.keys.stopWatch(p)
	p.workWG.Wait()
	p.endTasks(context.Canceled)
	p.endLife(context.Canceled) // let go of Options.Context
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.waited {
		p.waited = true
		if p.firstError {
			if len(p.errs) > 0 {
				p.result = p.errs[0]
			}
		} else {
			p.result = errors.Join(p.errs...)
		}
	}
	return p.result
}

// Close refuses new tasks, fails the Go calls still waiting with ErrClosed
// (and the queued tasks that have not started: Wait reports them),
// ends the tasks' context (context.Cause is ErrClosed), and waits for the
// running tasks to return and the workers to stop. It returns nil; call
// Wait afterwards for the tasks' errors. Close may be called any number of
// times.
func (p *Pool) Close() error {
	p.closedErr.Store(true)
	p.endLife(ErrClosed)
	p.drainKeys()
	p.shut()
	<-p.idle
	p.workWG.Wait()
	return nil
}
