package pool

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
// the instant its limiter names (Lease.RetryAfter) without a goroutine, or,
// when the limiter cannot say (a limiter.Concurrency), in the limiter's
// Acquire on a goroutine of its own, never on a worker; meanwhile the workers
// start the tasks of keys that are ready, taking the keys in turn. So a loop
// over URLs in any order, p.GoKey(ctx, u.Host, fetch(u)), keeps every host as
// busy as its limit allows.
//
// A queued task that cannot start (ctx ended first, Close came, or a limiter
// failed: limiter.ErrExceedsLimit, limiter.ErrClosed) never runs; Wait
// reports its error. A nil ctx panics.
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
	// instead of Wait; it is called with keySched.mu held and must not block.
	onFail func(error)
}

// keyQueue is the FIFO of one key with queued tasks. A key is in exactly one
// of four places: the ready list (its head may be tried now), the heap of
// parked keys (its limiter said when), busy (its head is being tried, or
// waits in its limiter's Acquire), or nowhere, when its queue is empty and it
// is deleted.
type keyQueue struct {
	key   string
	lim   limiter.Limiter // nil: no limit
	items []keyItem       // items[head:] wait, oldest first
	head  int
	next  *keyQueue     // in the ready list
	at    time.Time     // parked until
	index int           // in the heap; -1 when not parked
	ready bool          // in the ready list
	busy  bool          // its head is being tried or acquired
	lease limiter.Lease // granted to the head by Acquire, not yet started
}

func (k *keyQueue) len() int { return len(k.items) - k.head }

// push appends it, first moving the items down if the array is full, so
// the array holds at most the queue cap (and a little growth room).
func (k *keyQueue) push(it keyItem) {
	if len(k.items) == cap(k.items) && k.head > 0 {
		n := copy(k.items, k.items[k.head:])
		clear(k.items[n:])
		k.items, k.head = k.items[:n], 0
	}
	k.items = append(k.items, it)
}

// pop removes the head.
func (k *keyQueue) pop() keyItem {
	it := k.items[k.head]
	k.items[k.head] = keyItem{}
	k.head++
	switch {
	case k.head == len(k.items):
		k.items, k.head = k.items[:0], 0
	case k.head >= 32 && 2*k.head >= len(k.items):
		n := copy(k.items, k.items[k.head:])
		clear(k.items[n:])
		k.items, k.head = k.items[:n], 0
	}
	return it
}

// keySched is the keyed tasks' scheduler: the keys with queued tasks, the
// ready list, and the parked keys with the one waiter that wakes them. It has
// no goroutine of its own but that waiter, which runs only while keys are
// parked: GoKey, a finishing task, the waiter and an Acquire that returns
// each hand out what became ready (Pool.dispatch).
type keySched struct {
	mu          sync.Mutex
	keys        map[string]*keyQueue
	first, last *keyQueue    // the ready list
	nready      atomic.Int64 // keys in the ready list, read without mu
	parked      keyHeap
	parking     bool          // the waiter for the parked keys runs
	parkPoke    chan struct{} // tells it the earliest parked key changed
	queued      int           // tasks in every queue
	roomWaiters int           // GoKey calls waiting for the queued tasks to go under the cap
	room        chan struct{}
	free        []*keyQueue // empty queues kept for reuse
	unwatch     func() bool // stops the watch on the pool's life
}

// maxFreeQueues bounds the empty key queues kept for reuse (with their
// items' arrays, each of at most the queue cap).
const maxFreeQueues = 16

func (s *keySched) pushReady(k *keyQueue, front bool) {
	k.ready = true
	s.nready.Add(1)
	switch {
	case s.first == nil:
		s.first, s.last = k, k
	case front:
		k.next, s.first = s.first, k
	default:
		s.last.next, s.last = k, k
	}
}

func (s *keySched) popReady() *keyQueue {
	k := s.first
	s.first, k.next, k.ready = k.next, nil, false
	if s.first == nil {
		s.last = nil
	}
	s.nready.Add(-1)
	return k
}

// waiting reports whether tasks of key wait in its queue.
func (s *keySched) waiting(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	return k != nil && k.len() > 0
}

// stopWatch stops the watch on the pool's life that drains the queues when
// Options.Context ends (Wait calls it before it ends the life itself).
func (s *keySched) stopWatch(p *Pool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unwatch != nil && s.unwatch() {
		p.workWG.Done()
	}
	s.unwatch = nil
}

// queueOf returns key's queue, making it (and calling PerKey) if key has
// none. s.mu is held.
func (p *Pool) queueOf(key string) *keyQueue {
	s := &p.keys
	if k := s.keys[key]; k != nil {
		return k
	}
	if s.keys == nil {
		s.keys = map[string]*keyQueue{}
		s.room = make(chan struct{}, 1)
		s.parkPoke = make(chan struct{}, 1)
		p.workWG.Add(1)
		s.unwatch = context.AfterFunc(p.life, func() {
			defer p.workWG.Done()
			p.drainKeys()
		})
	}
	var k *keyQueue
	if n := len(s.free); n > 0 {
		k, s.free = s.free[n-1], s.free[:n-1]
	} else {
		k = &keyQueue{index: -1}
	}
	k.key, k.lim = key, p.keyLimiter(key)
	s.keys[key] = k
	return k
}

