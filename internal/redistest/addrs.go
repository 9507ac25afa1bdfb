package redistest

import (
	"net"
	"strconv"
)

// Refused returns a loopback address where nothing listens: a connection to
// it is refused at once. The port was free a moment ago.
func Refused() (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// Unreachable returns a loopback address at which a connection neither
// succeeds nor fails, as at a host that drops every packet: a listening
// socket whose accept queue is full (backlog 0 and one connection queued
// that is never accepted), so the kernel drops every further SYN and the
// client's connect waits until its own deadline. Close releases it.
type Unreachable struct {
	// Addr is the address.
	Addr string
	l    net.Listener
	held net.Conn
}

// NewUnreachable returns an unreachable address on loopback; see
// Unreachable. It fails with ErrUnsupported where the accept queue's length
// cannot be set (outside Linux and the BSDs).
func NewUnreachable() (*Unreachable, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if err := shrinkBacklog(l); err != nil {
		l.Close()
		return nil, err
	}
	held, err := net.Dial("tcp", l.Addr().String()) // fills the queue
	if err != nil {
		l.Close()
		return nil, err
	}
	return &Unreachable{Addr: l.Addr().String(), l: l, held: held}, nil
}

// Close closes the listening socket and the queued connection.
func (u *Unreachable) Close() {
	u.held.Close()
	u.l.Close()
}
