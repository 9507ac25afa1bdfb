// Command copy copies a file, or stdin, no faster than a given rate, and
// shows a progress line: bytes so far, current and average rate, ETA.
//
//	go run ./examples/copy -demo                        # 3 MiB of generated data at 1 MiB/s, about 3 s
//	go run ./examples/copy -rate 512KiB/s -o out.iso in.iso
//	cat big.log | go run ./examples/copy -rate 2MB/s -o copy.log
//
// The input is the file named by the one argument, or stdin if it is "-".
// With no argument, copy reads stdin if it is a pipe or a file, and refuses
// if it is a terminal (or another device): it never makes up data to write
// over a file you named. -demo copies generated data and discards it. The
// output is -o (stdout if "-"; discarded if empty); copy refuses to write a
// file onto itself. Progress goes to stderr.
//
// -rate is a size per unit of time and -burst a size, as pipe.ParseByteRate
// and pipe.ParseBytes read them: B, kB, MB, GB, TB (powers of 1000) or KiB,
// MiB, GiB, TiB (powers of 1024), in any case; "2MiB/s", "500kB/s",
// "1GB/min". It exits with status 2 if the command line is wrong, and 1 if
// the copy fails.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
	"github.com/rategate/rategate/pipe/progress"
)

// config is one copy: what to copy where, how fast, and how often to report.
type config struct {
	In    io.Reader
	Size  int64 // In's size if known, for the percentage and the ETA; 0 if not
	Out   io.Writer
	Rate  limiter.Rate  // bytes per period
	Burst int           // bytes the copy may move at once
	Every time.Duration // between progress lines
}

// result is what the copy did.
type result struct {
	Bytes   int64
	Elapsed time.Duration
	Lines   []progress.Snapshot // one per progress line printed, the last at the end
}

// demoSize is the size of -demo's generated input.
const demoSize = 3 << 20

// env is the program's surroundings: its standard streams, and whether
// stdin is a terminal (or another device), from which copy does not read
// unless told to with "-".
type env struct {
	Stdin          io.Reader // if an *os.File, copy also refuses to write over it
	StdinTerminal  bool
	Stdout, Stderr io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli(ctx, os.Args[1:], env{Stdin: os.Stdin, StdinTerminal: isTerminal(os.Stdin), Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}

// isTerminal reports whether f is a terminal or another character device,
// such as the os.DevNull that cron, nohup and services give a program for
// stdin: copy reads such a stdin only when told to with "-", so that a
// forgotten input never truncates the output to nothing. (The standard
// library has no isatty; a character device is what a terminal looks like
// to os.Stat.)
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

const usageText = `Usage: copy [flags] [input]

Copies input to -o no faster than -rate, printing a progress line (bytes so
far, current and average rate, ETA) to stderr every -every.

input is a file, or - for stdin. With no input, copy reads stdin if it is a
pipe or a file (cat big.log | copy -o copy.log) and refuses if it is a
terminal or a device such as /dev/null. -demo copies 3 MiB of generated
data instead, and discards it. copy refuses to write -o over its input.

Sizes take B, kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers
of 1024), in any case. A rate is a size per unit of time: 2MiB/s, 500kB/s,
1GB/min, 64KiB/500ms.

Examples:
  copy -rate 512KiB/s -o out.iso in.iso
  cat big.log | copy -rate 2MB/s -o copy.log
  copy -demo

Flags:
`

// options are the command line's settings, before any file is opened.
type options struct {
	rate, burst, out string
	every            time.Duration
	demo             bool
	input            string // the argument; "" if none
}

// cli runs the program with the command-line arguments args (without the
// program's name) and returns its exit status: 0 done (or -h), 1 the copy
// failed, 2 the command line is wrong. It opens no file, and creates none,
// until the whole command line is known to be right.
func cli(ctx context.Context, args []string, e env) int {
	var o options
	fs := flag.NewFlagSet("copy", flag.ContinueOnError)
	fs.StringVar(&o.rate, "rate", "1MiB/s", "the most bytes per unit of time, such as 2MiB/s or 500kB/s")
	fs.StringVar(&o.burst, "burst", "64KiB", "the most bytes moved at once")
	fs.StringVar(&o.out, "o", "", `the output file ("-": stdout; empty: discard)`)
	fs.DurationVar(&o.every, "every", 250*time.Millisecond, "time between progress lines")
	fs.BoolVar(&o.demo, "demo", false, "copy 3 MiB of generated data, and discard it (no input, no -o)")
	if code, ok := parseFlags(fs, args, usageText, e.Stdout, e.Stderr); !ok {
		return code
	}
	if fs.NArg() > 1 {
		return usageError(e.Stderr, fs.Name(), fmt.Errorf("%d arguments %q: copy takes one input; name the output with -o", fs.NArg(), fs.Args()))
	}
	o.input = fs.Arg(0)
	cfg, err := o.config(e)
	if err != nil {
		return usageError(e.Stderr, fs.Name(), err)
	}
	closeFiles, err := openFiles(&cfg, o, e)
	if err != nil {
		fmt.Fprintln(e.Stderr, "copy:", err)
		return 1
	}
	res, err := run(ctx, e.Stderr, cfg)
	if cerr := closeFiles(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(e.Stderr, "copy: stopped after %s: %v\n", pipe.FormatBytes(res.Bytes), err)
		return 1
	}
	return 0
}

// config checks the command line and returns the copy's settings, without
// its input and output.
func (o options) config(e env) (config, error) {
	cfg := config{Every: o.every}
	var err error
	if cfg.Rate, err = pipe.ParseByteRate(o.rate); err != nil {
		return cfg, fmt.Errorf("bad -rate: %w", err)
	}
	burst, err := pipe.ParseBytes(o.burst)
	if err != nil {
		return cfg, fmt.Errorf("bad -burst: %w", err)
	}
	cfg.Burst = int(burst)
	if o.every <= 0 {
		return cfg, fmt.Errorf("-every must be a positive duration such as 250ms, got %v", o.every)
	}
	lim, err := newBucket(cfg)
	if err != nil {
		return cfg, err
	}
	lim.Close()
	switch {
	case o.demo && (o.input != "" || o.out != ""):
		return cfg, errors.New("-demo copies generated data and discards it: it takes no input and no -o")
	case !o.demo && o.input == "" && e.StdinTerminal:
		return cfg, errors.New("no input: name a file to copy (- for stdin), or pipe data in; stdin is a terminal or a device, which copy reads only when named - (-demo copies generated data)")
	}
	return cfg, nil
}

// newBucket returns the copy's token bucket, or an error that names the
// flag to fix.
func newBucket(cfg config) (*limiter.TokenBucket, error) {
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: cfg.Rate, Burst: cfg.Burst})
	var oe *limiter.OptionError
	if errors.As(err, &oe) {
		flagName := map[string]string{"Rate": "-rate", "Burst": "-burst"}[oe.Field]
		return nil, fmt.Errorf("bad %s: %s", flagName, oe.Problem)
	}
	return lim, err
}

