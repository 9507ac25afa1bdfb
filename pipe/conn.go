package pipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/rategate/rategate/limiter"
)

// Conn is a net.Conn whose reads pass a read limiter and whose writes pass
// a write limiter, each as Reader and Writer do. Its deadlines bound the
// waits for permits as well as the underlying reads and writes: a Read or
// Write still waiting when its deadline passes returns
// os.ErrDeadlineExceeded (a net.Error whose Timeout is true), and moving
// the deadline applies to a call already waiting. Close makes a waiting
// call return net.ErrClosed. CloseWrite and CloseRead half-close the
// underlying connection where it can, and NetConn returns it.
//
// As net.Conn promises, its methods may be called from several goroutines
// at once: shaped Reads take turns, and so do shaped Writes, so that each
// Write reaches the peer whole, its pieces never interleaved with
// another's, as on a *net.TCPConn.
type Conn struct {
	net.Conn
	r *Reader // nil: reads are not limited
	w *Writer // nil: writes are not limited
	// One shaped Read or WriteTo at a time, and one shaped Write or
	// ReadFrom: channels of one token rather than mutexes, so that a call
	// waiting its turn is durably blocked in a testing/synctest bubble.
	rmu, wmu chan struct{}
	cancel   context.CancelFunc
	rdl      deadline
	wdl      deadline
}

// NewConn returns c with its reads limited by read and its writes by write;
// a nil limiter leaves that direction unlimited (and its fast paths, such
// as sendfile and splice, untouched).
func NewConn(c net.Conn, read, write limiter.Limiter) *Conn {
	return newConn(c, read, nil, write, nil)
}

func newConn(c net.Conn, read limiter.Limiter, readMembers []limiter.Limiter, write limiter.Limiter, writeMembers []limiter.Limiter) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	cn := &Conn{Conn: c, cancel: cancel, rmu: make(chan struct{}, 1), wmu: make(chan struct{}, 1)}
	cn.rdl.init(ctx)
	cn.wdl.init(ctx)
	if read != nil {
		cn.r = &Reader{src: c}
		cn.r.sr = shapedReader{src: c, s: &cn.r.s}
		cn.r.s.init(read, readMembers, config{ctx: ctx})
		cn.r.s.dl, cn.r.s.closedErr = &cn.rdl, net.ErrClosed
	}
	if write != nil {
		cn.w = &Writer{dst: c}
		cn.w.s.init(write, writeMembers, config{ctx: ctx})
		cn.w.s.dl, cn.w.s.closedErr = &cn.wdl, net.ErrClosed
	}
	return cn
}

// Read reads from the connection as Reader.Read does.
func (c *Conn) Read(p []byte) (int, error) {
	if c.r == nil {
		return c.Conn.Read(p)
	}
	c.rmu <- struct{}{}
	defer func() { <-c.rmu }()
	return c.r.Read(p)
}

// Write writes to the connection as Writer.Write does.
func (c *Conn) Write(p []byte) (int, error) {
	if c.w == nil {
		return c.Conn.Write(p)
	}
	c.wmu <- struct{}{}
	defer func() { <-c.wmu }()
	return c.w.Write(p)
}

// ReadFrom copies r to the connection as Writer.ReadFrom does (or with the
// connection's own ReadFrom when writes are not limited).
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if c.w != nil {
		c.wmu <- struct{}{}
		defer func() { <-c.wmu }()
		return c.w.ReadFrom(r)
	}
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{c.Conn}, r)
}

// WriteTo copies the connection to w as Reader.WriteTo does (or with the
// connection's own WriteTo when reads are not limited).
func (c *Conn) WriteTo(w io.Writer) (int64, error) {
	if c.r != nil {
		c.rmu <- struct{}{}
		defer func() { <-c.rmu }()
		return c.r.WriteTo(w)
	}
	if wt, ok := c.Conn.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.Copy(w, readerOnly{c.Conn})
}

// Close closes the connection; calls waiting for permits return
// net.ErrClosed.
func (c *Conn) Close() error {
	if c.r != nil {
		c.r.s.closed.Store(true)
	}
	if c.w != nil {
		c.w.s.closed.Store(true)
	}
	c.cancel()
	c.rdl.stop()
	c.wdl.stop()
	return c.Conn.Close()
}

