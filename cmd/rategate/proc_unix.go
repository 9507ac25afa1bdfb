//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a process group of its own, so that the
// terminal's Ctrl-C reaches rategate, which decides what the jobs get.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends s to the process group that p leads.
func signalGroup(p *os.Process, s syscall.Signal) {
	syscall.Kill(-p.Pid, s)
}
