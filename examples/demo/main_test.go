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
		var out bytes.Buffer
		start := time.Now()
		res, err := run(t.Context(), &out, cfg)
		elapsed := time.Since(start)
		t.Log("\n" + out.String())
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		checkBounds(t, cfg, res, out.String())

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
		var out bytes.Buffer
		res, err := run(t.Context(), &out, cfg)
		if err != nil {
			t.Log("\n" + out.String())
			t.Fatalf("run: %v", err)
		}
		checkBounds(t, cfg, res, out.String())
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
	for _, line := range []string{
		fmt.Sprintf("Most grants in any %v window: %d (bound %d).", cfg.Window, cfg.Limit, cfg.Limit),
		fmt.Sprintf("Peak in flight: %d (bound %d).", cfg.Slots, cfg.Slots),
		"TryAcquire: granted",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q", line)
		}
	}
}

func TestMaxInWindow(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		offsets []time.Duration
		win     time.Duration
		want    int
	}{
		{nil, time.Second, 0},
		{[]time.Duration{0}, time.Second, 1},
		{[]time.Duration{0, 0, 999 * ms, 1000 * ms}, time.Second, 3},
		{[]time.Duration{1000 * ms, 0, 999 * ms, 1999 * ms}, time.Second, 2},
		{[]time.Duration{0, 1000 * ms, 2000 * ms}, time.Second, 1},
		{[]time.Duration{5 * ms, 5 * ms, 5 * ms}, ms, 3},
	} {
		if got := maxInWindow(tc.offsets, tc.win); got != tc.want {
			t.Errorf("maxInWindow(%v, %v) = %d, want %d", tc.offsets, tc.win, got, tc.want)
		}
	}
}
