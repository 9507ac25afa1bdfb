package pipe

import (
	"syscall"
	"time"
)

// osSleep sleeps d with nanosleep(2), which on Linux wakes tens of
// microseconds late where Go's timers wake about a millisecond late. It
// blocks the calling thread (the runtime gives its processor to others)
// and cannot be interrupted, so the caller keeps d short (osMax) and
// checks its context between sleeps. A signal (EINTR) ends the sleep
// early; the caller then polls the limiter and sleeps again if need be.
func osSleep(d time.Duration) bool {
	ts := syscall.NsecToTimespec(int64(d))
	syscall.Nanosleep(&ts, nil)
	return true
}
