package window

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPeak(t *testing.T) {
	const ms, s = time.Millisecond, time.Second
	for _, tc := range []struct {
		instants []time.Duration
		width    time.Duration
		want     int
	}{
		{nil, s, 0},
		{[]time.Duration{0}, s, 1},
		{[]time.Duration{0}, 0, 0},
		{[]time.Duration{0, 0, 0}, s, 3},
		{[]time.Duration{0, s - 1, s, 2 * s}, s, 2},
		{[]time.Duration{2 * s, 0, 0, s - 1}, s, 3},        // any order
		{[]time.Duration{0, s, 2 * s}, s, 1},               // width apart: never together
		{[]time.Duration{0, 0, 999 * ms, 1000 * ms}, s, 3}, // the window starting at 0
		{[]time.Duration{1000 * ms, 0, 999 * ms, 1999 * ms}, s, 2},
		{[]time.Duration{5 * ms, 5 * ms, 5 * ms}, ms, 3},
		{[]time.Duration{-s, -s / 2, 0}, s, 2},        // offsets before the origin
		{[]time.Duration{0, 10 * ms, 20 * ms}, -s, 0}, // no window
	} {
		in := slices.Clone(tc.instants)
		if got := Peak(tc.instants, tc.width); got != tc.want {
			t.Errorf("Peak(%v, %v) = %d, want %d", tc.instants, tc.width, got, tc.want)
		}
		if !slices.Equal(in, tc.instants) {
			t.Errorf("Peak changed its argument: %v, was %v", tc.instants, in)
		}
	}
}

// TestPeakBruteForce compares Peak with a count of the instants in the
// window that starts at each instant (a busiest window can always be moved
// to start at one), on random instants.
func TestPeakBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		ts := make([]time.Duration, r.IntN(30))
		for i := range ts {
			ts[i] = time.Duration(r.IntN(50))
		}
		width := time.Duration(1 + r.IntN(20))
		want := 0
		for _, a := range ts {
			n := 0
			for _, b := range ts {
				if a <= b && b < a+width {
					n++
				}
			}
			want = max(want, n)
		}
		if got := Peak(ts, width); got != want {
			t.Fatalf("Peak(%v, %v) = %d, want %d", ts, width, got, want)
		}
	}
}
