package cliflag

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

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
