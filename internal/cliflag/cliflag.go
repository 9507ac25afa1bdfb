// Package cliflag is what the example programs share to read their command
// lines with the standard flag package: -h prints the usage to stdout and
// exits 0; an unknown flag, a bad value or an extra argument exits 2 with a
// message that names the flag and what was expected.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"
)

// Parse parses args with fs, whose program takes no arguments besides
// its flags. With ok false the program stops with exit status code: 0 after
// -h (the usage goes to stdout), 2 after an unknown flag, a bad value or an
// argument (the error goes to stderr).
func Parse(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr) // flag prints its own errors there, naming the flag
	fs.Usage = func() {} // printed below, where it belongs
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0, false
	case err != nil:
		fmt.Fprintf(stderr, "Run '%s -h' for usage.\n", fs.Name())
		return 2, false
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q: it takes only flags\nRun '%s -h' for usage.\n", fs.Name(), fs.Arg(0), fs.Name())
		return 2, false
	}
	return 0, true
}

// UsageError prints err, and where to find the usage, and returns exit
// status 2.
func UsageError(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\nRun '%s -h' for usage.\n", name, err, name)
	return 2
}

// InRange returns an error naming the flag unless lo <= v <= hi.
func InRange(flagName string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("-%s must be from %d to %d, got %d", flagName, lo, hi, v)
	}
	return nil
}

// Positive returns an error naming the flag unless d > 0.
func Positive(flagName string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("-%s must be a positive duration such as 100ms, got %v", flagName, d)
	}
	return nil
}
