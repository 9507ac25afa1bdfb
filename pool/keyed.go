package pool

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	"github.com/rategate/rategate/internal/precise"
	"github.com/rategate/rategate/internal/timeheap"
	"github.com/rategate/rategate/limiter"
)

// GoKey queues task in the queue of key (a host, a tenant) and returns at
// once: it waits only while Options.Queue keyed tasks (DefaultKeyQueue with
// Queue 0) are already waiting, and fails only when the task can never be
// queued (ErrClosed, ctx's error). A key's tasks start in the order they were
// queued, each once a worker is free and Options.Limiter and
// Options.PerKey(key) both grant a permit at the same instant, so the task
// starts keep both limiters' bounds.
//
// A key whose limiter is not ready holds up only its own queue: it waits for
// the instant its limiter names (Lease.RetryAfter) without a goroutine of
// its own, or, when the limiter cannot say (a limiter.Concurrency), in the
// limiter's Acquire on a goroutine of its own, never on a worker; meanwhile
// the workers start the tasks of keys that are ready, taking the keys in
// turn. So a loop
// over URLs in any order, p.GoKey(ctx, u.Host, fetch(u)), keeps every host as
// busy as its limit allows.
//
// A queued task that cannot start (ctx ended first, Close came, or a limiter
// failed: limiter.ErrExceedsLimit, limiter.ErrClosed) never runs; Wait
// reports its error. When ctx ends, or Close comes, the task fails at once,
// not when its key is next tried: Wait does not wait for its key's limiter.
// A nil ctx panics.
func (p *Pool) GoKey(ctx context.Context, key string, task func(ctx context.Context) error) error {
	if ctx == nil {
		panic("pool: nil Context")
	}
	return p.goKey(ctx, key, task, nil)
}

// keyItem is a task waiting in its key's queue.
type keyItem struct {
	fn  func(context.Context) error
	ctx context.Context // GoKey's: once it ends, the task does not start
	// onFail, if set, receives the error of a task that cannot start
	// instead of Wait; it is called with Pool.mu held and must not block.
	onFail func(error)
}

// keyState is where a key with queued tasks is.
type keyState uint8

const (
	keyIdle   keyState = iota // in no list: its first task is being queued, or it is being handed out
	keyReady                  // in the ready list: its head may be tried now
	keyParked                 // among the parked keys, until the instant its limiter named
	keyBusy                   // its head is out of its queue: being tried, or waiting in Acquire
)

// keyQueue is the queue of one key with queued tasks. It is deleted when
// its last task leaves.
type keyQueue struct {
	key   string
	lim   limiter.Limiter // nil: no limit
	items fifo[keyItem]
	state keyState
	lease limiter.Lease // granted to the head by Acquire, not yet started
	at    time.Time     // parked until
	index int           // among the parked keys; -1 when not parked
}

// HeapAt orders parked keys by the instant they may be tried again.
func (k *keyQueue) HeapAt() time.Time { return k.at }

// SetHeapIndex records k's place among the parked keys.
func (k *keyQueue) SetHeapIndex(i int) { k.index = i }

// keySched is the keyed tasks' scheduler, guarded by Pool.mu: the keys with
// queued tasks, the ready ones, and the parked ones with the one goroutine
// that wakes them, which runs only while keys are parked. The workers try
// the ready keys' heads (Pool.nextKeyJob).
type keySched struct {
	keys      map[string]*keyQueue
	ready     fifo[*keyQueue]
	parked    timeheap.Heap[*keyQueue]
	waking    bool          // wakeParked runs
	poke      chan struct{} // tells it the parked keys changed
	queued    int           // tasks in every queue
	room      waitList      // GoKey calls waiting for the queued tasks to go under the cap
	watches   map[<-chan struct{}]ctxWatch
	free      []*keyQueue // empty queues kept for reuse
	freeSlots int         // the room for tasks in their buffers
}

// ctxWatch fails the queued tasks of the contexts that share a Done
// channel as soon as it closes: one context.AfterFunc for all of them.
type ctxWatch struct {
	tasks int // queued tasks with such a context
	stop  func() bool
}

// maxFreeQueues is how many empty key queues are kept for reuse, so that
// a key whose queue empties and fills again does not allocate. Their
// buffers have room for at most the cap on queued tasks in all.
const maxFreeQueues = 16

// waiting reports whether tasks of key wait in its queue.
func (p *Pool) waiting(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := p.keys.keys[key]
	return k != nil && (k.items.len() > 0 || k.state == keyBusy)
}

// goKey enters the pool and queues task in key's queue.
func (p *Pool) goKey(ctx context.Context, key string, task func(context.Context) error, onFail func(error)) error {
	if task == nil {
		return ErrNilTask
	}
	ended := p.startErr(ctx)
	p.mu.Lock()
	err := p.enter(ended)
	if err == nil {
		if err = p.enqueue(key, keyItem{fn: task, ctx: ctx, onFail: onFail}); err != nil {
			p.leave()
		}
	}
	p.mu.Unlock()
	return err
}

