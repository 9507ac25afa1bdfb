//go:build unix

package redistest

import (
	"net"
	"syscall"
)

// shrinkBacklog listens again on l's socket with a backlog of 0: one
// connection waits in the accept queue, and SYNs beyond it are dropped.
func shrinkBacklog(l net.Listener) error {
	rc, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), 0) }); err != nil {
		return err
	}
	return lerr
}
