//go:build linux

package precise

import (
	"container/heap"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// The alarm is the process's one OS timer for the ends of precise waits: a
// timerfd on CLOCK_MONOTONIC, which the kernel fires within microseconds,
// read by one goroutine that runs only while some wait is pending and then
// signals the waits that are due. A wait that ends on it costs a timer
// setting and a wake-up, not a spin, and holds no OS thread of its own: the
// reading goroutine blocks one thread for all of them.
var alarm struct {
	once    sync.Once
	fd      int // -1: no timerfd here
	mu      sync.Mutex
	due     entries // pending waits, earliest first
	running bool    // the reading goroutine runs
}

const (
	clockMonotonic = 1
	tfdCloexec     = syscall.O_CLOEXEC
)

type itimerspec struct {
	interval, value syscall.Timespec
}

func alarmInit() {
	fd, _, errno := syscall.RawSyscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdCloexec, 0)
	alarm.fd = int(fd)
	if errno != 0 {
		alarm.fd = -1
	}
}

// arm sets the timerfd to fire in d (at least 1 ns: zero would disarm it).
// The caller holds alarm.mu.
func arm(d time.Duration) {
	its := itimerspec{value: syscall.NsecToTimespec(max(int64(d), 1))}
	syscall.RawSyscall6(syscall.SYS_TIMERFD_SETTIME, uintptr(alarm.fd), 0, uintptr(unsafe.Pointer(&its)), 0, 0, 0)
}

// alarmAdd schedules a signal on e.ch at e.at; false when there is no alarm.
func alarmAdd(e *entry) bool {
	alarm.once.Do(alarmInit)
	if alarm.fd < 0 {
		return false
	}
	alarm.mu.Lock()
	defer alarm.mu.Unlock()
	heap.Push(&alarm.due, e)
	if alarm.due[0] == e {
		arm(time.Until(e.at))
	}
	if !alarm.running {
		alarm.running = true
		go alarmLoop()
	}
	return true
}

// alarmRemove unschedules e if it is still pending. When no wait is left,
// the timer fires at once so that the reading goroutine ends.
func alarmRemove(e *entry) {
	alarm.mu.Lock()
	defer alarm.mu.Unlock()
	if e.index < 0 {
		return
	}
	heap.Remove(&alarm.due, e.index)
	if len(alarm.due) == 0 {
		arm(0)
	}
}

// alarmLoop reads the timerfd, signals the waits that are due, and re-arms
// it for the next, until none is left.
func alarmLoop() {
	var buf [8]byte
	for {
		syscall.Read(alarm.fd, buf[:]) // blocks until the timer fires; EINTR: look again
		alarm.mu.Lock()
		now := time.Now()
		for len(alarm.due) > 0 && !alarm.due[0].at.After(now) {
			e := heap.Pop(&alarm.due).(*entry)
			select {
			case e.ch <- struct{}{}:
			default:
			}
		}
		if len(alarm.due) == 0 {
			alarm.running = false
			alarm.mu.Unlock()
			return
		}
		arm(alarm.due[0].at.Sub(now))
		alarm.mu.Unlock()
	}
}
