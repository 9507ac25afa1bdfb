package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

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
	// nil means no limit. When the task returns, the pool reports its
	// outcome and duration on the lease (see Outcomes in the package doc)
	// and releases it, so a limiter.Concurrency shared by several pools
	// bounds them together.
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
// Options.Queue is 0: enough to queue a crawl of 1,000 hosts × 10 URLs
// whole, in whatever order it is submitted, so that every host is kept as
// busy as its limit allows. The pool's own memory for waiting tasks is at
// most 64 bytes per task plus 256 bytes per key with waiting tasks (the
// tasks' closures and the keys' limiters aside), and it keeps emptied key
// queues for reuse with room for at most the cap's number of tasks, 32
// bytes each: at this cap, at most 1.5 MiB for the tasks of a few keys, and
// 5.5 MiB when every task has a key of its own.
const DefaultKeyQueue = 16384

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
	// The state, guarded by mu. What a task's submission and finish write
	// comes first, so that it shares mu's cache line.
	mu       sync.Mutex
	jobs     fifo[handOff] // tasks handed to the workers, not yet taken by one
	pending  int           // Go and GoKey calls in progress, and tasks not finished
	slots    int           // slots taken: tasks handed to the workers, and Go calls passing the limiter
	idlers   int           // idle workers waiting on work that no kick has woken yet
	spawned  int           // worker goroutines started
	waking   bool          // a worker that kick woke or started has not come to the work yet
	closed   bool          // Wait or Close was called: no new task
	finished bool          // closed and nothing pending: the workers stop
	// leases holds, without Options.Queue, the lease each of jobs starts
	// on, in the same order: apart, so that a job in the queue, which one
	// core writes and another reads, is three words rather than seven.
	leases   fifo[limiter.Lease]
	work     sync.Cond // idle workers wait on it for a job, a ready key, or the end
	slotFree waitList  // Go calls wait on it for a slot
	keys     keySched  // GoKey's queues, one per key with work
	errs     []error
	result   error
	waited   bool

	workers       int
	capacity      int  // Workers + Queue: the slots Go may take
	queued        bool // Queue > 0: workers pass the limiter
	lim           limiter.Limiter
	perKey        func(string) limiter.Limiter
	keyCap        int // the most keyed tasks waiting
	cancelOnError bool
	firstError    bool
	keepErrors    bool // false in Map's pools, whose errors go to their results

	life      context.Context // ends on Close or when Options.Context ends
	endLife   context.CancelCauseFunc
	tasksCtx  context.Context // the tasks' context: life, also ended by the first error or Wait
	endTasks  context.CancelCauseFunc
	closedErr atomic.Bool   // Close was called
	idle      chan struct{} // closed once the pool is closed and nothing is pending
	workWG    sync.WaitGroup
}

const maxWorkers = 1<<24 - 1 // the largest Workers + Queue

// job is a task for a worker: its function, the lease it starts on, and,
// with Options.Queue, the limiter the worker must pass first.
type job struct {
	fn    func(context.Context) error
	lease limiter.Lease
	lim   limiter.Limiter
}