// CloseWrite shuts down the writing side of the connection (the peer reads
// io.EOF) if the underlying connection can, as *net.TCPConn,
// *net.UnixConn and *tls.Conn can; otherwise it returns an error that
// matches errors.ErrUnsupported. Proxies that half-close a connection find
// it through an interface assertion, as they would on the bare connection.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("pipe: %T has no CloseWrite: %w", c.Conn, errors.ErrUnsupported)
}

// CloseRead shuts down the reading side of the connection if the
// underlying connection can (*net.TCPConn, *net.UnixConn); otherwise it
// returns an error that matches errors.ErrUnsupported.
func (c *Conn) CloseRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return fmt.Errorf("pipe: %T has no CloseRead: %w", c.Conn, errors.ErrUnsupported)
}

// NetConn returns the underlying connection, as (*tls.Conn).NetConn does,
// for what the shaped Conn does not offer (SetNoDelay, SyscallConn, …).
// Bytes read or written through it pass no limiter.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// SetDeadline sets both deadlines, as net.Conn's SetDeadline does.
func (c *Conn) SetDeadline(t time.Time) error {
	err := c.Conn.SetDeadline(t)
	c.rdl.set(t)
	c.wdl.set(t)
	return err
}

// SetReadDeadline sets the deadline of reads, including their waits for
// permits.
func (c *Conn) SetReadDeadline(t time.Time) error {
	err := c.Conn.SetReadDeadline(t)
	c.rdl.set(t)
	return err
}

// SetWriteDeadline sets the deadline of writes, including their waits for
// permits.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	err := c.Conn.SetWriteDeadline(t)
	c.wdl.set(t)
	return err
}

// ListenerOptions configures NewListener. Every field is optional.
type ListenerOptions struct {
	// Read and Write are totals shared by every accepted connection: the
	// bytes all connections read (write) together pass Read (Write).
	Read, Write limiter.Limiter
	// PerConn, if set, makes the limiters of one accepted connection, for
	// example two new token buckets; a nil result leaves that direction
	// without a per-connection limit. A connection's reads pass its own
	// read limiter and the shared Read, through limiter.Chain (all or
	// nothing: a refusal by either consumes nothing from the other).
	PerConn func(c net.Conn) (read, write limiter.Limiter, err error)
}

// Listener is a net.Listener whose accepted connections are shaped: each is
// a *Conn limited by its own limiters (ListenerOptions.PerConn) and by the
// totals shared by all of them (ListenerOptions.Read and Write).
type Listener struct {
	net.Listener
	opts ListenerOptions
}

// NewListener wraps l. It fails only for a nil l, with an error that wraps
// ErrNilStream.
func NewListener(l net.Listener, opts ListenerOptions) (*Listener, error) {
	if l == nil {
		return nil, fmt.Errorf("pipe: NewListener: nil net.Listener: %w", ErrNilStream)
	}
	return &Listener{Listener: l, opts: opts}, nil
}

// Accept waits for the next connection and returns it as a *Conn. When
// PerConn fails, Accept closes the connection and returns the error wrapped
// in a net.Error whose Temporary is true, so that servers that retry
// temporary errors (net/http does) keep accepting.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	var pr, pw limiter.Limiter
	if l.opts.PerConn != nil {
		if pr, pw, err = l.opts.PerConn(c); err != nil {
			c.Close()
			return nil, &acceptError{err}
		}
	}
	rl, rm := combine(pr, l.opts.Read)
	wl, wm := combine(pw, l.opts.Write)
	return newConn(c, rl, rm, wl, wm), nil
}

// combine chains a per-connection limiter with a shared total, either of
// which may be nil, and returns the members the stream learns from.
func combine(own, total limiter.Limiter) (limiter.Limiter, []limiter.Limiter) {
	switch {
	case own == nil && total == nil:
		return nil, nil
	case own == nil:
		return total, nil
	case total == nil:
		return own, nil
	}
	return limiter.Chain(own, total), []limiter.Limiter{own, total}
}

type acceptError struct{ err error }

func (e *acceptError) Error() string   { return "pipe: accept: " + e.err.Error() }
func (e *acceptError) Unwrap() error   { return e.err }
func (e *acceptError) Timeout() bool   { return false }
func (e *acceptError) Temporary() bool { return true }
