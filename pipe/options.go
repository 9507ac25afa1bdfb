package pipe

import (
	"context"
	"errors"
	"fmt"

	"github.com/rategate/rategate/limiter"
)

var (
	// ErrClosed is returned by Read, Write, WriteTo and ReadFrom after Close,
	// including by a call that was waiting for permits when Close was called.
	// It wraps limiter.ErrClosed. (A Conn returns net.ErrClosed instead, as
	// net.Conn does.)
	ErrClosed = fmt.Errorf("pipe: stream closed: %w", limiter.ErrClosed)
	// ErrNilStream is returned by every call on a Reader or Writer made
	// around a nil io.Reader or io.Writer, and wrapped by the error of
	// NewListener given a nil net.Listener.
	ErrNilStream = errors.New("pipe: nil reader or writer")
)

// An Option configures a Reader or Writer made by NewReader or NewWriter.
type Option func(*config)

type config struct {
	ctx   context.Context
	chunk int
	count Counter
}

func configure(opts []Option) config {
	c := config{ctx: context.Background()}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithContext bounds every wait for permits by ctx: when it ends, the
// waiting call returns its error (errors.Is(err, ctx.Err())). Without it,
// waits end only at Close. It does not interrupt a Read or Write of the
// underlying stream that blocks; a Conn's deadlines do. A nil ctx panics
// with "pipe: nil Context".
func WithContext(ctx context.Context) Option {
	if ctx == nil {
		panic("pipe: nil Context")
	}
	return func(c *config) { c.ctx = ctx }
}

// WithChunk sets the most bytes one acquisition asks for, and so the most
// one Read returns or one underlying Write is given. Without it, or with
// n <= 0, the size is derived from the limiter: half its burst (Burst, or
// Limit for a window), and at most what its rate refills in 100 ms. Set
// it for a limiter that does not tell its burst (a limiter.Chain, a keyed
// limiter's For); without it, such a limiter's first refusal with
// limiter.ErrExceedsLimit teaches the stream a smaller size.
func WithChunk(n int) Option {
	return func(c *config) { c.chunk = max(n, 0) }
}

// Counter counts the bytes a stream delivers. A progress.Monitor is one.
type Counter interface {
	Add(n int64)
}

// WithCounter makes the stream call c.Add with every piece of bytes it
// delivers (a Reader: returns; a Writer: writes), once its permits were
// granted. One Counter may count several streams if its Add is safe for
// concurrent use.
func WithCounter(c Counter) Option {
	return func(cf *config) { cf.count = c }
}