// enqueue appends it to key's queue once the queued tasks are under the
// cap, waiting for room with p.mu released. p.mu is held.
func (p *Pool) enqueue(key string, it keyItem) error {
	s := &p.keys
	if err := p.waitUntil(&s.room, it.ctx, p.roomOpen); err != nil {
		return err
	}
	k := p.queueOf(key)
	k.items.push(it)
	s.queued++
	p.watch(it.ctx)
	if p.roomOpen() {
		s.room.signal() // another GoKey may fit too
	}
	if k.state == keyIdle {
		p.ready(k, false)
	}
	return nil
}

func (p *Pool) roomOpen() bool { return p.keys.queued < p.keyCap }

// queueOf returns key's queue, making it (and calling PerKey) if key has
// none. p.mu is held.
func (p *Pool) queueOf(key string) *keyQueue {
	s := &p.keys
	if k := s.keys[key]; k != nil {
		return k
	}
	if s.keys == nil {
		s.keys = map[string]*keyQueue{}
		s.watches = map[<-chan struct{}]ctxWatch{}
		s.poke = make(chan struct{}, 1)
	}
	var k *keyQueue
	if n := len(s.free); n > 0 {
		k, s.free = s.free[n-1], s.free[:n-1]
		s.freeSlots -= len(k.items.buf)
	} else {
		k = &keyQueue{index: -1}
	}
	k.key, k.lim = key, p.keyLimiter(key)
	s.keys[key] = k
	return k
}

// forget deletes k, whose queue is empty and which is in no list, keeping
// it for reuse. p.mu is held.
func (p *Pool) forget(k *keyQueue) {
	s := &p.keys
	delete(s.keys, k.key)
	*k = keyQueue{items: k.items, index: -1}
	if len(s.free) < maxFreeQueues && s.freeSlots+len(k.items.buf) <= p.keyCap {
		s.free = append(s.free, k)
		s.freeSlots += len(k.items.buf)
	}
}

// requeue puts k, which is in no list, in the ready list if it has tasks,
// or forgets it. p.mu is held.
func (p *Pool) requeue(k *keyQueue) {
	if k.items.len() == 0 {
		p.forget(k)
		return
	}
	p.ready(k, false)
}

// ready puts k, which is in no list, in the ready list (first, or last)
// and tells a worker. p.mu is held.
func (p *Pool) ready(k *keyQueue, first bool) {
	k.state = keyReady
	if first {
		p.keys.ready.pushFront(k)
	} else {
		p.keys.ready.push(k)
	}
	p.kick()
}

// watch makes sure a queued task with ctx fails as soon as ctx ends, not
// when its key is next tried. p.mu is held.
func (p *Pool) watch(ctx context.Context) {
	done := ctx.Done()
	if done == nil {
		return
	}
	s := &p.keys
	w, ok := s.watches[done]
	if !ok {
		p.workWG.Add(1)
		w.stop = context.AfterFunc(ctx, func() {
			defer p.workWG.Done()
			p.expire()
		})
	}
	w.tasks++
	s.watches[done] = w
}

// dequeued accounts for a task that left its key's queue for good (it
// started or failed): it makes room for a GoKey call waiting, and stops
// watching its context once no other queued task has it. p.mu is held.
func (p *Pool) dequeued(it keyItem) {
	s := &p.keys
	s.queued--
	s.room.signal()
	done := it.ctx.Done()
	if done == nil {
		return
	}
	w := s.watches[done]
	if w.tasks--; w.tasks > 0 {
		s.watches[done] = w
		return
	}
	delete(s.watches, done)
	if w.stop() {
		p.workWG.Done() // its function will not run
	}
}

// failItem reports the error of a keyed task that did not start and leaves
// the pool for it. p.mu is held.
func (p *Pool) failItem(k *keyQueue, it keyItem, err error) {
	err = fmt.Errorf("pool: a task of key %q did not start: %w", k.key, err)
	if it.onFail != nil {
		it.onFail(err)
	} else {
		p.record(err)
	}
	p.dequeued(it)
	p.leave()
}

// expire fails every queued keyed task whose context has ended; a key left
// without tasks is forgotten (or, if it is in the ready list, when it is
// next handed out).
func (p *Pool) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range p.keys.keys {
		if k.items.len() == 0 {
			continue
		}
		if k.items.front().ctx.Err() != nil {
			k.lease.Release() // the head's, if Acquire granted one
			k.lease = limiter.Lease{}
		}
		k.items.removeFunc(func(it keyItem) bool {
			if it.ctx.Err() == nil {
				return false
			}
			p.failItem(k, it, context.Cause(it.ctx))
			return true
		})
		if k.items.len() == 0 && k.state == keyParked {
			heap.Remove(&p.keys.parked, k.index)
			p.forget(k)
			p.pokeWaker()
		}
	}
}

// nextKeyJob takes a slot and returns the head of the first ready key
// whose limiters grant it, as a job for the calling worker to start at
// once; false when no key is ready or no slot is free below Workers. p.mu
// is held.
func (p *Pool) nextKeyJob() (job, bool) {
	s := &p.keys
	for s.ready.len() > 0 && p.slots < p.workers {
		k := s.ready.pop()
		k.state = keyIdle
		if k.items.len() == 0 { // its tasks' contexts ended
			p.forget(k)
			continue
		}
		p.slots++
		if j, ok := p.tryKey(k); ok {
			return j, true
		}
		p.slots--
		p.slotFree.signal()
	}
	return job{}, false
}

