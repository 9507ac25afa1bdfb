package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit statuses of pipe and lines (run has GNU parallel's, see runUsage).
const (
	exitOK    = 0
	exitError = 1 // a failure while running: reading, writing, Redis
	exitUsage = 2 // bad input: a flag, a rate, a file; nothing was done
)

const mainUsage = `rategate: rate limits for shell pipelines

Usage:

	rategate pipe  -rate 2MiB/s [-burst 64KiB] [-q] [FILE...]
	rategate lines -rate 100/s [-window smooth|strict] [-burst N]
	rategate run   -rate 5/s -j 4 [-per-key FIELD] [-joblog FILE] -- COMMAND [ARG...] {}

	pipe   copies FILEs (or stdin) to stdout at a byte rate
	lines  passes stdin's lines to stdout at a line rate
	run    runs COMMAND once per input line, at most -j at once, at a start rate

Each takes -redis ADDR -key NAME to share its limit with every process using
the same key. "rategate COMMAND -h" describes a command.
`

func main() {
	os.Exit(rategate(os.Args[1:]))
}

// rategate runs the subcommand args[0] and returns the exit status.
func rategate(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, mainUsage)
		return exitUsage
	}
	switch args[0] {
	case "pipe":
		return finish("pipe", pipeCmd(args[1:]))
	case "lines":
		return finish("lines", linesCmd(args[1:]))
	case "run":
		return runCmd(args[1:])
	case "-h", "-help", "--help", "help":
		fmt.Fprint(os.Stdout, mainUsage)
		return exitOK
	}
	fmt.Fprintf(os.Stderr, "rategate: unknown command %q (want pipe, lines or run; rategate -h for help)\n", args[0])
	return exitUsage
}

// errHelp reports that -h was given and the usage was printed: exit 0.
var errHelp = errors.New("help requested")

// usageError is bad input, found before anything was done: exit status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error {
	return &usageError{fmt.Errorf(format, a...)}
}

// finish prints err, if any, and returns the exit status it calls for.
func finish(cmd string, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(os.Stderr, "rategate %s: %v\n(rategate %s -h for help)\n", cmd, err, cmd)
		return exitUsage
	}
	fmt.Fprintf(os.Stderr, "rategate %s: %v\n", cmd, err)
	return exitError
}

// newFlags returns a FlagSet that reports instead of printing: parseFlags
// prints the usage on -h (to stdout) and finish prints the errors.
func newFlags(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("rategate "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args; on -h it prints usage and the flags to stdout and
// returns errHelp; on a bad flag, a usageError.
func parseFlags(fs *flag.FlagSet, usage string, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fmt.Fprint(os.Stdout, usage)
		fmt.Fprintln(os.Stdout, "\nFlags:")
		fs.PrintDefaults()
		return errHelp
	}
	if err != nil {
		return &usageError{err}
	}
	return nil
}

// shellQuote quotes arg for a POSIX shell when it needs quoting.
func shellQuote(arg string) string {
	if arg != "" && strings.IndexFunc(arg, needsQuote) < 0 {
		return arg
	}
	return "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
}

func needsQuote(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("-_./:=,+@%^", r)
}
