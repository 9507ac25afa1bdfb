package pipe

import (
	"context"
	"errors"
	"time"

	"github.com/rategate/rategate/limiter"
)

var (
	// ErrClosed is returned by Read, Write, WriteTo and ReadFrom after Close,
	// including by a call that was waiting for permits when Close was called.
	// (A Conn returns net.ErrClosed instead, as net.Conn does.)
	ErrClosed = errors.New("pipe: stream closed")
	// ErrNilLimiter is returned by every call on a Reader or Writer made with
	// a nil limiter, and by NewReaderOptions and NewWriterOptions.
	ErrNilLimiter = errors.New("pipe: nil limiter")
	// ErrNilStream is returned by every call on a Reader or Writer made
	// around a nil io.Reader or io.Writer.
	ErrNilStream = errors.New("pipe: nil reader or writer")
)

// Options tunes a Reader or Writer. The zero Options is what NewReader and
// NewWriter use, and suits this package's limiters.
type Options struct {
	// Context bounds every wait for permits: when it ends, the waiting call
	// returns its error (errors.Is(err, ctx.Err())). Nil means
	// context.Background. It does not interrupt a Read or Write of the
	// underlying stream that blocks; a Conn's deadlines do.
	Context context.Context

	// Chunk is the most bytes one acquisition asks for, and so the most one
	// Read returns or one underlying Write is given. Zero derives it from the
	// limiter: half its burst (Burst, or Limit for a window), and at most
	// what its rate refills in 100 ms. Set it for a limiter that does not
	// tell its burst (a limiter.Chain, a keyed limiter's For); without it,
	// such a limiter's first refusal with ErrExceedsLimit teaches the stream
	// a smaller size. Negative is an error.
	Chunk int

	// Spin is how much of the end of each wait for permits is spent in
	// precise sleeps (nanosleep on Linux, tens of microseconds late) and
	// polling the limiter, rather than on a Go timer, which on Linux wakes
	// about a millisecond late. Zero decides per wait: a token bucket whose
	// spare burst keeps filling for more than 2 ms past the wanted instant
	// loses nothing to a late timer, so only smaller bursts (and pacers) wait
	// precisely, for the last 2 ms. Negative always uses timers, which costs
	// throughput when the burst is small for the rate. Elsewhere than on
	// Linux the precise stretch is all polling, which keeps a core busy. A
	// precise wait still notices the context, Close and deadlines within
	// about a millisecond.
	Spin time.Duration

	// Monitor, if not nil, counts every byte the stream delivers.
	Monitor *Monitor
}

func (o Options) validate(lim limiter.Limiter) error {
	if lim == nil {
		return ErrNilLimiter
	}
	if o.Chunk < 0 {
		return &limiter.OptionError{Field: "Chunk", Problem: "must not be negative"}
	}
	return nil
}
