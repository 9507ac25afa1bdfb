//go:build linux

package precise

import (
	"container/heap"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// grain is the resolution of the runtime's sleeps on Linux (epoll_wait
// takes milliseconds): a timer of a whole number of grains wakes late by
// the kernel's and scheduler's delay only, where a shorter remainder would
// round up to a whole grain.
const grain = time.Millisecond

// The alarm is the process's one OS timer for the ends of precise waits: a
// non-blocking timerfd on CLOCK_MONOTONIC, which the kernel fires within
// microseconds, read through the runtime's poller (as an *os.File) by one
// goroutine that runs only while some wait is pending and then signals the
// waits that are due. A wait that ends on it costs a timer setting and a
// wake-up, not a spin, and holds no OS thread.
var alarm struct {
	once    sync.Once
	f       *os.File // nil: no alarm (none could be made, or it failed)
	mu      sync.Mutex
	due     entries // pending waits, earliest first
	running bool    // the reading goroutine runs
}

// The timerfd calls, replaced by tests to make them fail.
var (
	timerfdCreate  = unix.TimerfdCreate
	timerfdSettime = unix.TimerfdSettime
)

func alarmInit() {
	fd, err := timerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		return // no alarm: waits end by polling the clock
	}
	alarm.f = os.NewFile(uintptr(fd), "precise-alarm")
}

// arm sets the timerfd to fire in d (at least 1 ns: zero would disarm it).
// The caller holds alarm.mu.
func arm(d time.Duration) error {
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	return timerfdSettime(int(alarm.f.Fd()), 0, &its, nil)
}

// alarmAdd schedules a signal on e.ch at e.at; false when there is no alarm.
func alarmAdd(e *entry) bool {
	alarm.once.Do(alarmInit)
	alarm.mu.Lock()
	defer alarm.mu.Unlock()
	if alarm.f == nil {
		return false
	}
	heap.Push(&alarm.due, e)
	if alarm.due[0] == e {
		if err := arm(time.Until(e.at)); err != nil {
			giveUp()
			return false
		}
	}
	if !alarm.running {
		alarm.running = true
		go alarmLoop(alarm.f)
	}
	return true
}

// giveUp abandons the alarm for the life of the process after a failed
// timerfd call: it closes the timerfd, which ends the reading goroutine's
// read, and wakes every pending wait, which then polls the clock. The
// caller holds alarm.mu.
func giveUp() {
	if alarm.f == nil {
		return
	}
	alarm.f.Close()
	alarm.f = nil
	for len(alarm.due) > 0 {
		signal(heap.Pop(&alarm.due).(*entry))
	}
}

func signal(e *entry) {
	select {
	case e.ch <- struct{}{}:
	default:
	}
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
	if len(alarm.due) == 0 && alarm.f != nil {
		if err := arm(0); err != nil {
			giveUp()
		}
	}
}

// alarmLoop reads the timerfd f, signals the waits that are due, and
// re-arms it for the next, until none is left or the alarm fails.
func alarmLoop(f *os.File) {
	var buf [8]byte
	for {
		_, err := f.Read(buf[:]) // parks until the timer fires
		alarm.mu.Lock()
		if err != nil || alarm.f != f {
			giveUp() // a failed read, or closed by giveUp: gone
			alarm.running = false
			alarm.mu.Unlock()
			return
		}
		if !alarmFire(time.Now()) {
			alarm.running = false
			alarm.mu.Unlock()
			return
		}
		alarm.mu.Unlock()
	}
}

// alarmFire signals the waits due at now and re-arms the timer for the
// next; false when none is left, or arming failed. The caller holds
// alarm.mu.
func alarmFire(now time.Time) bool {
	for len(alarm.due) > 0 && !alarm.due[0].at.After(now) {
		signal(heap.Pop(&alarm.due).(*entry))
	}
	if len(alarm.due) == 0 {
		return false
	}
	if err := arm(alarm.due[0].at.Sub(now)); err != nil {
		giveUp()
		return false
	}
	return true
}