// tryKey takes k's head out of its queue and asks k's limiter for it, with
// p.mu released while the limiter decides. It returns the head as a job if
// granted; else it fails the head, parks k, or sends the head to wait in
// Acquire, and returns false. k is in no list; p.mu is held.
func (p *Pool) tryKey(k *keyQueue) (job, bool) {
	it := k.items.pop()
	lease := k.lease
	k.lease = limiter.Lease{}
	if k.lim != nil && !lease.Granted() && p.startErr(it.ctx) == nil {
		k.state = keyBusy
		p.mu.Unlock()
		lease = k.lim.TryAcquire(1)
		p.mu.Lock()
		k.state = keyIdle
	}
	// Checked after the limiter decided: Close, or the end of it.ctx, may
	// have come meanwhile, and the drain left this task to us.
	if err := p.startErr(it.ctx); err != nil {
		lease.Release()
		p.failItem(k, it, err)
		p.requeue(k)
		return job{}, false
	}
	if k.lim != nil && !lease.Granted() {
		p.refused(k, it, lease)
		return job{}, false
	}
	p.dequeued(it)
	p.requeue(k)
	return job{fn: it.fn, lease: lease}, true
}

// refused puts it back at the head of k's queue and parks k until the
// instant its limiter named or, when it named none, sends it to wait for
// the grant in Acquire, on a goroutine of its own. p.mu is held.
func (p *Pool) refused(k *keyQueue, it keyItem, lease limiter.Lease) {
	if d := lease.RetryAfter(); d > 0 {
		k.items.pushFront(it)
		k.state, k.at = keyParked, time.Now().Add(d)
		heap.Push(&p.keys.parked, k)
		p.wakeAt()
		return
	}
	k.state = keyBusy
	p.workWG.Add(1)
	go p.acquire(k, it)
}

// acquire waits in k's limiter for it, k's head, then puts it back first in
// k's queue with the lease and k first in the ready list, or fails it.
func (p *Pool) acquire(k *keyQueue, it keyItem) {
	defer p.workWG.Done()
	wctx, stop := p.waitContext(it.ctx)
	lease, err := k.lim.Acquire(wctx, 1)
	err = stop(err)
	p.mu.Lock()
	k.state = keyIdle
	if err == nil {
		err = p.startErr(it.ctx)
	}
	if err != nil {
		lease.Release()
		p.failItem(k, it, err)
		p.requeue(k)
	} else {
		k.items.pushFront(it)
		k.lease = lease
		p.ready(k, true)
	}
	p.mu.Unlock()
}

// wakeAt makes sure the parked keys are woken on time: it starts their
// waiter, or tells the running one to look again at the earliest. p.mu is
// held.
func (p *Pool) wakeAt() {
	if p.keys.waking {
		p.pokeWaker()
		return
	}
	p.keys.waking = true
	p.workWG.Add(1)
	go p.wakeParked()
}

func (p *Pool) pokeWaker() {
	select {
	case p.keys.poke <- struct{}{}:
	default:
	}
}

// wakeParked runs while keys are parked: it waits precisely (as limiter's
// queues do: internal/precise) until the earliest parked key is due, moves
// the keys that are due to the ready list, and tells the workers. A key
// is then tried at the instant its limiter named, not when a late timer
// fires. It ends when no key is parked, or with the pool's life.
func (p *Pool) wakeParked() {
	defer p.workWG.Done()
	var pt precise.Timer
	defer pt.Stop()
	s := &p.keys
	for {
		p.mu.Lock()
		now := time.Now()
		for len(s.parked) > 0 && !s.parked[0].at.After(now) {
			p.ready(heap.Pop(&s.parked).(*keyQueue), false)
		}
		var at time.Time
		if len(s.parked) > 0 {
			at = s.parked[0].at
		} else {
			s.waking = false
		}
		p.mu.Unlock()
		if at.IsZero() {
			return
		}
		if pt.Until(p.life, s.poke, at, 0) == precise.Done {
			p.mu.Lock()
			s.waking = false // drainKeys empties the parked keys
			p.mu.Unlock()
			return
		}
	}
}

// drainKeys fails every queued keyed task that has not started, once the
// pool's life has ended (Close, or Options.Context ended). A head being
// tried or waiting in Acquire is out of its queue: the goroutine that holds
// it fails it once the limiter has answered.
func (p *Pool) drainKeys() {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.keys
	err := p.lifeErr()
	for _, k := range s.keys {
		k.lease.Release()
		k.lease = limiter.Lease{}
		for k.items.len() > 0 {
			p.failItem(k, k.items.pop(), err)
		}
		if k.state != keyBusy {
			p.forget(k)
		}
	}
	s.ready.reset()
	clear(s.parked)
	s.parked = s.parked[:0]
}
