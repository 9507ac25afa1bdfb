package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
	"github.com/rategate/rategate/pipe/progress"
	"golang.org/x/term"
)

const pipeUsage = `Usage: rategate pipe -rate RATE [-burst SIZE] [-q] [-redis ADDR -key NAME] [FILE...]

Copies the FILEs in order (or stdin; "-" is stdin) to stdout at most at RATE
bytes: "2MiB/s", "500kB/s", "1GB/min" (KiB, MiB, GiB are powers of 1024; kB,
MB, GB of 1000). At most RATE's bytes pass in ANY window of its period,
wherever the window starts, idle spells included: after an idle minute,
-rate 1MiB/s still sends at most 1 MiB in every second. Within the period, at
most BURST bytes go out at once (default: a tenth of the period's bytes),
so at most BURST + RATE*t in any interval t. With demand above the rate, the
rate is reached.

With -redis ADDR -key NAME, the limit is kept in Redis and shared by every
rategate pipe using the same NAME, on any machine.

While stderr is a terminal, a progress line there shows the bytes sent, the
rate, and the time left when the size is known (FILEs, or stdin redirected
from a file); -q turns it off.

Exit status: 0 when every byte was copied, 1 on a read, write or Redis error,
2 for bad input (a flag, a rate, a FILE that cannot be read, a FILE that is
also stdout), before anything is copied.
`

func pipeCmd(args []string) error {
	fs := newFlags("pipe")
	rate := fs.String("rate", "", "copy at most `RATE` bytes: 2MiB/s, 500kB/s, 1GB/min")
	burst := fs.String("burst", "", "send at most `SIZE` at once: 64KiB (default: the rate's bytes in a tenth of its period)")
	quiet := fs.Bool("q", false, "no progress line on stderr")
	var sh shared
	sh.add(fs)
	if err := parseFlags(fs, pipeUsage, args); err != nil {
		return err
	}
	lim, err := parseByteLimit(*rate, *burst)
	if err != nil {
		return err
	}
	if err := sh.check(); err != nil {
		return err
	}
	in, err := openInputs(fs.Args())
	if err != nil {
		return err
	}
	defer in.close()
	l, closeLimit, err := sh.open(lim)
	if err != nil {
		return err
	}
	defer closeLimit()
	mon := progress.NewMonitor(in.total)
	w := pipe.NewWriter(os.Stdout, l, pipe.WithChunk(lim.chunk()), pipe.WithCounter(mon))
	stop := func() {}
	if !*quiet && term.IsTerminal(int(os.Stderr.Fd())) {
		stop = showProgress(mon, os.Stderr, 500*time.Millisecond)
	}
	err = in.copyTo(w)
	stop()
	return err
}

// optionErr makes a limiter option error a usage error.
func optionErr(err error) error {
	var oe *limiter.OptionError
	if errors.As(err, &oe) {
		return &usageError{err}
	}
	return err
}

// inputs are pipe's FILEs, all opened before anything is copied.
type inputs struct {
	names []string
	files []*os.File
	total int64 // the sum of their sizes; 0 when one is not a regular file
}

func openInputs(names []string) (*inputs, error) {
	if len(names) == 0 {
		names = []string{"-"}
	}
	in := &inputs{names: names}
	out, _ := os.Stdout.Stat()
	sized := true
	for _, name := range names {
		f, err := openInput(name)
		if err != nil {
			in.close()
			return nil, err
		}
		in.files = append(in.files, f)
		st, err := f.Stat()
		if err != nil {
			in.close()
			return nil, usagef("%s: %v", name, err)
		}
		if out != nil && out.Mode().IsRegular() && os.SameFile(st, out) {
			in.close()
			return nil, usagef("%s: input file is output file", name)
		}
		sized = sized && st.Mode().IsRegular()
		in.total += st.Size()
	}
	if !sized {
		in.total = 0
	}
	return in, nil
}

func openInput(name string) (*os.File, error) {
	if name == "-" {
		return os.Stdin, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, &usageError{err}
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, usagef("%s: is a directory", name)
	}
	return f, nil
}

func (in *inputs) copyTo(w io.Writer) error {
	for i, f := range in.files {
		if _, err := io.Copy(w, f); err != nil {
			return fmt.Errorf("%s: %w", in.names[i], err)
		}
	}
	return nil
}

func (in *inputs) close() {
	for _, f := range in.files {
		if f != os.Stdin {
			f.Close()
		}
	}
}

// showProgress rewrites a progress line on w every interval until the
// returned stop is called, which writes the last one and ends the line.
func showProgress(mon *progress.Monitor, w io.Writer, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintf(w, "\r%s\x1b[K", mon.Progress())
			case <-done:
				fmt.Fprintf(w, "\r%s\x1b[K\n", mon.Progress())
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}
