//go:build !unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

func ownProcessGroup(*exec.Cmd) {}

// signalGroup kills p: other systems have no process groups to signal.
func signalGroup(p *os.Process, _ syscall.Signal) {
	p.Kill()
}
