//go:build !linux

package precise

// There is no OS alarm here: the ends of precise waits spin.
func alarmAdd(*entry) bool { return false }

func alarmRemove(*entry) {}
