package ratelimit

import (
	"math"
	"net/http"
	"slices"
	"testing"
	"time"
)

// What the Transport reads of each dialect: the quota left and for how
// long, the pace of the policies; nothing from a malformed field.
func TestReadLimits(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	sec := time.Second
	for _, c := range []struct {
		name string
		h    http.Header
		left []quotaLeft
		pace time.Duration
		conc int64
	}{
		{"draft-11", http.Header{"Ratelimit": {`"default";r=50;t=30`}, "Ratelimit-Policy": {`"default";q=100;w=60`}}, []quotaLeft{{`"default`, 50, 30 * sec}}, 600 * time.Millisecond, 0},
		{"no t", http.Header{"Ratelimit": {`"default";r=50`}}, []quotaLeft{{`"default`, 50, defaultReset}}, 0, 0},
		{"several items", http.Header{"Ratelimit": {`"a";r=5;t=1, "b";r=2;t=60`}}, []quotaLeft{{`"a`, 5, sec}, {`"b`, 2, 60 * sec}}, 0, 0},
		{"two lines", http.Header{"Ratelimit": {`"a";r=5;t=1`, `"b";r=5;t=9`}}, []quotaLeft{{`"a`, 5, sec}, {`"b`, 5, 9 * sec}}, 0, 0},
		{"extensions", http.Header{"Ratelimit": {`"a,b";r=3;t=2;pk=:cHsd:;acme-x=1`}}, []quotaLeft{{`"a,b`, 3, 2 * sec}}, 0, 0},
		{"escaped name", http.Header{"Ratelimit": {`"esc\"aped";r=1;t=1`}}, []quotaLeft{{`"esc"aped`, 1, sec}}, 0, 0},
		{"token names", http.Header{"Ratelimit": {`default;r=4;t=2`}, "Ratelimit-Policy": {`default;q=10;w=1`}}, []quotaLeft{{`"default`, 4, 2 * sec}}, 100 * time.Millisecond, 0},
		{"slowest policy", http.Header{"Ratelimit-Policy": {`"burst";q=100;w=60, "daily";q=1000;w=86400`}}, nil, 86400 * time.Millisecond, 0},
		{"bytes are no pace", http.Header{"Ratelimit-Policy": {`"b";q=1000;w=1;qu="content-bytes"`}}, nil, 0, 0},
		{"concurrency", http.Header{"Ratelimit": {`"default";r=3`}, "Ratelimit-Policy": {`"default";q=8;qu="concurrent-requests"`}}, nil, 0, 8},
		{"t saturates", http.Header{"Ratelimit": {`"default";r=0;t=9223372037`}}, []quotaLeft{{`"default`, 0, Forever}}, 0, 0},
		{"draft-07", http.Header{"Ratelimit": {`limit=10, remaining=9, reset=1`}, "Ratelimit-Policy": {`10;w=1`}}, []quotaLeft{{"draft-07", 9, sec}}, 100 * time.Millisecond, 0},
		{"draft-06", http.Header{"Ratelimit-Limit": {`10, 10;w=1`}, "Ratelimit-Remaining": {"4"}, "Ratelimit-Reset": {"2"}}, []quotaLeft{{"draft-06", 4, 2 * sec}}, 100 * time.Millisecond, 0},
		{"x epoch", http.Header{"X-Ratelimit-Limit": {"60"}, "X-Ratelimit-Remaining": {"7"}, "X-Ratelimit-Reset": {"1700000042"}}, []quotaLeft{{"x-ratelimit", 7, 42 * sec}}, 0, 0},
		{"x epoch ms", http.Header{"X-Ratelimit-Remaining": {"7"}, "X-Ratelimit-Reset": {"1700000001500"}}, []quotaLeft{{"x-ratelimit", 7, 1500 * time.Millisecond}}, 0, 0},
		{"x epoch past", http.Header{"X-Ratelimit-Remaining": {"7"}, "X-Ratelimit-Reset": {"1699999999"}}, []quotaLeft{{"x-ratelimit", 7, 0}}, 0, 0},
		{"x delta", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"30"}}, []quotaLeft{{"x-ratelimit", 0, 30 * sec}}, 0, 0},
		{"x delta decimal", http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"0.25"}}, []quotaLeft{{"x-ratelimit", 0, 250 * time.Millisecond}}, 0, 0},
		{"none", http.Header{}, nil, 0, 0},
		{"string required", http.Header{"Ratelimit": {`5;r=5`}}, nil, 0, 0},
		{"r required", http.Header{"Ratelimit": {`"default";t=5`}}, nil, 0, 0},
		{"r non-negative", http.Header{"Ratelimit": {`"default";r=-1`}}, nil, 0, 0},
		{"r an integer", http.Header{"Ratelimit": {`"default";r=x`}}, nil, 0, 0},
		{"one bad item spoils the field", http.Header{"Ratelimit": {`"a";r=5, junk`}}, nil, 0, 0},
		{"unterminated", http.Header{"Ratelimit": {`"unterminated;r=5`}}, nil, 0, 0},
		{"x junk", http.Header{"X-Ratelimit-Remaining": {"a few"}, "X-Ratelimit-Reset": {"30"}}, nil, 0, 0},
	} {
		f := HeaderFields(c.h, false)
		got := Read(&f, now)
		if !slices.Equal(got.left, c.left) || got.pace != c.pace || got.concurrent != c.conc {
			t.Errorf("%s: %+v, want left %v pace %v concurrent %d", c.name, got, c.left, c.pace, c.conc)
		}
	}
}

