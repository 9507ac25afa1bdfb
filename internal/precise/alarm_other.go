//go:build !linux

package precise

// grain is 0 elsewhere: the runtime's sleeps there take nanoseconds.
const grain = 0

// There is no OS alarm here: the ends of precise waits poll the clock.
func alarmAdd(*entry) bool { return false }
func alarmRemove(*entry)   {}
