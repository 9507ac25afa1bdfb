package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rategate/rategate/limiter"
)

// Parse parses args with fs, whose program takes no arguments besides
// its flags. With ok false the program stops with exit status code: 0 after
// -h (the usage goes to stdout), 2 after an unknown flag, a bad value or an
// argument (the error goes to stderr).
func Parse(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
	if code, ok := ParseArgs(fs, args, usage, stdout, stderr); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q: it takes only flags\nRun '%s -h' for usage.\n", fs.Name(), fs.Arg(0), fs.Name())
		return 2, false
	}
	return 0, true
}

// ParseArgs is Parse for a program that takes arguments after its flags:
// it leaves them in fs.Args(), for the program to check.
func ParseArgs(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
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
	}
	return 0, true
}

// Main is the whole command line of a program that takes only flags. It
// parses args with fs as Parse does, then calls check, whose error means
// that the flags' values are wrong (UsageError prints it), and then run,
// whose error means that the program failed (printed to stderr after the
// program's name, fs.Name()). check and run are called after parsing, so
// closures over the flags' variables see the values given; a nil check
// accepts any. Main returns the exit status: 0 when run succeeds or after
// -h, 1 when run fails, 2 when the command line is wrong.
func Main(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer, check, run func() error) int {
	if code, ok := Parse(fs, args, usage, stdout, stderr); !ok {
		return code
	}
	if check != nil {
		if err := check(); err != nil {
			return UsageError(stderr, fs.Name(), err)
		}
	}
	if err := run(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	return 0
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

// RateVar defines a rate flag with the given name, default value and usage:
// a string, N/unit or N/duration as limiter.ParseRate reads it ("5/s",
// "3/1500ms"). It returns the check that, once the flags are parsed, reads
// the value into *n events per *period, or says "bad -name: " and why.
// *n is at most most+1, so that a count too large for an int still
// compares as over a bound of most.
func RateVar(fs *flag.FlagSet, n *int, period *time.Duration, most int, name, value, usage string) (check func() error) {
	s := fs.String(name, value, usage)
	return func() error {
		r, err := limiter.ParseRate(*s)
		if err != nil {
			return fmt.Errorf("bad -%s: %w", name, err)
		}
		*n, *period = int(min(r.Events(), int64(most)+1)), r.Period()
		return nil
	}
}

// InOrder returns a check that runs checks one after the other, up to the
// first that fails, and returns its error.
func InOrder(checks ...func() error) func() error {
	return func() error {
		for _, c := range checks {
			if err := c(); err != nil {
				return err
			}
		}
		return nil
	}
}

// Cond is a requirement on one flag's value, for RequirePositive: OK
// reports whether the value meets it.
type Cond struct {
	Flag string // the flag's name, without the dash
	OK   bool
}

// RequirePositive returns an error "-flag must be positive" naming the
// first of conds that does not hold, or nil if all do.
func RequirePositive(conds ...Cond) error {
	for _, c := range conds {
		if !c.OK {
			return fmt.Errorf("-%s must be positive", c.Flag)
		}
	}
	return nil
}
