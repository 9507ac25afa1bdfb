package bench

import (
	"sync"
)

// plainPool is a worker pool written the plain way, as a reference for
// rategate's: a slot count under a sync.Mutex that Go waits on with a
// sync.Cond, worker goroutines started as needed, a buffered channel that
// hands the tasks to them, and a sync.WaitGroup of pending tasks for Wait.
// It has no limiter, no context-aware waiting and no Close. capacity is
// Workers (Go waits for a free worker) or Workers + Queue (Go returns once
// the task is queued).
type plainPool struct {
	mu       sync.Mutex
	free     sync.Cond // signalled when a slot frees
	workers  int
	capacity int
	reserved int // slots taken: tasks queued or running
	spawned  int
	jobs     chan func()
	pending  sync.WaitGroup
	stopped  sync.WaitGroup
}

func newPlainPool(workers, queue int) *plainPool {
	p := &plainPool{workers: workers, capacity: workers + queue, jobs: make(chan func(), workers+queue)}
	p.free.L = &p.mu
	return p
}

func (p *plainPool) Go(task func()) {
	p.mu.Lock()
	for p.reserved >= p.capacity {
		p.free.Wait()
	}
	p.reserved++
	if p.spawned < p.workers && p.spawned < p.reserved {
		p.spawned++
		p.stopped.Add(1)
		go p.worker()
	}
	p.mu.Unlock()
	p.pending.Add(1)
	p.jobs <- task
}

func (p *plainPool) worker() {
	defer p.stopped.Done()
	for task := range p.jobs {
		task()
		p.mu.Lock()
		p.reserved--
		p.free.Signal()
		p.mu.Unlock()
		p.pending.Done()
	}
}

func (p *plainPool) Wait() {
	p.pending.Wait()
	close(p.jobs)
	p.stopped.Wait()
}