// goKey enters the pool and queues task in key's queue.
func (p *Pool) goKey(ctx context.Context, key string, task func(context.Context) error, onFail func(error)) error {
	if task == nil {
		return ErrNilTask
	}
	if !p.enter() {
		return ErrClosed
	}
	if err := p.enqueue(key, keyItem{fn: task, ctx: ctx, onFail: onFail}); err != nil {
		p.leave()
		return err
	}
	p.dispatch()
	return nil
}

// enter counts a pending call, unless the pool is closed.
func (p *Pool) enter() bool {
	if p.state.Load()&closedBit != 0 {
		return false
	}
	if p.state.Add(pendingOne)&closedBit != 0 {
		p.leave()
		return false
	}
	return true
}

// enqueue appends it to key's queue once the queued tasks are under the cap.
func (p *Pool) enqueue(key string, it keyItem) error {
	s := &p.keys
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if err := p.startErr(it.ctx); err != nil {
			if s.queued < p.keyCap && s.roomWaiters > 0 {
				s.signalRoom() // the wake-up this call may have taken is another's
			}
			return err
		}
		if s.queued < p.keyCap {
			break
		}
		p.waitRoom(it.ctx)
	}
	k := p.queueOf(key)
	k.push(it)
	s.queued++
	if s.queued < p.keyCap && s.roomWaiters > 0 {
		s.signalRoom() // pass the wake-up on: another GoKey may fit too
	}
	if k.len() == 1 && !k.busy && k.index < 0 && !k.ready {
		s.pushReady(k, false)
	}
	return nil
}

// waitRoom waits, with s.mu released, until a queued task leaves, ctx ends
// or the pool's life ends.
func (p *Pool) waitRoom(ctx context.Context) {
	s := &p.keys
	s.roomWaiters++
	s.mu.Unlock()
	select {
	case <-s.room:
	case <-ctx.Done():
	case <-p.life.Done():
	}
	s.mu.Lock()
	s.roomWaiters--
}