// handOff is a job waiting in Pool.jobs, without its lease.
type handOff struct {
	fn  func(context.Context) error
	lim limiter.Limiter
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
		workers:       opts.Workers,
		capacity:      opts.Workers + opts.Queue,
		queued:        opts.Queue > 0,
		lim:           opts.Limiter,
		perKey:        opts.PerKey,
		keyCap:        cmp.Or(opts.Queue, DefaultKeyQueue),
		cancelOnError: opts.CancelOnError,
		firstError:    opts.FirstError,
		keepErrors:    true,
		idle:          make(chan struct{}),
	}
	p.work.L = &p.mu
	p.slotFree.L = &p.mu
	p.keys.room.L = &p.mu
	p.life, p.endLife = context.WithCancelCause(parent)
	p.tasksCtx, p.endTasks = context.WithCancelCause(p.life)
	p.workWG.Add(1)
	context.AfterFunc(p.life, p.lifeEnded) // Wait and Close end the life
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
	if p.waiting(key) {
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

// submit takes a slot, passes lim (unless the worker will: Options.Queue),
// and hands task to a worker.
func (p *Pool) submit(ctx context.Context, lim limiter.Limiter, try bool, task func(context.Context) error) error {
	if task == nil {
		return ErrNilTask
	}
	ended := p.startErr(ctx) // two atomic loads, before the lock
	p.mu.Lock()
	err := p.enter(ended)
	if err == nil {
		if err = p.takeSlot(ctx, try); err != nil {
			p.leave()
		}
	}
	if err != nil {
		p.mu.Unlock()
		return err
	}
	var lease limiter.Lease
	if !p.queued && lim != nil {
		p.mu.Unlock()
		lease, err = p.pass(ctx, lim, try)
		p.mu.Lock()
	}
	switch {
	case err != nil:
		p.taskDone(nil) // give the slot back; Go reports err, not Wait
	case p.queued:
		p.jobs.push(handOff{task, lim})
	default:
		p.jobs.push(handOff{fn: task})
		p.leases.push(lease)
	}
	p.kick() // the job, or a ready key that fits in the slot given back
	p.mu.Unlock()
	return err
}

// enter counts a call in progress, unless the pool is closed or ended is
// not nil: the call's startErr, read before p.mu was taken. p.mu is held.
func (p *Pool) enter(ended error) error {
	if p.closed {
		return ErrClosed
	}
	if ended != nil {
		return ended
	}
	p.pending++
	return nil
}

// startErr is why a task with ctx cannot start now, or nil.
func (p *Pool) startErr(ctx context.Context) error {
	if p.life.Err() != nil {
		return p.lifeErr()
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// lifeErr is why the pool's life ended: ErrClosed after Close, else the
// Options.Context's cause.
func (p *Pool) lifeErr() error {
	if p.closedErr.Load() {
		return ErrClosed
	}
	return context.Cause(p.life)
}

// lifeCause is err, the error of a wait on the pool's life, or why the
// life ended if it did: ErrClosed rather than a limiter's bare
// context.Canceled.
func (p *Pool) lifeCause(err error) error {
	if err != nil && p.life.Err() != nil {
		return p.lifeErr()
	}
	return err
}

// leave ends one pending call or task; the last one after Wait or Close
// stops the workers. p.mu is held.
func (p *Pool) leave() {
	p.pending--
	if p.closed && p.pending == 0 {
		p.finish()
	}
}

// finish stops the workers and closes idle, which Wait and Close wait for,
// once nothing is pending after Wait or Close. p.mu is held.
func (p *Pool) finish() {
	if !p.finished {
		p.finished = true
		close(p.idle)
		p.work.Broadcast()
	}
}

// takeSlot takes a slot for a task of Go, waiting (with p.mu released)
// while all Workers + Queue are taken, unless try. (A keyed task takes a
// slot only below Workers, so that it is granted only when a worker will
// start it at once: see nextKeyJob.) p.mu is held.
func (p *Pool) takeSlot(ctx context.Context, try bool) error {
	if p.slotOpen() {
		p.slots++
		return nil
	}
	if try {
		return ErrBusy
	}
	if err := p.waitUntil(&p.slotFree, ctx, p.slotOpen); err != nil {
		return err
	}
	p.slots++
	if p.slotOpen() {
		p.slotFree.signal() // another Go may fit too
	}
	return nil
}

func (p *Pool) slotOpen() bool { return p.slots < p.capacity }

// kick tells the workers that a job or a ready key waits: it wakes an idle
// worker, or starts one if fewer than Workers run, unless one is on its
// way already (that one wakes the next when it comes, if there is more
// work: see woke). So a burst of short tasks wakes the idle workers one
// after another as the work needs them, not all at once. p.mu is held.
func (p *Pool) kick() {
	if p.waking {
		return
	}
	p.waking = true
	switch {
	case p.idlers > 0:
		p.idlers--
		p.work.Signal()
	case p.spawned < p.workers:
		p.spawned++
		p.workWG.Add(1)
		go p.worker()
	default:
		p.waking = false
	}
}

// woke runs when a worker that kick woke or started comes to the work: it
// wakes the next if more work waits than this one will take. p.mu is held.
func (p *Pool) woke() {
	p.waking = false
	if p.jobs.len()+p.keys.ready.len() > 1 {
		p.kick()
	}
}

// waitList is a sync.Cond on p.mu that counts its waiters, so that a
// signal nobody waits for (as each finished task sends) costs nothing.
type waitList struct {
	sync.Cond
	waiters int
}

// signal wakes a waiter, if one waits. p.mu is held.
func (w *waitList) signal() {
	if w.waiters > 0 {
		w.Signal()
	}
}

// waitUntil waits on c, with p.mu released while it waits, until ok()
// holds, ctx ends or the pool's life ends (lifeEnded broadcasts). p.mu is
// held.
func (p *Pool) waitUntil(c *waitList, ctx context.Context, ok func() bool) error {
	if ok() {
		return nil
	}
	if ctx.Done() != nil { // only when the caller has to wait: this allocates
		stop := context.AfterFunc(ctx, func() {
			p.mu.Lock()
			c.Broadcast()
			p.mu.Unlock()
		})
		defer stop()
	}
	for !ok() {
		if err := p.startErr(ctx); err != nil {
			if ok() {
				c.signal() // the wake-up this call may have taken is another's
			}
			return err
		}
		c.waiters++
		c.Wait()
		c.waiters--
	}
	return nil
}

// lifeEnded runs once the pool's life has ended (Close, Options.Context
// ended, Wait): it fails the queued keyed tasks, and wakes every call
// waiting for a slot or for room, so that it fails too.
func (p *Pool) lifeEnded() {
	defer p.workWG.Done()
	p.drainKeys()
	p.mu.Lock()
	p.slotFree.Broadcast()
	p.keys.room.Broadcast()
	p.mu.Unlock()
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
		return lease, p.lifeCause(err)
	}
	// Wait on both ctx and the pool's life: this allocates, but only when
	// the caller has to wait anyway.
	wctx, stop := p.waitContext(ctx)
	lease, err := lim.Acquire(wctx, 1)
	return lease, stop(err)
}

// waitContext is a context that ends when ctx or the pool's life ends, and
// the function to call with the error of the wait once it is over: it lets
// the context go and, when the wait failed because the context ended,
// returns why it ended (ctx's cause, or ErrClosed after Close) in place of
// the bare context.Canceled a limiter reports.
func (p *Pool) waitContext(ctx context.Context) (context.Context, func(error) error) {
	if ctx.Done() == nil {
		return p.life, p.lifeCause
	}
	wctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(p.life, func() { cancel(p.lifeErr()) })
	return wctx, func(err error) error {
		stop()
		if err != nil && wctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			err = context.Cause(wctx)
		}
		cancel(nil)
		return err
	}
}

// worker runs the jobs and the ready keys' tasks until the pool finishes.
// It holds p.mu but while a task runs, so that finishing a task and taking
// the next is one critical section.
func (p *Pool) worker() {
	defer p.workWG.Done()
	p.mu.Lock()
	p.woke()
	for {
		j, ok := p.next()
		if !ok {
			break
		}
		p.mu.Unlock()
		err := p.run(j) // does not return if the task calls runtime.Goexit
		p.mu.Lock()
		p.taskDone(err)
	}
	p.mu.Unlock()
}

// next returns the next job, or the head of a ready key whose limiters
// grant it, waiting while there is neither; false once the pool is
// finished. p.mu is held.
func (p *Pool) next() (job, bool) {
	for {
		if j, ok := p.take(); ok {
			return j, true
		}
		if p.finished {
			return job{}, false
		}
		p.idlers++
		p.work.Wait()
		p.woke()
	}
}

// take takes the oldest job, or else the head of a ready key whose
// limiters grant it. p.mu is held.
func (p *Pool) take() (job, bool) {
	if p.jobs.len() == 0 {
		return p.nextKeyJob()
	}
	h := p.jobs.pop()
	j := job{fn: h.fn, lim: h.lim}
	if !p.queued {
		j.lease = p.leases.pop()
	}
	return j, true
}

// run runs one job and returns the task's error: a *PanicError if it
// panicked. If the task calls runtime.Goexit, run finishes it (ErrGoexit)
// and starts a worker in place of this goroutine, which ends.
func (p *Pool) run(j job) (err error) {
	if p.queued {
		if err := p.admit(&j); err != nil {
			j.lease.Release()
			return err
		}
	}
	var start time.Time
	if j.lease.Granted() {
		start = time.Now()
	}
	normal := false
	defer func() {
		if normal {
			return
		}
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
			p.ended(j, start, err)
			return
		}
		p.ended(j, start, ErrGoexit) // Goexit cannot be stopped: replace this worker.
		p.mu.Lock()
		p.taskDone(ErrGoexit)
		p.workWG.Add(1)
		go p.worker()
		p.mu.Unlock()
	}()
	err = j.fn(p.tasksCtx)
	normal = true
	p.ended(j, start, err)
	return err
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
		return fmt.Errorf("pool: a queued task did not start: %w", p.lifeCause(err))
	}
	j.lease = lease
	return nil
}

