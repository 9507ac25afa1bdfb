package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
)

// algorithm is what differs between this package's limiters: the script,
// the Redis keys of one limit, and how the script's reply reads. Every
// script answers {now, a, b, r1, …, rk}: now is Redis's clock (µs) at the
// decision, a and b describe the limit's state for Quota, and ri is request
// i's outcome: 0 granted, > 0 refused with a wait in µs, -1 refused with no
// known wait.
type algorithm struct {
	kind   string // names the algorithm in its Redis keys: "tb", "fw", "sl", "cc"
	suffix string // the suffix of a limit's first Redis key
	two    bool   // a limit has two Redis keys: the first without its suffix is the second
	script *redis.Script
	args   []any // the script's arguments before the requests', as strings: formatted once
	max    int64 // the most permits one request can be granted

	mod   *luaModule                     // the Lua module of a rate algorithm (lua.go), for Chain; nil for the semaphore
	guard bool                           // Options.GuardRestarts
	quota func(a, b int64) limiter.Quota // reads a reply's a and b
}

// maxBatch caps the requests coalesced into one script call.
const maxBatch = 256

// engine runs one limiter's decisions (or a keyed limiter's, for every
// key): it coalesces concurrent decisions for one limit into one script
// call, applies the error policy, and keeps the local counters.
type engine struct {
	o     Options
	rc    caller
	alg   algorithm
	queue limiter.QueueOptions

	done      chan struct{}
	closeOnce sync.Once
	closed    atomic.Bool

	granted, rejected, queued, waiters atomic.Int64

	fl flights // by a limit's first Redis key
	ws waitSet // by a limit's first Redis key

	cc *ccState // NewConcurrency only

	// onGrant, when set (by tests), is called with the Redis time (µs) and
	// the permits of every grant Redis decided.
	onGrant func(now int64, n int)
	// onDeny, when set (by tests), is called with the Redis time (µs) of
	// every refusal Redis decided.
	onDeny func(now int64)
	// onRelease and onRenew, when set (by tests), are called with the Redis
	// time of every semaphore release and renewal Redis answered.
	onRelease, onRenew func(now int64)
}

// flights coalesces decisions: while a script call for one limit (or one
// chain) is on its way, the requests that come for it wait and go together
// in the next call, run by the first of them. The zero value is ready.
type flights struct {
	mu sync.Mutex
	// m holds, by the limit's name, while a script call for it is on its
	// way, the requests that will go in the next one.
	m map[string][]*request
}

// batcher runs one script call for a batch of requests of one limit and
// stores every request's result.
type batcher interface {
	call(ctx context.Context, batch []*request)
}

// request is one caller's decision: its script argument and, once the
// flight is back, its result. A caller handed lead runs the next flight.
type request struct {
	arg  string
	res  result
	lead []*request
	one  [1]*request // the batch of a request alone
	done chan struct{}
}

// result is a decision's outcome.
type result struct {
	granted bool
	wait    time.Duration // refused: when to retry; < 0 unknown
	now     int64         // Redis time of the decision, µs
	who     int           // a refused chain decision: the member whose wait is wait
	quota   limiter.Quota
	err     error
}

var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// validQueue checks queue options as package limiter does.
func validQueue(q limiter.QueueOptions) error {
	if q.Limit < 0 {
		return optErr("Queue.Limit", "must not be negative, got %d", q.Limit)
	}
	if q.Order != limiter.OldestFirst && q.Order != limiter.NewestFirst {
		return optErr("Queue.Order", "must be OldestFirst or NewestFirst, got %d", int(q.Order))
	}
	if q.Spin < 0 {
		return optErr("Queue.Spin", "must not be negative, got %v", q.Spin)
	}
	return nil
}

// roundTripQueue checks the queue options of a limiter that decides in
// Redis: Limit caps this process's waiting permits; the order of waiters
// and a precise end of a local wait mean nothing for it (a waiter asks
// Redis again after the wait Redis said, in a race with every process), so
// NewestFirst and a Spin are refused.
func roundTripQueue(q limiter.QueueOptions) error {
	if err := validQueue(q); err != nil {
		return err
	}
	if q.Order != limiter.OldestFirst {
		return optErr("Queue.Order", "must be OldestFirst (the zero value): a limiter that decides in Redis does not order its waiters, which race with every process's (NewPartitioned queues its waiters locally and takes NewestFirst)")
	}
	if q.Spin != 0 {
		return optErr("Queue.Spin", "must be zero: a limiter that decides in Redis waits for Redis's answer, not for a local instant (NewPartitioned takes a Spin), got %v", q.Spin)
	}
	return nil
}

