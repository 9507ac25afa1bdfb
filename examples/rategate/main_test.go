package main

import (
	"bytes"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRateGate runs the default configuration on synctest's virtual clock and
// checks both tables to the nanosecond.
func TestRateGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		res, err := run(t.Context(), &out, defaultConfig)
		t.Log("\n" + out.String())
		if err != nil {
			t.Fatal(err)
		}
		ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
		for i, r := range res.Sequential {
			// Pairs: the first of each second at k s, the second when it finishes.
			want := ms(i/2*1000 + i%2*250)
			if r.Start != want || r.Finish != want+ms(250) {
				t.Errorf("sequential %d: %v–%v, want %v–%v", i+1, r.Start, r.Finish, want, want+ms(250))
			}
		}
		for i, r := range res.Parallel {
			want := ms(i / 2 * 1000)
			if r.Start != want || r.Finish != want+ms(250) {
				t.Errorf("parallel %d: %v–%v, want %v–%v", i+1, r.Start, r.Finish, want, want+ms(250))
			}
		}
		for _, line := range []string{
			"Iteration   Start    Finish",
			"       10   4.250s   4.500s",
			"       10   4.000s   4.250s",
			"Most starts in any 1s window: 2 (bound 2). Done at 4.250s.",
		} {
			if !strings.Contains(out.String(), line) {
				t.Errorf("output lacks %q", line)
			}
		}
	})
}

// TestCLI runs the command line as a user would type it: -h answers with the
// usage and status 0; unknown flags, bad values and arguments fail with
// status 2 and a message that names what was wrong; a good command line
// runs (on a virtual clock) and succeeds.
func TestCLI(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{[]string{"-h"}, 0, "Usage: rategate [flags]", ""},
		{[]string{"-help"}, 0, "-workers int", ""},
		{[]string{"-bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"extra"}, 2, "", `unexpected argument "extra": it takes only flags`},
		{[]string{"-iterations", "0"}, 2, "", "-iterations must be from 1 to 1000, got 0"},
		{[]string{"-iterations", "ten"}, 2, "", `invalid value "ten" for flag -iterations`},
		{[]string{"-action", "0s"}, 2, "", "-action must be a positive duration such as 100ms, got 0s"},
		{[]string{"-action", "0s", "-workers", "0"}, 2, "", "-action must be a positive duration such as 100ms, got 0s\n-workers must be from 1 to 1000, got 0"},
		{[]string{"-rate", "2/fortnight"}, 2, "", `bad -rate: limiter: parse rate "2/fortnight": unknown unit "fortnight"`},
		{[]string{"-rate", "2"}, 2, "", "want N/unit or N/duration"},
		{[]string{"-rate", "1001/s"}, 2, "", "-rate must allow at most 1000 starts per window, got 1001"},
		{[]string{"-iterations", "3", "-rate", "1/s", "-action", "100ms", "-workers", "2"}, 0, "        3   2.000s   2.100s\nMost starts in any 1s window: 1 (bound 1). Done at 2.100s.", ""},
	} {
		synctest.Test(t, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli(t.Context(), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.err) {
				t.Errorf("rategate %q: status %d, stdout %q, stderr %q; want status %d, %q in stdout, %q in stderr",
					tc.args, code, stdout.String(), stderr.String(), tc.code, tc.out, tc.err)
			}
			if tc.code == 2 && (stdout.Len() > 0 || !strings.HasSuffix(stderr.String(), "Run 'rategate -h' for usage.\n")) {
				t.Errorf("rategate %q: stdout %q, stderr %q; want nothing on stdout and a pointer to -h", tc.args, stdout.String(), stderr.String())
			}
		})
	}
}