// ended reports the outcome and duration of a task that ran from start on
// its lease (for limiters that learn from outcomes), then releases the
// lease.
func (p *Pool) ended(j job, start time.Time, err error) {
	if j.lease.Granted() {
		j.lease.Report(limiter.OutcomeOf(err), time.Since(start))
		j.lease.Release()
	}
}

// taskDone records a task's error (nil for a Go call that failed: Go
// reports that), frees its slot for a waiting Go call, and ends its place
// among the pending. p.mu is held.
func (p *Pool) taskDone(err error) {
	if err != nil {
		p.record(err)
	}
	p.slots--
	p.slotFree.signal()
	p.leave()
}

// record keeps a task's error and, with CancelOnError, ends the tasks'
// context on the first one. p.mu is held.
func (p *Pool) record(err error) {
	first := len(p.errs) == 0
	if first && p.cancelOnError {
		p.endTasks(err)
	}
	if p.keepErrors && (first || !p.firstError) {
		p.errs = append(p.errs, err)
	}
}

// shut refuses new tasks from now on.
func (p *Pool) shut() {
	p.mu.Lock()
	p.closed = true
	if p.pending == 0 {
		p.finish()
	}
	p.mu.Unlock()
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
	p.endTasks(context.Canceled)
	p.endLife(context.Canceled) // let go of Options.Context; stop the keys' waiter
	p.workWG.Wait()
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
