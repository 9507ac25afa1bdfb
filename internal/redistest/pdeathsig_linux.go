package redistest

import (
	"os/exec"
	"syscall"
)

// setPdeathsig has the kernel kill the server when the starting thread's
// process dies, so a crashed test leaves no server behind.
func setPdeathsig(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
