package main

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/internal/clitest"
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
		res, out := clitest.MustRun(t, run, cfg)
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
		res, out := clitest.MustRun(t, run, cfg)
		checkBounds(t, cfg, res, out)
	})
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
	clitest.Contains(t, out,
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
	clitest.Run(t, "demo", cli, []clitest.Case{
		{Args: []string{"-h"}, Out: "Usage: demo [flags]"},
		{Args: []string{"-help"}, Out: "-callers int"},
		{Args: []string{"--bogus"}, Code: 2, Err: "flag provided but not defined: -bogus"},
		{Args: []string{"extra"}, Code: 2, Err: `unexpected argument "extra": it takes only flags`},
		{Args: []string{"-limit", "5", "extra"}, Code: 2, Err: `unexpected argument "extra"`},
		{Args: []string{"-limit", "five"}, Code: 2, Err: `invalid value "five" for flag -limit`},
		{Args: []string{"-window", "0s"}, Code: 2, Err: "-window must be a positive duration such as 100ms, got 0s"},
		{Args: []string{"-limit", "0"}, Code: 2, Err: "-limit must be from 1 to 1000, got 0"},
		{Args: []string{"-callers", "-3", "-work", "-1s"}, Code: 2, Err: "-callers must be from 1 to 10000, got -3\n-work must be a positive duration such as 100ms, got -1s"},
		{Args: []string{"-burst", "0"}, Code: 2, Err: "-burst must be from 1 to 1000, got 0"},
		{Args: []string{"-refill", "0"}, Code: 2, Err: "-refill must be from 1 to 1000, got 0"},
		{Args: []string{"-slots", "0"}, Code: 2, Err: "-slots must be from 1 to 1000, got 0"},
		{Args: []string{"-tasks", "100000"}, Code: 2, Err: "-tasks must be from 1 to 10000, got 100000"},
		{Args: []string{"-limit", "2", "-callers", "5", "-slots", "1", "-tasks", "2"}, Out: "Most grants in any 1s window: 2 (bound 2). All 5 took 2000 ms"},
	})
}
