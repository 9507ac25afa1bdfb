//go:build linux

package precise

import (
	"container/heap"
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
// timerfd on CLOCK_MONOTONIC, which the kernel fires within microseconds,
// read by one goroutine that runs only while some wait is pending and then
// signals the waits that are due. A wait that ends on it costs a timer
// setting and a wake-up, not a spin. The goroutine blocks in read(2), so it
// holds one OS thread while waits are pending, and the kernel wakes that
// thread directly when the timer fires (a read through the runtime's
// poller cost some 20% more CPU per wait in bench/pacing, for no gain).
var alarm struct {
	once    sync.Once
	fd      int // -1: no alarm (none could be made, or it failed)
	mu      sync.Mutex
	due     entries         // pending waits, earliest first
	running bool            // the reading goroutine runs (and closes fd when it sees the alarm given up)
	loopFD  int             // the timerfd the reading goroutine reads, set when it starts
	its     unix.ItimerSpec // arm's argument, here so that arming allocates nothing
}

// The timerfd calls, replaced by tests to make them fail.
var (
	timerfdCreate  = unix.TimerfdCreate
	timerfdSettime = unix.TimerfdSettime
)

func alarmInit() {
	fd, err := timerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC)
	if err != nil {
		fd = -1 // no alarm: waits end by polling the clock
	}
	alarm.fd = fd
}

// arm sets the timerfd to fire in d (at least 1 ns: zero would disarm it).
// The caller holds alarm.mu.
func arm(d time.Duration) error {
	alarm.its = unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))}
	return timerfdSettime(alarm.fd, 0, &alarm.its, nil)
}

// alarmAdd schedules a signal on e.ch at e.at; false when there is no alarm.
func alarmAdd(e *entry) bool {
	alarm.once.Do(alarmInit)
	alarm.mu.Lock()
	defer alarm.mu.Unlock()
	if alarm.fd < 0 {
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
		alarm.running, alarm.loopFD = true, alarm.fd
		go alarmLoop() // no arguments: a go statement with some allocates them
	}
	return true
}

// giveUp abandons the alarm for the life of the process after a failed
// timerfd call, and wakes every pending wait, which then polls the clock.
// The reading goroutine, if it runs, closes the timerfd once its read
// returns (a last arming, if it works, makes that at once; otherwise when
// the timer last armed fires); if none runs, giveUp closes it. The caller
// holds alarm.mu.
func giveUp() {
	if alarm.fd < 0 {
		return
	}
	if alarm.running {
		_ = arm(0) // end the read now, if the timerfd still works
	} else {
		unix.Close(alarm.fd)
	}
	alarm.fd = -1
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
	if len(alarm.due) == 0 && alarm.fd >= 0 {
		if err := arm(0); err != nil {
			giveUp()
		}
	}
}

// alarmLoop reads the timerfd alarm.loopFD, signals the waits that are
// due, and re-arms it for the next, until none is left or the alarm is
// given up.
func alarmLoop() {
	alarm.mu.Lock()
	fd := alarm.loopFD
	alarm.mu.Unlock()
	var buf [8]byte
	for {
		_, err := unix.Read(fd, buf[:]) // blocks until the timer fires
		if err == unix.EINTR {
			continue
		}
		alarm.mu.Lock()
		if err != nil && alarm.fd == fd {
			giveUp() // a failed read: the alarm is gone
		}
		if alarm.fd != fd {
			unix.Close(fd) // given up: this goroutine was the last to use it
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
// next; false when none is left, or arming failed (the alarm is then given
// up, and the caller, the reading goroutine, must close fd). The caller
// holds alarm.mu.
func alarmFire(now time.Time) bool {
	for len(alarm.due) > 0 && !alarm.due[0].at.After(now) {
		signal(heap.Pop(&alarm.due).(*entry))
	}
	if len(alarm.due) == 0 {
		return false
	}
	if err := arm(alarm.due[0].at.Sub(now)); err != nil {
		fd := alarm.fd
		giveUp()
		unix.Close(fd)
		return false
	}
	return true
}
