package pipe

import (
	"syscall"
	"time"
)

// osSleep sleeps d with nanosleep(2), which on Linux wakes tens of
// microseconds late where Go's timers wake about a millisecond late. It
// blocks the calling thread (the runtime gives its processor to others).
func osSleep(d time.Duration) bool {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.Nanosleep(&ts, nil)
	return true
}
