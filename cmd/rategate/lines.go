package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"

	"github.com/rategate/rategate/limiter"
)

const linesUsage = `Usage: rategate lines -rate N/PERIOD [-window smooth|strict] [-burst N] [-redis ADDR -key NAME]

Passes stdin's lines to stdout, whole and in order, at most N in ANY window
of PERIOD, wherever it starts, idle spells included: "100/s", "5/min",
"2/1500ms". A line is written as soon as it may be.

-window smooth (the default) spreads the lines over the period: at most BURST
at once (default: a tenth of N, at least 2), so at most BURST + N*t/PERIOD
in any interval t. With demand above the rate the lines come PERIOD/N apart,
and a wake-up that comes late is made up from the burst.

-window strict lets up to N lines through at once, then none until the first
of them is PERIOD old.

With -redis ADDR -key NAME, the limit is kept in Redis and shared by every
rategate lines using the same NAME, on any machine.

Exit status: 0 when every line was passed, 1 on a read, write or Redis error,
2 for bad input (a flag, a rate), before any line is read.
`

func linesCmd(args []string) error {
	fs := newFlags("lines")
	var ev eventFlags
	ev.add(fs, "lines")
	var sh shared
	sh.add(fs)
	if err := parseFlags(fs, linesUsage, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("lines reads stdin only; unexpected argument %q", fs.Arg(0))
	}
	e, ok, err := ev.parse()
	if err != nil {
		return err
	}
	if !ok {
		return usagef("-rate is required, as in -rate 100/s")
	}
	if err := sh.check(); err != nil {
		return err
	}
	lim, closeLimit, err := sh.open(e)
	if err != nil {
		return err
	}
	defer closeLimit()
	return copyLines(context.Background(), os.Stdin, os.Stdout, lim)
}

// copyLines copies in's lines to out, taking one permit from lim before each
// line. Output is flushed before every wait (for a permit or for input), so
// a line leaves as soon as it is granted and read.
func copyLines(ctx context.Context, in io.Reader, out io.Writer, lim limiter.Limiter) error {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	atStart := true // the next byte read begins a line
	for {
		if !lineBuffered(r) {
			if err := w.Flush(); err != nil {
				return err
			}
		}
		part, err := r.ReadSlice('\n') // a line, or a part of a long one
		if len(part) > 0 {
			if atStart {
				if err := take(ctx, lim, w); err != nil {
					return err
				}
			}
			if _, err := w.Write(part); err != nil {
				return err
			}
			atStart = part[len(part)-1] == '\n'
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return w.Flush()
		default:
			return err
		}
	}
}

// lineBuffered reports whether a whole line is buffered in r, so that
// reading it will not wait.
func lineBuffered(r *bufio.Reader) bool {
	b, _ := r.Peek(r.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// take takes one permit, flushing w first when it has to wait.
func take(ctx context.Context, lim limiter.Limiter, w *bufio.Writer) error {
	if lim.TryAcquire(1).Granted() {
		return nil
	}
	if err := w.Flush(); err != nil {
		return err
	}
	_, err := lim.Acquire(ctx, 1)
	return err
}
