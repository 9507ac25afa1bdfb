package httplimit

import (
	"math"
	"net/http"
	"testing"
	"time"
)

// The RateLimit field as the Transport reads it: the most restrictive
// item, and nothing from a malformed field.
func TestParseRateLimit(t *testing.T) {
	for _, c := range []struct {
		vals  []string
		r, t  int64
		known bool
	}{
		{[]string{`"default";r=50;t=30`}, 50, 30, true},
		{[]string{`"default";r=50`}, 50, 0, true},
		{[]string{`"a";r=5;t=1, "b";r=2;t=60`}, 2, 60, true},
		{[]string{`"a";r=5;t=1`, `"b";r=5;t=9`}, 5, 9, true},
		{[]string{`"a,b";r=3;t=2;pk=:cHsd:;acme-x=1`}, 3, 2, true},
		{[]string{`"esc\"aped";r=1;t=1`}, 1, 1, true},
		{nil, 0, 0, false},
		{[]string{`default;r=5`}, 0, 0, false},    // the item must be a string
		{[]string{`"default";t=5`}, 0, 0, false},  // r is required
		{[]string{`"default";r=-1`}, 0, 0, false}, // non-negative
		{[]string{`"default";r=x`}, 0, 0, false},
		{[]string{`"a";r=5, junk`}, 0, 0, false}, // one bad item spoils the field
		{[]string{`"unterminated;r=5`}, 0, 0, false},
	} {
		h := http.Header{"Ratelimit": c.vals}
		r, tt, ok := parseRateLimit(h)
		if ok != c.known || (ok && (r != c.r || tt != c.t)) {
			t.Errorf("%q: r=%d t=%d %v; want r=%d t=%d %v", c.vals, r, tt, ok, c.r, c.t, c.known)
		}
	}
}

func TestPolicyWindow(t *testing.T) {
	for _, c := range []struct {
		limit   int64
		window  time.Duration
		w, q    int64
		comment string
	}{
		{100, time.Minute, 60, 100, "whole seconds: as is"},
		{1, 100 * time.Millisecond, 1, 10, "a pacer of 10/s"},
		{3, 1500 * time.Millisecond, 2, 4, "2 s at the same rate"},
		{1, 2500 * time.Millisecond, 3, 1, "rounded down"},
		{1 << 62, 1500 * time.Millisecond, 2, 6148914691236517205, "large: 2^64/3"},
		{1 << 62, 100 * time.Millisecond, 1, 1 << 62, "overflow: the stated limit"},
		{math.MaxInt64, 1500 * time.Millisecond, 2, math.MaxInt64, "overflow of the quotient"},
	} {
		if w, q := policyWindow(c.limit, c.window); w != c.w || q != c.q {
			t.Errorf("%s: policyWindow(%d, %v) = %d, %d; want %d, %d", c.comment, c.limit, c.window, w, q, c.w, c.q)
		}
	}
	for d, want := range map[time.Duration]int64{0: 0, -1: 0, 1: 1, time.Second: 1, time.Second + 1: 2, 2500 * time.Millisecond: 3} {
		if got := ceilSeconds(d); got != want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// FuzzParseRateLimit: any field value parses without panic, and what is
// read is non-negative.
func FuzzParseRateLimit(f *testing.F) {
	for _, s := range []string{`"default";r=50;t=30`, `"a";r=5, "b";r=2;t=60`, `"x\"y";r=1`, `junk`, `"a";r=-1`, `",";r=1`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r, tt, ok := parseRateLimit(http.Header{"Ratelimit": {v}})
		if ok && (r < 0 || tt < 0) {
			t.Errorf("%q: r=%d t=%d", v, r, tt)
		}
		if !ok && (r != 0 || tt != 0) {
			t.Errorf("%q: not read, yet r=%d t=%d", v, r, tt)
		}
	})
}