// gRPC metadata, whose keys are lower case, reads as HTTP's fields do.
func TestReadMetadata(t *testing.T) {
	md := map[string][]string{"ratelimit": {`"a";r=5;t=1, "b";r=2;t=60`}, "ratelimit-policy": {`"a";q=10;w=1;burst=5`}}
	f := HeaderFields(md, true)
	got := Read(&f, time.Now())
	if want := []quotaLeft{{`"a`, 5, time.Second}, {`"b`, 2, time.Minute}}; !slices.Equal(got.left, want) || got.pace != 100*time.Millisecond || got.burst != 5 {
		t.Errorf("%+v", got)
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
		{3, 1500 * time.Millisecond, 1, 2, "the fewest whole seconds at the same rate"},
		{1, 2500 * time.Millisecond, 5, 2, "2 per 5 s"},
		{5, 300 * time.Millisecond, 3, 50, "LimitByIP(5, 300ms)"},
		{1, 1024, 2, 1953125, "2 s: 1e9/1024 is no whole number"},
		{1, 333333334, 34, 101, "no exact rate within an hour: 100 or more over whole seconds, rounded down"},
		{1, 3600*time.Second + 1, 3601, 1, "too long to scale"},
		{1, 7 * time.Millisecond, 7, 1000, "1 per 7 ms"},
		{1 << 62, 1500 * time.Millisecond, 2, 6148914691236517205, "large: 2^64/3"},
		{1 << 62, 100 * time.Millisecond, 1, 1 << 62, "overflow: the stated limit"},
		{math.MaxInt64, 1500 * time.Millisecond, 2, math.MaxInt64, "overflow of the quotient"},
	} {
		if w, q := PolicyWindow(c.limit, c.window); w != c.w || q != c.q {
			t.Errorf("%s: PolicyWindow(%d, %v) = %d, %d; want %d, %d", c.comment, c.limit, c.window, w, q, c.w, c.q)
		}
	}
	for d, want := range map[time.Duration]int64{0: 0, -1: 0, 1: 1, time.Second: 1, time.Second + 1: 2, 2500 * time.Millisecond: 3} {
		if got := CeilSeconds(d); got != want {
			t.Errorf("CeilSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// FuzzReadLimits: any field values read without panic, and what is read
// is non-negative.
func FuzzReadLimits(f *testing.F) {
	for _, s := range []string{`"default";r=50;t=30`, `"a";r=5, "b";r=2;t=60`, `limit=1, remaining=0, reset=9`, `junk`, `"a";r=-1`, `10;w=1`, `1700000000`} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		h := http.Header{"Ratelimit": {a}, "Ratelimit-Policy": {b}, "Ratelimit-Remaining": {a}, "Ratelimit-Reset": {b},
			"X-Ratelimit-Remaining": {a}, "X-Ratelimit-Reset": {b}, "Ratelimit-Limit": {b}}
		fs := HeaderFields(h, false)
		got := Read(&fs, time.Unix(1_700_000_000, 0))
		for _, l := range got.left {
			if l.r < 0 || l.t < 0 {
				t.Errorf("%q %q: %+v", a, b, got)
			}
		}
		if got.pace < 0 || got.concurrent < 0 {
			t.Errorf("%q %q: %+v", a, b, got)
		}
	})
}
