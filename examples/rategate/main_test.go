package main

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/internal/clitest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRateGate runs the default configuration on synctest's virtual clock and
// checks both tables to the nanosecond.
func TestRateGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, out := clitest.MustRun(t, run, defaultConfig)
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
		clitest.Contains(t, out,
			"Iteration   Start    Finish",
			"       10   4.250s   4.500s",
			"       10   4.000s   4.250s",
			"Most starts in any 1s window: 2 (bound 2). Done at 4.250s.",
		)
	})
}

// TestCLI runs the command line as a user would type it: -h answers with the
// usage and status 0; unknown flags, bad values and arguments fail with
// status 2 and a message that names what was wrong; a good command line
// runs (on a virtual clock) and succeeds.
func TestCLI(t *testing.T) {
	clitest.Run(t, "rategate", cli, []clitest.Case{
		{Args: []string{"-h"}, Out: "Usage: rategate [flags]"},
		{Args: []string{"-help"}, Out: "-workers int"},
		{Args: []string{"-bogus"}, Code: 2, Err: "flag provided but not defined: -bogus"},
		{Args: []string{"extra"}, Code: 2, Err: `unexpected argument "extra": it takes only flags`},
		{Args: []string{"-iterations", "0"}, Code: 2, Err: "-iterations must be from 1 to 1000, got 0"},
		{Args: []string{"-iterations", "ten"}, Code: 2, Err: `invalid value "ten" for flag -iterations`},
		{Args: []string{"-action", "0s"}, Code: 2, Err: "-action must be a positive duration such as 100ms, got 0s"},
		{Args: []string{"-action", "0s", "-workers", "0"}, Code: 2, Err: "-action must be a positive duration such as 100ms, got 0s\n-workers must be from 1 to 1000, got 0"},
		{Args: []string{"-rate", "2/fortnight"}, Code: 2, Err: `bad -rate: limiter: parse rate "2/fortnight": unknown unit "fortnight"`},
		{Args: []string{"-rate", "2"}, Code: 2, Err: "want N/unit or N/duration"},
		{Args: []string{"-rate", "1001/s"}, Code: 2, Err: "-rate must allow at most 1000 starts per window, got 1001"},
		{Args: []string{"-iterations", "3", "-rate", "1/s", "-action", "100ms", "-workers", "2"}, Out: "        3   2.000s   2.100s\nMost starts in any 1s window: 1 (bound 1). Done at 2.100s."},
	})
}
