package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		ok       bool
		out, err string
	}{
		{nil, 0, true, "", ""},
		{[]string{"-n", "3"}, 0, true, "", ""},
		{[]string{"-h"}, 0, false, "usage: prog", ""},
		{[]string{"-bogus"}, 2, false, "", "Run 'prog -h' for usage."},
		{[]string{"-n", "x"}, 2, false, "", "invalid value"},
		{[]string{"extra"}, 2, false, "", `unexpected argument "extra"`},
	} {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		fs.Int("n", 1, "a number")
		var stdout, stderr bytes.Buffer
		code, ok := Parse(fs, tc.args, "usage: prog\n", &stdout, &stderr)
		if code != tc.code || ok != tc.ok {
			t.Errorf("%q: code %d ok %v, want %d %v", tc.args, code, ok, tc.code, tc.ok)
		}
		if !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.err) {
			t.Errorf("%q: stdout %q stderr %q, want %q and %q", tc.args, stdout.String(), stderr.String(), tc.out, tc.err)
		}
	}
}

func TestChecks(t *testing.T) {
	if InRange("n", 5, 1, 10) != nil || Positive("d", time.Second) != nil {
		t.Error("a valid value was refused")
	}
	if err := InRange("n", 11, 1, 10); err == nil || !strings.Contains(err.Error(), "-n must be from 1 to 10, got 11") {
		t.Errorf("InRange: %v", err)
	}
	if err := Positive("d", 0); err == nil || !strings.Contains(err.Error(), "-d must be a positive duration") {
		t.Errorf("Positive: %v", err)
	}
	var stderr bytes.Buffer
	if code := UsageError(&stderr, "prog", InRange("n", 0, 1, 2)); code != 2 || !strings.Contains(stderr.String(), "prog: -n must be") {
		t.Errorf("UsageError: %d %q", code, stderr.String())
	}
}

func TestParseArgs(t *testing.T) {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	n := fs.Int("n", 1, "a number")
	var stdout, stderr bytes.Buffer
	if code, ok := ParseArgs(fs, []string{"-n", "3", "in", "out"}, "usage\n", &stdout, &stderr); !ok || code != 0 {
		t.Fatalf("ParseArgs with arguments: code %d ok %v, stderr %q", code, ok, stderr.String())
	}
	if *n != 3 || strings.Join(fs.Args(), " ") != "in out" || stdout.Len()+stderr.Len() != 0 {
		t.Errorf("-n %d, arguments %q, stdout %q, stderr %q; want 3, \"in out\", nothing printed", *n, fs.Args(), stdout.String(), stderr.String())
	}
}

// TestMainExits runs Main through each of its exits.
func TestMainExits(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		runErr   error
		code     int
		ran      bool
		out, err string
	}{
		{[]string{"-n", "3"}, nil, 0, true, "ran with 3", ""},
		{[]string{"-h"}, nil, 0, false, "usage: prog", ""},
		{[]string{"-n", "x"}, nil, 2, false, "", "Run 'prog -h' for usage.\n"},
		{[]string{"extra"}, nil, 2, false, "", "unexpected argument \"extra\": it takes only flags\nRun 'prog -h' for usage.\n"},
		{[]string{"-n", "0"}, nil, 2, false, "", "prog: -n must be from 1 to 10, got 0\nRun 'prog -h' for usage.\n"},
		{[]string{"-n", "4"}, errors.New("it broke"), 1, true, "ran with 4", "prog: it broke\n"},
	} {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		n := fs.Int("n", 1, "a number")
		var stdout, stderr bytes.Buffer
		ran := false
		code := Main(fs, tc.args, "usage: prog\n", &stdout, &stderr,
			func() error { return InRange("n", *n, 1, 10) },
			func() error { ran = true; fmt.Fprintf(&stdout, "ran with %d", *n); return tc.runErr })
		if code != tc.code || ran != tc.ran {
			t.Errorf("%q: code %d, ran %v; want %d, %v", tc.args, code, ran, tc.code, tc.ran)
		}
		if !strings.Contains(stdout.String(), tc.out) || !strings.HasSuffix(stderr.String(), tc.err) {
			t.Errorf("%q: stdout %q, stderr %q; want %q in stdout, stderr ending %q", tc.args, stdout.String(), stderr.String(), tc.out, tc.err)
		}
	}
	// A nil check accepts any values.
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	if code := Main(fs, nil, "", io.Discard, io.Discard, nil, func() error { return nil }); code != 0 {
		t.Errorf("Main with a nil check: %d, want 0", code)
	}
}

func TestRateVar(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		n      int
		period time.Duration
		err    string
	}{
		{nil, 7, time.Second, ""}, // the default
		{[]string{"-rate", "5/s"}, 5, time.Second, ""},
		{[]string{"-rate", "3/1500ms"}, 3, 1500 * time.Millisecond, ""},
		{[]string{"-rate", "1000/s"}, 1000, time.Second, ""},
		{[]string{"-rate", "5000/s"}, 1001, time.Second, ""},           // capped at most+1
		{[]string{"-rate", "99999999999999/s"}, 1001, time.Second, ""}, // more than an int32
		{[]string{"-rate", "5"}, 0, 0, `bad -rate: limiter: parse rate "5"`},
		{[]string{"-rate", "0/s"}, 0, 0, `bad -rate: limiter: parse rate "0/s"`},
	} {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		var n int
		var period time.Duration
		check := RateVar(fs, &n, &period, 1000, "rate", "7/s", "the rate")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := check()
		if n != tc.n || period != tc.period || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: %d, %v, %v; want %d, %v, %q", tc.args, n, period, err, tc.n, tc.period, tc.err)
		}
	}
	// -h shows it as the string it is, with its default.
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	RateVar(fs, new(int), new(time.Duration), 10, "rate", "7/s", "the rate")
	var usage bytes.Buffer
	fs.SetOutput(&usage)
	fs.PrintDefaults()
	if want := "  -rate string\n    \tthe rate (default \"7/s\")\n"; usage.String() != want {
		t.Errorf("usage %q, want %q", usage.String(), want)
	}
}

func TestInOrder(t *testing.T) {
	var ran []int
	step := func(i int, err error) func() error {
		return func() error { ran = append(ran, i); return err }
	}
	bad := errors.New("bad")
	if err := InOrder(step(1, nil), step(2, bad), step(3, errors.New("not reached")))(); err != bad || !slices.Equal(ran, []int{1, 2}) {
		t.Errorf("InOrder = %v after %v; want bad after 1 and 2", err, ran)
	}
	if err := InOrder()(); err != nil {
		t.Errorf("InOrder of none = %v", err)
	}
}

func TestRequirePositive(t *testing.T) {
	if err := RequirePositive(Cond{"a", true}, Cond{"b", true}); err != nil {
		t.Errorf("all hold: %v", err)
	}
	if err := RequirePositive(Cond{"a", true}, Cond{"b", false}, Cond{"c", false}); err == nil || err.Error() != "-b must be positive" {
		t.Errorf("b and c fail: %v, want the first, -b must be positive", err)
	}
}