// newEngine returns the engine of a limiter whose algorithm alg makes, or
// an *limiter.OptionError naming the first invalid option: Options' first,
// then the algorithm's, then the queue's.
func newEngine(o Options, q limiter.QueueOptions, leases bool, alg func() (algorithm, error)) (*engine, error) {
	if err := o.validate(leases); err != nil {
		return nil, err
	}
	a, err := alg()
	if err != nil {
		return nil, err
	}
	if err := roundTripQueue(q); err != nil {
		return nil, err
	}
	return &engine{
		o: o, rc: newCaller(o.Client, o.timeout()),
		alg: a, queue: q, done: make(chan struct{}),
	}, nil
}

// handle is one limit of an engine: its Redis keys, and the quota its last
// decision reported. keys[0] names the limit.
type handle struct {
	e    *engine
	keys []string
	karr [2]string

	qmu  sync.Mutex
	q    limiter.Quota
	qnow int64     // Redis time of q
	qat  time.Time // local time q arrived

	buf [keyBuf]byte // the bytes of keys, when they fit
}

// handle returns a new handle of the limit named Options.Key and, for a
// keyed limiter, sub.
func (e *engine) handle(sub string, keyed bool) *handle {
	h := &handle{}
	e.initHandle(h, sub, keyed)
	return h
}

func (e *engine) initHandle(h *handle, sub string, keyed bool) {
	h.e = e
	h.setKeys(e.alg.kind, e.o.Key, sub, keyed, e.alg.suffix, e.alg.two)
}

// decide gets one request decided by b, coalesced with the concurrent
// requests for the same limit (id): the first caller runs the script call;
// those who come while it is on its way wait and go together in the next
// call, run by the first of them.
func (fs *flights) decide(ctx context.Context, id string, b batcher, arg string) result {
	r := requestPool.Get().(*request)
	r.arg = arg
	fs.mu.Lock()
	if pending, busy := fs.m[id]; busy {
		fs.m[id] = append(pending, r)
		fs.mu.Unlock()
		<-r.done
		if batch := r.lead; batch != nil {
			r.lead = nil
			fs.fly(ctx, id, b, batch)
		}
	} else {
		if fs.m == nil {
			fs.m = make(map[string][]*request)
		}
		fs.m[id] = nil
		fs.mu.Unlock()
		r.one[0] = r
		fs.fly(ctx, id, b, r.one[:])
	}
	res := r.res
	r.res = result{}
	requestPool.Put(r)
	return res
}

// fly runs batch (led by batch[0], the caller) as one script call, hands
// the next batch to its first member, and wakes the others of batch.
func (fs *flights) fly(ctx context.Context, id string, b batcher, batch []*request) {
	b.call(ctx, batch)
	fs.mu.Lock()
	next := fs.m[id]
	switch {
	case len(next) > maxBatch:
		fs.m[id] = append([]*request(nil), next[maxBatch:]...)
		next = next[:maxBatch:maxBatch]
	case len(next) > 0:
		fs.m[id] = nil
	default:
		delete(fs.m, id)
	}
	fs.mu.Unlock()
	if len(next) > 0 {
		next[0].lead = next
		next[0].done <- struct{}{}
	}
	for _, r := range batch[1:] {
		r.done <- struct{}{}
	}
}

// decide gets one request of h's limit decided.
func (h *handle) decide(ctx context.Context, arg string) result {
	return h.e.fl.decide(ctx, h.keys[0], h, arg)
}

// call runs one script call for batch of h's limit.
func (h *handle) call(ctx context.Context, batch []*request) { h.e.call(ctx, h, batch) }

// call runs one script call for batch and stores every request's result.
func (e *engine) call(ctx context.Context, h *handle, batch []*request) {
	args := make([]any, 0, len(e.alg.args)+len(batch))
	args = append(args, e.alg.args...)
	for _, r := range batch {
		args = append(args, r.arg)
	}
	v, err := e.rc.run(ctx, e.alg.script, e.late(h, batch), h.keys, args...)
	var vals []int64
	if err == nil {
		var buf [4]int64 // the reply to one request
		vals, err = ints(buf[:], v, 3+len(batch))
	}
	if err != nil {
		for _, r := range batch {
			r.res = result{err: err}
		}
		return
	}
	q := e.alg.quota(vals[1], vals[2])
	for i, r := range batch {
		res := result{now: vals[0], quota: q}
		switch x := vals[3+i]; {
		case x == 0:
			res.granted = true
		case x < 0:
			res.wait = -1
		default:
			res.wait = time.Duration(x) * time.Microsecond
		}
		r.res = res
	}
}

