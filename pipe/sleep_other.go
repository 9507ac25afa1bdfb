//go:build !linux

package pipe

import "time"

// osSleep is unavailable here: waits poll instead.
func osSleep(time.Duration) bool { return false }
