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

func TestMaxInWindow(t *testing.T) {
	s := time.Second
	if got := maxInWindow([]time.Duration{0, s - 1, s, 2 * s}, s); got != 2 {
		t.Errorf("got %d, want 2", got)
	}
	if got := maxInWindow([]time.Duration{0, 0, 0}, s); got != 3 {
		t.Errorf("got %d, want 3", got)
	}
}