func (s *keySched) signalRoom() {
	select {
	case s.room <- struct{}{}:
	default:
	}
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

// dispatch hands the keyed tasks that may start now to free workers.
func (p *Pool) dispatch() {
	for {
		j, ok := p.nextKeyJob()
		if !ok {
			return
		}
		p.jobs <- j // never blocks: a reserved slot is a free place
	}
}

// nextKeyJob reserves a worker and returns a keyed task whose limiters have
// granted, or false when no key is ready or no worker is free.
func (p *Pool) nextKeyJob() (job, bool) {
	s := &p.keys
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.first != nil {
		if !p.reserve(p.workers) {
			return job{}, false
		}
		if j, ok := p.tryKey(s.popReady()); ok {
			return j, true
		}
		// Give the slot back. If tryKey failed the last pending task of a
		// closed pool, the pool is finished now.
		if p.state.Add(-1) == closedBit {
			p.finish()
		}
		p.wakeWaiter()
	}
	return job{}, false
}

// tryKey asks k's limiter for its head, with s.mu released while it asks,
// and returns the head as a job if granted. Otherwise it parks k, sends it
// to wait in Acquire, or fails the head, and returns false.
func (p *Pool) tryKey(k *keyQueue) (job, bool) {
	s := &p.keys
	it := k.items[k.head]
	lease, granted := k.lease, k.lease.Granted() || k.lim == nil
	k.lease = limiter.Lease{}
	if !granted && p.startErr(it.ctx) == nil {
		k.busy = true
		s.mu.Unlock()
		lease = k.lim.TryAcquire(1)
		s.mu.Lock()
		k.busy = false
		if !lease.Granted() {
			p.refused(k, lease)
			return job{}, false
		}
	}
	if err := p.startErr(it.ctx); err != nil {
		lease.Release()
		p.failHead(k, err)
		return job{}, false
	}
	k.pop()
	s.queued--
	p.requeue(k)
	if s.roomWaiters > 0 {
		s.signalRoom()
	}
	return job{fn: it.fn, lease: lease}, true
}

// refused parks k until the instant its limiter named or, when it named
// none, waits for the grant in Acquire on a goroutine of its own.
func (p *Pool) refused(k *keyQueue, lease limiter.Lease) {
	s := &p.keys
	if d := lease.RetryAfter(); d > 0 {
		k.at = time.Now().Add(d)
		heap.Push(&s.parked, k)
		p.arm()
		return
	}
	k.busy = true
	p.workWG.Add(1)
	go p.acquire(k, k.items[k.head].ctx)
}

// acquire waits in k's limiter for its head, then puts k first in the ready
// list holding the lease, or fails the head.
func (p *Pool) acquire(k *keyQueue, ctx context.Context) {
	defer p.workWG.Done()
	wctx, stop := p.waitContext(ctx)
	lease, err := k.lim.Acquire(wctx, 1)
	err = stop(err)
	s := &p.keys
	s.mu.Lock()
	k.busy = false
	if err == nil {
		err = p.startErr(ctx)
	}
	if err != nil {
		lease.Release()
		p.failHead(k, err)
	} else {
		k.lease = lease
		s.pushReady(k, true)
	}
	s.mu.Unlock()
	p.dispatch()
}

// waitContext is a context that ends when ctx or the pool's life ends, and
// the function to call with the error of the wait once it is over: it lets
// the context go and, when the wait failed because the context ended,
// returns why it ended (ctx's cause, or ErrClosed after Close) in place of
// the bare context.Canceled a limiter reports.
func (p *Pool) waitContext(ctx context.Context) (context.Context, func(error) error) {
	if ctx.Done() == nil {
		return p.life, func(err error) error {
			if err != nil && p.life.Err() != nil {
				return p.lifeErr()
			}
			return err
		}
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

// failHead removes k's head, which cannot start, and reports err for it.
func (p *Pool) failHead(k *keyQueue, err error) {
	it := k.pop()
	p.keys.queued--
	p.failItem(k.key, it, err)
	p.requeue(k)
	if p.keys.roomWaiters > 0 {
		p.keys.signalRoom()
	}
}

// failItem reports the error of a keyed task that did not start and leaves
// the pool for it.
func (p *Pool) failItem(key string, it keyItem, err error) {
	err = fmt.Errorf("pool: a task of key %q did not start: %w", key, err)
	if it.onFail != nil {
		it.onFail(err)
	} else {
		p.record(err)
	}
	p.leave()
}

// requeue puts k, which is in no list, back in the ready list if it has
// tasks, or deletes it.
func (p *Pool) requeue(k *keyQueue) {
	s := &p.keys
	if k.len() > 0 {
		s.pushReady(k, false)
		return
	}
	delete(s.keys, k.key)
	k.lim, k.key = nil, ""
	if len(s.free) < maxFreeQueues && cap(k.items) <= 2*p.keyCap {
		k.items = k.items[:0]
		s.free = append(s.free, k)
	}
}

// arm makes sure the parked keys are woken on time: it starts their waiter,
// or tells the running one to look again at the earliest. s.mu is held.
func (p *Pool) arm() {
	s := &p.keys
	switch {
	case len(s.parked) == 0:
	case s.parking:
		select {
		case s.parkPoke <- struct{}{}:
		default:
		}
	default:
		s.parking = true
		p.workWG.Add(1)
		go p.wakeParked()
	}
}

// wakeParked runs while keys are parked: it waits precisely (as limiter's
// queues do: internal/precise) until the earliest parked key is due, moves
// the keys that are due to the ready list, and hands their tasks out. A key
// is then tried at the instant its limiter named, not when a late timer
// fires. It ends when no key is parked, or with the pool's life.
func (p *Pool) wakeParked() {
	defer p.workWG.Done()
	var pt precise.Timer
	defer pt.Stop()
	s := &p.keys
	for {
		s.mu.Lock()
		moved := false
		now := time.Now()
		for len(s.parked) > 0 && !s.parked[0].at.After(now) {
			s.pushReady(heap.Pop(&s.parked).(*keyQueue), false)
			moved = true
		}
		var at time.Time
		if len(s.parked) > 0 {
			at = s.parked[0].at
		} else {
			s.parking = false
		}
		s.mu.Unlock()
		if moved {
			p.dispatch()
		}
		if at.IsZero() {
			return
		}
		if pt.Until(p.life, s.parkPoke, at, 0) == precise.Done {
			s.mu.Lock()
			s.parking = false // drainKeys empties the parked keys
			s.mu.Unlock()
			return
		}
	}
}

// drainKeys fails every queued keyed task that has not started, once the
// pool's life has ended (Close, or Options.Context ended).
func (p *Pool) drainKeys() {
	s := &p.keys
	s.mu.Lock()
	defer s.mu.Unlock()
	err := p.lifeErr()
	for _, k := range s.keys {
		keep := k.head
		if k.busy {
			keep++ // its head is in flight: whoever holds it fails it
		}
		for i := keep; i < len(k.items); i++ {
			it := k.items[i]
			k.items[i] = keyItem{}
			s.queued--
			p.failItem(k.key, it, err)
		}
		k.items = k.items[:keep]
		if !k.busy {
			k.lease.Release()
			k.lease = limiter.Lease{}
			k.ready, k.next, k.index = false, nil, -1
			delete(s.keys, k.key)
		}
	}
	s.first, s.last = nil, nil
	s.nready.Store(0)
	clear(s.parked)
	s.parked = s.parked[:0]
}

// HeapAt orders parked keys by the instant they may be tried again.
func (k *keyQueue) HeapAt() time.Time { return k.at }

// SetHeapIndex records k's place among the parked keys.
func (k *keyQueue) SetHeapIndex(i int) { k.index = i }

// keyHeap orders parked keys by the instant they may be tried again.
type keyHeap = timeheap.Heap[*keyQueue]
