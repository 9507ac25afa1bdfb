package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
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
		res, out := mustRun(t, defaultConfig)
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
		contains(t, out,
			"Iteration   Start    Finish",
			"       10   4.250s   4.500s",
			"       10   4.000s   4.250s",
			"Most starts in any 1s window: 2 (bound 2). Done at 4.250s.",
		)
	})
}

// TestRealClock runs a small configuration on the real clock, where every
// start is stamped a little after its grant. The bound check must pass (it
// failed in most real-clock runs when it counted full windows), and no start
// may come before the bound allows it: start i of the pairs is at least
// (i/2)·Window, plus one action for the second of a pair in the for loop.
// That is exact, since a stamp is never early. A start may come late by up
// to half the window (100 ms): timers fire within a millisecond or two, and
// a loaded machine running -race stalls a goroutine for tens of
// milliseconds, not a hundred; a limiter that lost a wake-up would be a
// whole window late. A run that finds a grant late, or the bound not
// reached, is run again, up to three times: lateness is the machine's. An
// early grant, or one over the bound, fails at once.
func TestRealClock(t *testing.T) {
	cfg := config{Iterations: 5, Action: 20 * time.Millisecond, Limit: 2, Window: 200 * time.Millisecond, Workers: 5}
	realClock(t, func() (late []string) {
		res, _ := mustRun(t, cfg)
		check := func(mode string, starts []time.Duration, action time.Duration) {
			for i, s := range starts {
				earliest := time.Duration(i/2)*cfg.Window + time.Duration(i%2)*action
				if s < earliest {
					t.Fatalf("%s start %d at %v, before %v", mode, i+1, s, earliest)
				}
				if s > earliest+cfg.Window/2 {
					late = append(late, fmt.Sprintf("%s start %d at %v, want by %v", mode, i+1, s, earliest+cfg.Window/2))
				}
			}
		}
		var seq, par []time.Duration
		for i := range res.Sequential {
			seq = append(seq, res.Sequential[i].Start)
			par = append(par, res.Parallel[i].Start)
		}
		check("sequential", seq, cfg.Action)
		check("parallel", slices.Sorted(slices.Values(par)), 0)
		return late
	})
}

// realClock runs attempt up to three times, until a run finds nothing late.
// Lateness is the machine's, not the limiter's (a stall of the test's
// goroutines); a real violation fails inside attempt, at once.
func realClock(t *testing.T, attempt func() (late []string)) {
	t.Helper()
	for i := 1; i <= 3; i++ {
		late := attempt()
		if len(late) == 0 {
			return
		}
		t.Logf("run %d of 3 found, on this machine: %s", i, strings.Join(late, "; "))
	}
	t.Errorf("every run of 3 was late (see the log)")
}

// TestBoundCheck checks the check: it reports starts over the bound only
// when their grants were over it, however late (up to the slack) each was
// stamped. Grants exactly a window apart, the earlier ones stamped later, as
// happens on the real clock, keep the bound, though a count over windows of
// the full length sees one start too many.
func TestBoundCheck(t *testing.T) {
	cfg := config{Limit: 2, Window: time.Second}
	s := slack(cfg.Window)
	rows := func(starts ...time.Duration) []row {
		rs := make([]row, len(starts))
		for i, st := range starts {
			rs[i] = row{st, st}
		}
		return rs
	}
	// Granted at 0, 0, 1 s, 1 s; the first two stamped the slack late.
	kept := []time.Duration{s, s, time.Second, time.Second}
	if n := peak(kept, cfg.Window); n != 4 {
		t.Fatalf("a count over full windows sees %d, want 4 (the case the check exists for)", n)
	}
	if err := printTable(io.Discard, "", cfg, rows(kept...)); err != nil {
		t.Errorf("starts granted within the bound, stamped up to the slack late: %v", err)
	}
	// Granted at 0, 0 and one more just under the measured window later.
	over := []time.Duration{0, 0, cfg.Window - s - time.Nanosecond}
	if err := printTable(io.Discard, "", cfg, rows(over...)); err == nil {
		t.Error("3 grants within the window minus the slack: no violation reported")
	}
}

// TestCLI runs the command line as a user would type it: -h answers with the
// usage and status 0; unknown flags, bad values and arguments fail with
// status 2 and a message that names what was wrong; a good command line
// runs (on a virtual clock) and succeeds.
func TestCLI(t *testing.T) {
	testCLI(t, []cliCase{
		{args: []string{"-h"}, out: "Usage: rategate [flags]"},
		{args: []string{"-help"}, out: "-workers int"},
		{args: []string{"-bogus"}, code: 2, err: "flag provided but not defined: -bogus"},
		{args: []string{"extra"}, code: 2, err: `unexpected argument "extra": it takes only flags`},
		{args: []string{"-iterations", "0"}, code: 2, err: "-iterations must be from 1 to 1000, got 0"},
		{args: []string{"-iterations", "ten"}, code: 2, err: `invalid value "ten" for flag -iterations`},
		{args: []string{"-action", "0s"}, code: 2, err: "-action must be a positive duration such as 100ms, got 0s"},
		{args: []string{"-action", "0s", "-workers", "0"}, code: 2, err: "-action must be a positive duration such as 100ms, got 0s\n-workers must be from 1 to 1000, got 0"},
		{args: []string{"-rate", "2/fortnight"}, code: 2, err: `bad -rate: limiter: parse rate "2/fortnight": unknown unit "fortnight"`},
		{args: []string{"-rate", "2"}, code: 2, err: "want N/unit or N/duration"},
		{args: []string{"-rate", "1001/s"}, code: 2, err: "-rate must allow at most 1000 starts per window, got 1001\n"},
		{args: []string{"-rate", "9999999/s"}, code: 2, err: "-rate must allow at most 1000 starts per window, got 9999999\n"},
		{args: []string{"-iterations", "3", "-rate", "1/s", "-action", "100ms", "-workers", "2"}, out: "        3   2.000s   2.100s\nMost starts in any 1s window: 1 (bound 1). Done at 2.100s."},
	})
}

// mustRun runs the program's work with cfg, logs what it printed, and stops
// the test if it failed.
func mustRun(t *testing.T, cfg config) (result, string) {
	t.Helper()
	var out bytes.Buffer
	res, err := run(t.Context(), &out, cfg)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res, out.String()
}

// contains reports each of lines that out lacks.
func contains(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q", line)
		}
	}
}

// cliCase is a command line and what it must do: its exit status, and text
// its stdout and stderr must contain ("" for anything).
type cliCase struct {
	args     []string
	code     int
	out, err string
}

// testCLI runs each case through cli in a synctest bubble. A case with
// status 2 must also print nothing on stdout, and end stderr with where to
// find the usage.
func testCLI(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		synctest.Test(t, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli(t.Context(), tc.args, &stdout, &stderr)
			o, e := stdout.String(), stderr.String()
			if code != tc.code || !strings.Contains(o, tc.out) || !strings.Contains(e, tc.err) {
				t.Errorf("%q: status %d, stdout %q, stderr %q; want status %d, %q in stdout, %q in stderr", tc.args, code, o, e, tc.code, tc.out, tc.err)
			}
			if tc.code == 2 && (o != "" || !strings.HasSuffix(e, "Run 'rategate -h' for usage.\n")) {
				t.Errorf("%q: stdout %q, stderr %q; want nothing on stdout, and where to find the usage", tc.args, o, e)
			}
		})
	}
}