// late returns what to do with the reply to a call the callers stopped
// waiting for: a semaphore gives back the leases it granted, which nobody
// holds; a rate limiter's grants are spent (counted, never granted twice).
func (e *engine) late(h *handle, batch []*request) func(any, error) {
	if e.cc == nil {
		return nil
	}
	members := make([]any, 0, len(batch))
	for _, r := range batch {
		members = append(members, r.arg)
	}
	// Releasing a member Redis does not hold does nothing, so the members are
	// released whatever the reply said.
	return func(any, error) {
		e.rc.run(context.Background(), ccReleaseScript, nil, h.keys, members...)
	}
}

// ints reads a script's reply, an array of n integers, into dst (a
// caller's buffer, or nil).
func ints(dst []int64, v any, n int) ([]int64, error) {
	out, ok := intReply(dst[:0], v)
	if !ok || len(out) != n {
		return nil, unavailable(fmt.Errorf("redislimit: unexpected script reply %v", v))
	}
	return out, nil
}

// setQuota keeps the quota of the newest decision.
func (h *handle) setQuota(res result) {
	h.qmu.Lock()
	if res.now >= h.qnow {
		h.q, h.qnow, h.qat = res.quota, res.now, time.Now()
	}
	h.qmu.Unlock()
}

// quota returns the quota of the last decision, aged by the time since it
// arrived (Reset counts down; once it has passed, Remaining is Limit again);
// before any decision, the policy with every permit remaining.
func (h *handle) quota() limiter.Quota {
	h.qmu.Lock()
	q, at := h.q, h.qat
	h.qmu.Unlock()
	if at.IsZero() {
		q = h.e.alg.quota(0, 0)
		q.Remaining, q.Reset = q.Limit, 0
		return q
	}
	if q.Reset > 0 {
		q.Reset -= time.Since(at)
		if q.Reset <= 0 {
			q.Reset, q.Remaining = 0, q.Limit
		}
	}
	return q
}

// check refuses what needs no round trip: a negative count, a closed
// limiter, a request over the largest grant.
func (e *engine) check(n int) error {
	switch {
	case n < 0:
		return limiter.ErrInvalidCount
	case e.closed.Load():
		return ErrClosed
	case int64(n) > e.alg.max:
		return limiter.ErrExceedsLimit
	}
	return nil
}

func (h *handle) tryAcquire(n int) limiter.Lease {
	e := h.e
	if err := e.check(n); err != nil {
		e.rejected.Add(1)
		return limiter.Denied(err, 0)
	}
	if e.waiters.Load() > 0 && e.ws.waiting(h.keys[0]) {
		e.rejected.Add(1) // Acquire calls of this process wait: they go first
		return limiter.Denied(limiter.ErrLimited, 0)
	}
	arg := e.requestArg(n)
	res := h.ask(context.Background(), arg)
	if res.err != nil {
		l := e.o.policyTry(n, res.err)
		e.count(l.Granted())
		return l
	}
	h.setQuota(res)
	if res.granted {
		e.granted.Add(1)
		if e.onGrant != nil {
			e.onGrant(res.now, n)
		}
		return e.grant(h, n, arg, res.now)
	}
	e.rejected.Add(1)
	if e.onDeny != nil {
		e.onDeny(res.now)
	}
	return limiter.Denied(limiter.ErrLimited, max(res.wait, 0))
}

func (e *engine) count(granted bool) {
	if granted {
		e.granted.Add(1)
	} else {
		e.rejected.Add(1)
	}
}

// requestArg is a request's script argument: its permit count, or for a
// concurrency limiter the member naming the lease.
func (e *engine) requestArg(n int) string {
	if e.cc != nil {
		return e.cc.member(n)
	}
	return strconv.Itoa(n)
}

// grant returns the lease of a request granted at Redis time at: a
// semaphore's holds its permits (a zero-permit grant holds nothing: its
// script did not record it); a rate limiter's can be settled.
func (e *engine) grant(h *handle, n int, arg string, at int64) limiter.Lease {
	switch {
	case e.cc == nil:
		return limiter.NewLease(n, &rateLease{h: h, at: at})
	case n > 0:
		return e.cc.hold(e, h, n, arg)
	}
	return limiter.NewLease(0, nil)
}

// rateLease is a rate limiter's granted lease, which can be settled.
type rateLease struct {
	h  *handle
	at int64 // Redis time of the grant, µs
}

// ReleasePermits does nothing: a rate limiter's permits are spent.
func (*rateLease) ReleasePermits(int) {}

