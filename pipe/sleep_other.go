//go:build !linux

package pipe

import "time"

// osSleep is unavailable here: the precise end of a wait (Options.Spin)
// polls the limiter, yielding the processor between polls, which keeps a
// core busy for that stretch.
func osSleep(time.Duration) bool { return false }
