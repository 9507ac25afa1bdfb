package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestDemo runs the demo as `go run` does, on synctest's virtual clock: the
// four seconds pass at once, and every grant lands on its exact instant.
func TestDemo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := defaultConfig
		start := time.Now()
		res, out := mustRun(t, cfg)
		elapsed := time.Since(start)
		checkBounds(t, cfg, res, out)

		// Saturated, each limiter works at its bound: 5 a second for 20
		// grants is 3 s; one RetryAfter of 500 ms; 10 tasks of 100 ms, 3 at
		// a time, is 4 rounds.
		if want := 3*time.Second + 500*time.Millisecond + 400*time.Millisecond; elapsed != want {
			t.Errorf("the demo took %v, want %v", elapsed, want)
		}
	})
}

// TestDemoScaled runs the demo at another scale, to check that nothing in it
// depends on the default sizes.
func TestDemoScaled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config{
			Window:  30 * time.Millisecond,
			Limit:   3,
			Callers: 11,
			Burst:   2,
			Refill:  7,
			Slots:   2,
			Tasks:   7,
			Work:    3 * time.Millisecond,
		}
		res, out := mustRun(t, cfg)
		checkBounds(t, cfg, res, out)
	})
}

// TestRealClock runs the demo small on the real clock, where every grant is
// stamped a little after it was booked. The bound checks must pass (a count
// over full windows often failed here), and no sliding-log grant may come
// before the bound allows it: grant i at least (i/Limit)·Window after the
// start, exactly, since a stamp is never early. A grant may come late by up
// to half the window (100 ms): timers fire within a millisecond or two, and
// a loaded machine running -race stalls a goroutine for tens of
// milliseconds, not a hundred; a limiter that lost a wake-up would be a
// whole window late. A run that finds a grant late, or the bound not
// reached, is run again, up to three times: lateness is the machine's. An
// early grant, or one over the bound, fails at once.
func TestRealClock(t *testing.T) {
	cfg := config{Window: 200 * time.Millisecond, Limit: 3, Callers: 8, Burst: 2, Refill: 1, Slots: 2, Tasks: 4, Work: 20 * time.Millisecond}
	realClock(t, func() (late []string) {
		res, _ := mustRun(t, cfg)
		for i, at := range slices.Sorted(slices.Values(res.Offsets)) {
			earliest := time.Duration(i/cfg.Limit) * cfg.Window
			if at < earliest {
				t.Fatalf("sliding-log grant %d at %v, before %v", i+1, at, earliest)
			}
			if at > earliest+cfg.Window/2 {
				late = append(late, fmt.Sprintf("sliding-log grant %d at %v, want by %v", i+1, at, earliest+cfg.Window/2))
			}
		}
		if len(res.Offsets) != cfg.Callers || res.MaxInWindow > cfg.Limit {
			t.Fatalf("%d grants, at most %d in a window; want %d, and at most %d", len(res.Offsets), res.MaxInWindow, cfg.Callers, cfg.Limit)
		}
		if res.MaxInWindow < cfg.Limit {
			late = append(late, fmt.Sprintf("at most %d grants in a window, want the bound %d reached", res.MaxInWindow, cfg.Limit))
		}
		if res.Burst > cfg.Burst+1 || res.PeakInFlight < 1 || res.PeakInFlight > cfg.Slots {
			t.Fatalf("token bucket burst %d, peak in flight %d; want at most %d (a refill at most) and 1 to %d", res.Burst, res.PeakInFlight, cfg.Burst+1, cfg.Slots)
		}
		if res.Burst < 1 {
			late = append(late, fmt.Sprintf("token bucket burst %d, want at least 1", res.Burst))
		}
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

// TestBoundCheck checks the sliding log's check: it counts grants over the
// bound only when they were, however late (up to the slack) each was
// stamped. Grants exactly a window apart, the earlier stamped later, as
// happens on the real clock, keep the bound, though a count over windows of
// the full length sees one grant too many.
func TestBoundCheck(t *testing.T) {
	w := time.Second
	s := slack(w)
	kept := []time.Duration{s, s, w, w} // granted at 0, 0, 1 s, 1 s
	if n := peak(kept, w); n != 4 {
		t.Fatalf("a count over full windows sees %d, want 4 (the case the check exists for)", n)
	}
	if n := mostInWindow(kept, w); n != 2 {
		t.Errorf("granted 2 a window, stamped up to the slack late: counted %d, want 2", n)
	}
	if n := mostInWindow([]time.Duration{0, 0, w - s - 1}, w); n != 3 {
		t.Errorf("3 stamps within the window less the slack: counted %d, want 3", n)
	}
}

func checkBounds(t *testing.T, cfg config, res result, out string) {
	t.Helper()
	if len(res.Offsets) != cfg.Callers {
		t.Errorf("%d sliding-log grants, want %d", len(res.Offsets), cfg.Callers)
	}
	// On the virtual clock, grant i lands exactly at (i/Limit)·Window.
	for i, at := range slices.Sorted(slices.Values(res.Offsets)) {
		if want := time.Duration(i/cfg.Limit) * cfg.Window; at != want {
			t.Errorf("sliding-log grant %d at %v, want %v", i+1, at, want)
		}
	}
	if res.MaxInWindow != cfg.Limit {
		t.Errorf("most sliding-log grants in a window: %d, want exactly the bound %d", res.MaxInWindow, cfg.Limit)
	}
	if res.Burst != cfg.Burst {
		t.Errorf("token bucket granted %d at once, want its burst %d", res.Burst, cfg.Burst)
	}
	if res.PeakInFlight != cfg.Slots {
		t.Errorf("peak in flight %d, want exactly the bound %d", res.PeakInFlight, cfg.Slots)
	}
	contains(t, out,
		fmt.Sprintf("Most grants in any %v window: %d (bound %d).", cfg.Window, cfg.Limit, cfg.Limit),
		fmt.Sprintf("Peak in flight: %d (bound %d).", cfg.Slots, cfg.Slots),
		"TryAcquire: granted",
	)
}

// TestCLI runs the command line as a user would type it: -h answers with the
// usage and status 0; unknown flags, bad values and arguments fail with
// status 2 and a message that names what was wrong; a good command line
// runs (on a virtual clock) and succeeds.
func TestCLI(t *testing.T) {
	testCLI(t, []cliCase{
		{args: []string{"-h"}, out: "Usage: demo [flags]"},
		{args: []string{"-help"}, out: "-callers int"},
		{args: []string{"--bogus"}, code: 2, err: "flag provided but not defined: -bogus"},
		{args: []string{"extra"}, code: 2, err: `unexpected argument "extra": it takes only flags`},
		{args: []string{"-limit", "5", "extra"}, code: 2, err: `unexpected argument "extra"`},
		{args: []string{"-limit", "five"}, code: 2, err: `invalid value "five" for flag -limit`},
		{args: []string{"-window", "0s"}, code: 2, err: "-window must be a positive duration such as 100ms, got 0s"},
		{args: []string{"-limit", "0"}, code: 2, err: "-limit must be from 1 to 1000, got 0"},
		{args: []string{"-callers", "-3", "-work", "-1s"}, code: 2, err: "-callers must be from 1 to 10000, got -3\n-work must be a positive duration such as 100ms, got -1s"},
		{args: []string{"-burst", "0"}, code: 2, err: "-burst must be from 1 to 1000, got 0"},
		{args: []string{"-refill", "0"}, code: 2, err: "-refill must be from 1 to 1000, got 0"},
		{args: []string{"-slots", "0"}, code: 2, err: "-slots must be from 1 to 1000, got 0"},
		{args: []string{"-tasks", "100000"}, code: 2, err: "-tasks must be from 1 to 10000, got 100000"},
		{args: []string{"-limit", "2", "-callers", "5", "-slots", "1", "-tasks", "2"}, out: "Most grants in any 1s window: 2 (bound 2). All 5 took 2000 ms"},
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
			if tc.code == 2 && (o != "" || !strings.HasSuffix(e, "Run 'demo -h' for usage.\n")) {
				t.Errorf("%q: stdout %q, stderr %q; want nothing on stdout, and where to find the usage", tc.args, o, e)
			}
		})
	}
}