// SettlePermits settles the grant in Redis, in one round trip; see the
// package doc, Settling.
func (l *rateLease) SettlePermits(granted, actual int) {
	l.h.decide(context.Background(), settleArg(granted, actual, l.at))
}

func (h *handle) acquire(ctx context.Context, n int) (limiter.Lease, error) {
	if ctx == nil {
		panic("redislimit: nil Context")
	}
	e := h.e
	if err := e.check(n); err != nil {
		e.rejected.Add(1)
		return limiter.Denied(err, 0), err
	}
	if err := ctx.Err(); err != nil {
		e.rejected.Add(1)
		return limiter.Denied(err, 0), err
	}
	// A zero-permit request counts as one in the queue, as in package
	// limiter.
	q := int64(max(n, 1))
	if e.queued.Add(q) > int64(e.queue.Limit) && e.queue.Limit > 0 {
		e.queued.Add(-q)
		e.rejected.Add(1)
		return limiter.Denied(limiter.ErrQueueFull, 0), limiter.ErrQueueFull
	}
	e.waiters.Add(1) // before enter, and after leave: ws is looked at only while it counts
	e.ws.enter(h.keys[0])
	defer func() {
		e.ws.leave(h.keys[0])
		e.queued.Add(-q)
		e.waiters.Add(-1)
	}()
	l, err := h.wait(ctx, n)
	e.count(err == nil)
	return l, err
}

// wait asks until granted, waiting between asks the time the script said
// (plus jitter), or failing at once when that is past ctx's deadline.
func (h *handle) wait(ctx context.Context, n int) (limiter.Lease, error) {
	e := h.e
	arg := e.requestArg(n)
	for attempt := 0; ; attempt++ {
		res := h.ask(ctx, arg)
		if res.err != nil {
			return e.o.policyAcquire(ctx, n, res.err)
		}
		h.setQuota(res)
		if res.granted {
			if e.onGrant != nil {
				e.onGrant(res.now, n)
			}
			return e.grant(h, n, arg, res.now), nil
		}
		if err := pause(ctx, n, res.wait, attempt, e.sleep); err != nil {
			return limiter.Denied(err, max(res.wait, 0)), err
		}
	}
}

// pause waits after a refusal while Acquire waits: the wait Redis said,
// jittered (see jitter), with sleep; it fails at once with an error
// wrapping context.DeadlineExceeded when that wait is past ctx's deadline,
// and with sleep's error when ctx ends or the limiter closes first.
func pause(ctx context.Context, n int, wait time.Duration, attempt int, sleep func(context.Context, time.Duration) error) error {
	if dl, ok := ctx.Deadline(); ok && wait >= 0 && time.Until(dl) < wait {
		return fmt.Errorf("redislimit: the wait of %v for %d permits would outlast the context's deadline: %w",
			wait, n, context.DeadlineExceeded)
	}
	return sleep(ctx, jitter(wait, attempt))
}

// jitter returns the wait before asking again. The first wait is the
// script's, exactly, so that a lone waiter loses no time. A waiter refused
// again after waiting lost a race with other waiters (in other processes:
// those in this process go together in one script call), and adds a random
// part of up to attempt/8 of the wait, at most attempt milliseconds
// (attempt counted up to 4), so that processes refused at one instant do not
// all ask again at the next. With no known wait (a semaphore waiting for a
// release by another process), it backs off exponentially from 1ms to
// 64ms, jittered the same way.
func jitter(wait time.Duration, attempt int) time.Duration {
	if wait < 0 {
		wait = time.Millisecond << min(attempt, 6)
	}
	if attempt == 0 {
		return wait
	}
	k := int64(min(attempt, 4))
	spread := min(int64(wait)*k/8, k*int64(time.Millisecond))
	return wait + time.Duration(rand.Int64N(spread+1))
}

// sleep waits d, or until ctx ends or the limiter is closed, or (for a
// semaphore) until a permit is released in this process.
func (e *engine) sleep(ctx context.Context, d time.Duration) error {
	var released <-chan struct{}
	if e.cc != nil {
		released = e.cc.releasedChan()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.done:
		return ErrClosed
	}
}

func (e *engine) close() error {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		close(e.done)
		if e.cc != nil {
			e.cc.stop()
		}
	})
	return nil
}

func (e *engine) stats(h *handle) limiter.Stats {
	s := limiter.Stats{
		Queued:   e.queued.Load(),
		Waiters:  int(e.waiters.Load()),
		Granted:  e.granted.Load(),
		Rejected: e.rejected.Load(),
	}
	if h != nil {
		s.Available = h.quota().Remaining
	}
	return s
}