// openFiles sets cfg's input and output as o says, and returns a function
// that closes them (and reports a failure to write the output's end).
func openFiles(cfg *config, o options, e env) (closeFiles func() error, err error) {
	closeFiles = func() error { return nil }
	var in, stdin *os.File // the input, if copy opened it; stdin, if a file
	switch {
	case o.demo:
		fmt.Fprintf(e.Stderr, "copying %s of generated data at %s and discarding it\n", pipe.FormatBytes(demoSize), o.rate)
		cfg.In, cfg.Size = io.LimitReader(zeros{}, demoSize), demoSize
	case o.input == "" || o.input == "-":
		cfg.In = e.Stdin
		stdin, _ = e.Stdin.(*os.File)
	default:
		if in, err = openInput(o.input); err != nil {
			return closeFiles, err
		}
		cfg.In = in
		if st, err := in.Stat(); err == nil && st.Mode().IsRegular() {
			cfg.Size = st.Size()
		}
	}
	switch o.out {
	case "":
		cfg.Out = io.Discard
	case "-":
		cfg.Out = e.Stdout
	default:
		out, err := createOutput(o.out, cmp.Or(in, stdin))
		if err != nil {
			if in != nil {
				in.Close()
			}
			return closeFiles, err
		}
		cfg.Out = out
		closeFiles = out.Close
	}
	if in != nil {
		closeOut := closeFiles
		closeFiles = func() error {
			in.Close()
			return closeOut()
		}
	}
	return closeFiles, nil
}

// openInput opens the named input, which must not be a directory.
func openInput(name string) (*os.File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory: copy copies one file", name)
	}
	return f, nil
}

// createOutput creates (or truncates) the named output, unless it is the
// input (in, if not nil): truncating it would destroy what is to be copied.
func createOutput(name string, in *os.File) (*os.File, error) {
	if in != nil {
		ist, err1 := in.Stat()
		ost, err2 := os.Stat(name)
		if err1 == nil && err2 == nil && os.SameFile(ist, ost) {
			return nil, fmt.Errorf("-o %s is the input file: copying a file onto itself would destroy it", name)
		}
	}
	return os.Create(name)
}

// run copies cfg.In to cfg.Out at cfg.Rate, printing a progress line to w
// every cfg.Every, and a closing one that says the copy is done (and how
// long it took, also when the size was not known). It stops early when ctx
// ends.
func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	var res result
	if cfg.Every <= 0 {
		return res, fmt.Errorf("the progress interval must be positive, got %v", cfg.Every)
	}
	lim, err := newBucket(cfg)
	if err != nil {
		return res, err
	}
	defer lim.Close()
	mon := progress.NewMonitor(cfg.Size)
	r := pipe.NewReader(cfg.In, lim, pipe.WithContext(ctx), pipe.WithCounter(mon))
	line := func(closing bool) {
		p := mon.Progress()
		res.Lines = append(res.Lines, p)
		if closing && !p.Done() { // a known size reached says "done in" itself
			fmt.Fprintf(w, "%v, done in %v\n", p, p.Elapsed.Round(time.Millisecond))
			return
		}
		fmt.Fprintln(w, p)
	}

	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(cfg.Out, r)
		done <- err
	}()
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			line(false)
		case err := <-done:
			res.Elapsed = time.Since(start)
			res.Bytes = mon.Bytes()
			if err == nil {
				line(true)
			}
			return res, err
		}
	}
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// parseFlags parses args with fs, leaving the arguments after the flags in
// fs.Args(). With ok false the program stops with exit status code: 0 after
// -h (the usage goes to stdout), 2 after an unknown flag or a bad value.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr) // the flag package says there what is wrong
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0, false
	case err != nil:
		return usageError(stderr, fs.Name(), nil), false
	}
	return 0, true
}

// usageError prints err (if not nil) and where to find the usage, and
// returns exit status 2.
func usageError(stderr io.Writer, name string, err error) int {
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	fmt.Fprintf(stderr, "Run '%s -h' for usage.\n", name)
	return 2
}
