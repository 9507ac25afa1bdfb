package main

import (
	"bytes"
	"context"
	"errors"
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

// TestRangeLoop: 20 items at 5 per second come through
// in groups of 5 at exactly 0, 1, 2 and 3 s.
func TestRangeLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		res, out := mustRun(t, defaultConfig)
		if elapsed := time.Since(start); elapsed != 3*time.Second {
			t.Errorf("the loop took %v, want 3s", elapsed)
		}
		check(t, defaultConfig, res)
		contains(t, out,
			"  item  1 at  0.000 s\n",
			"  item  5 at  0.000 s\n",
			"  item  6 at  1.000 s\n",
			"  item 16 at  3.000 s\n",
			"  item 20 at  3.000 s\n",
			"20 items in 3.000 s; most in any 1s window: 5 (limit 5).\n",
		)
	})
}

func TestRangeLoopScaled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config{Items: 11, Limit: 3, Window: 70 * time.Millisecond}
		var out bytes.Buffer
		res, err := run(t.Context(), &out, cfg)
		if err != nil {
			t.Fatal(err)
		}
		check(t, cfg, res)
	})
}

func check(t *testing.T, cfg config, res result) {
	t.Helper()
	want := make([]int, cfg.Items)
	for i := range want {
		want[i] = i + 1
	}
	if !slices.Equal(res.Items, want) {
		t.Errorf("items %v, want 1..%d in order", res.Items, cfg.Items)
	}
	for i, at := range res.Offsets {
		if want := time.Duration(i/cfg.Limit) * cfg.Window; at != want {
			t.Errorf("item %d at %v, want %v", i+1, at, want)
		}
	}
	if res.MaxInWindow != cfg.Limit {
		t.Errorf("most in a window %d, want exactly the limit %d", res.MaxInWindow, cfg.Limit)
	}
}

// TestRealClock runs a small loop on the real clock, where every item is
// stamped a little after its grant. The bound check must pass (a count over
// full windows often failed here), and no item may
// come before the limit allows it: item i at least (i/Limit)·Window after
// the start, exactly, since a stamp is never early. An item may come late by
// up to half the window (100 ms): timers fire within a millisecond or two,
// and a loaded machine running -race stalls a goroutine for tens of
// milliseconds, not a hundred; a limiter that lost a wake-up would be a
// whole window late. A run that finds a grant late, or the bound not
// reached, is run again, up to three times: lateness is the machine's. An
// early grant, or one over the bound, fails at once.
func TestRealClock(t *testing.T) {
	cfg := config{Items: 10, Limit: 4, Window: 200 * time.Millisecond}
	realClock(t, func() (late []string) {
		res, _ := mustRun(t, cfg)
		if len(res.Offsets) != cfg.Items || res.MaxInWindow > cfg.Limit {
			t.Fatalf("%d items, at most %d in a window; want %d, and at most %d", len(res.Offsets), res.MaxInWindow, cfg.Items, cfg.Limit)
		}
		if res.MaxInWindow < cfg.Limit {
			late = append(late, fmt.Sprintf("at most %d items in a window, want the limit %d reached", res.MaxInWindow, cfg.Limit))
		}
		for i, at := range res.Offsets {
			earliest := time.Duration(i/cfg.Limit) * cfg.Window
			if at < earliest {
				t.Fatalf("item %d at %v, before %v", i+1, at, earliest)
			}
			if at > earliest+cfg.Window/2 {
				late = append(late, fmt.Sprintf("item %d at %v, want by %v", i+1, at, earliest+cfg.Window/2))
			}
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

// TestBoundCheck checks the check: it counts items over the limit only when
// their grants were, however late (up to the slack) each was stamped. Grants
// exactly a window apart, the earlier stamped later, as happens on the real
// clock, keep the limit, though a count over windows of the full length sees
// one item too many.
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

// TestRangeLoopDeadline: a deadline the limiter foresees ends the loop at
// once, and run says so although ctx.Err() is still nil then.
func TestRangeLoopDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		start := time.Now()
		res, err := run(ctx, &bytes.Buffer{}, defaultConfig)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("run: %v, want a deadline error", err)
		}
		if len(res.Items) != 10 || time.Since(start) != time.Second {
			t.Errorf("%d items, ended at %v; want 10 at 1s (the 11th could pass only at 2s)", len(res.Items), time.Since(start))
		}
	})
}

// TestCLI runs the command line as a user would type it: -h answers with the
// usage and status 0; unknown flags, bad values and arguments fail with
// status 2 and a message that names what was wrong; a good command line
// runs (on a virtual clock) and succeeds.
func TestCLI(t *testing.T) {
	testCLI(t, []cliCase{
		{args: []string{"-h"}, out: "Usage: rangeloop [flags]"},
		{args: []string{"--help"}, out: "-rate string"},
		{args: []string{"-bogus"}, code: 2, err: "flag provided but not defined: -bogus"},
		{args: []string{"extra"}, code: 2, err: `unexpected argument "extra": it takes only flags`},
		{args: []string{"-items", "3", "extra"}, code: 2, err: `unexpected argument "extra"`},
		{args: []string{"-items", "many"}, code: 2, err: `invalid value "many" for flag -items`},
		{args: []string{"-items", "0"}, code: 2, err: "-items must be from 1 to 1000, got 0"},
		{args: []string{"-items", "1001"}, code: 2, err: "-items must be from 1 to 1000, got 1001"},
		{args: []string{"-rate", "5"}, code: 2, err: `bad -rate: limiter: parse rate "5": want N/unit or N/duration, as in 100/s`},
		{args: []string{"-rate", "5/fortnight"}, code: 2, err: `unknown unit "fortnight"`},
		{args: []string{"-rate", "0/s"}, code: 2, err: `bad -rate: limiter: parse rate "0/s": count "0" is not a positive integer`},
		{args: []string{"-rate", "5000/s"}, code: 2, err: "-rate must let at most 1000 items through per window, got 5000\n"},
		{args: []string{"-rate", "9999999/s"}, code: 2, err: "-rate must let at most 1000 items through per window, got 9999999\n"},
		{args: []string{"-items", "7", "-rate", "3/500ms"}, out: "  item  7 at  1.000 s\n7 items in 1.000 s; most in any 500ms window: 3 (limit 3)."},
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
			if tc.code == 2 && (o != "" || !strings.HasSuffix(e, "Run 'rangeloop -h' for usage.\n")) {
				t.Errorf("%q: stdout %q, stderr %q; want nothing on stdout, and where to find the usage", tc.args, o, e)
			}
		})
	}
}
