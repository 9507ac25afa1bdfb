//go:build !unix

package bench

import "time"

// pipeCPU is the CPU time the process has used; 0 where getrusage is
// missing, so cpu% reads 0 there.
func pipeCPU() time.Duration { return 0 }
