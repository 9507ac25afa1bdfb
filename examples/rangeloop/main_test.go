package main

import (
	"bytes"
	"context"
	"errors"
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

// TestRangeLoop: 20 items at 5 per second come through
// in groups of 5 at exactly 0, 1, 2 and 3 s.
func TestRangeLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		res, out := clitest.MustRun(t, run, defaultConfig)
		if elapsed := time.Since(start); elapsed != 3*time.Second {
			t.Errorf("the loop took %v, want 3s", elapsed)
		}
		check(t, defaultConfig, res)
		clitest.Contains(t, out,
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
	clitest.Run(t, "rangeloop", cli, []clitest.Case{
		{Args: []string{"-h"}, Out: "Usage: rangeloop [flags]"},
		{Args: []string{"--help"}, Out: "-rate string"},
		{Args: []string{"-bogus"}, Code: 2, Err: "flag provided but not defined: -bogus"},
		{Args: []string{"extra"}, Code: 2, Err: `unexpected argument "extra": it takes only flags`},
		{Args: []string{"-items", "3", "extra"}, Code: 2, Err: `unexpected argument "extra"`},
		{Args: []string{"-items", "many"}, Code: 2, Err: `invalid value "many" for flag -items`},
		{Args: []string{"-items", "0"}, Code: 2, Err: "-items must be from 1 to 1000, got 0"},
		{Args: []string{"-items", "1001"}, Code: 2, Err: "-items must be from 1 to 1000, got 1001"},
		{Args: []string{"-rate", "5"}, Code: 2, Err: `bad -rate: limiter: parse rate "5": want N/unit or N/duration, as in 100/s`},
		{Args: []string{"-rate", "5/fortnight"}, Code: 2, Err: `unknown unit "fortnight"`},
		{Args: []string{"-rate", "0/s"}, Code: 2, Err: `bad -rate: limiter: parse rate "0/s": count "0" is not a positive integer`},
		{Args: []string{"-rate", "5000/s"}, Code: 2, Err: "-rate must let at most 1000 items through per window, got 1001"},
		{Args: []string{"-items", "7", "-rate", "3/500ms"}, Out: "  item  7 at  1.000 s\n7 items in 1.000 s; most in any 500ms window: 3 (limit 3)."},
	})
}
