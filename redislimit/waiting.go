package redislimit

import "sync"

// waitSet counts, by a limit's name, the Acquire calls of this process that
// wait on it, so that TryAcquire on that limit fails rather than take the
// permits they wait for, as in package limiter (no barging). Waiters race
// with other processes' for Redis's permits; within a process they go
// first. The engine looks here only while its waiters count is not zero:
// TryAcquire pays one atomic load while nobody waits.
type waitSet struct {
	mu sync.Mutex
	m  map[string]int // by limit, while some wait on it
}

// enter counts a call that waits on name, until leave.
func (w *waitSet) enter(name string) {
	w.mu.Lock()
	if w.m == nil {
		w.m = make(map[string]int)
	}
	w.m[name]++
	w.mu.Unlock()
}

func (w *waitSet) leave(name string) {
	w.mu.Lock()
	if w.m[name]--; w.m[name] == 0 {
		delete(w.m, name)
	}
	w.mu.Unlock()
}

// waiting reports whether calls wait on name.
func (w *waitSet) waiting(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[name] > 0
}
