package grpclimit

import (
	"strings"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

func TestParseRateLimit(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		r, t int64
		ok   bool
	}{
		{nil, 0, 0, false},
		{[]string{`"default";r=42;t=17`}, 42, 17, true},
		{[]string{`"a";r=5;t=1, "b";r=2;t=60`}, 2, 60, true},
		{[]string{`"a";r=2;t=1`, `"b";r=2;t=60`}, 2, 60, true},
		{[]string{`"q\"uoted, name";r=3;t=4`}, 3, 4, true},
		{[]string{`"d";r=1;t=2;pk=:YWJj:`}, 1, 2, true},
		{[]string{`"d";r=1`}, 1, 0, true},
		{[]string{` "d" ; r=1 ; t=2 `}, 1, 2, true},
		{[]string{`"d";t=2`}, 0, 0, false},
		{[]string{`d;r=1;t=2`}, 0, 0, false},
		{[]string{`"d";r=-1;t=2`}, 0, 0, false},
		{[]string{`"d";r=1;t=x`}, 0, 0, false},
		{[]string{`"d";r=99999999999999999999`}, 0, 0, false},
		{[]string{`"d"r=1`}, 0, 0, false},
		{[]string{`"d`}, 0, 0, false},
		{[]string{`"a";r=1, garbage`}, 0, 0, false},
	} {
		r, tt, ok := parseRateLimit(tc.in)
		if r != tc.r || tt != tc.t || ok != tc.ok {
			t.Errorf("parseRateLimit(%q) = %d, %d, %v; want %d, %d, %v", tc.in, r, tt, ok, tc.r, tc.t, tc.ok)
		}
	}
}

// What the server sends, the client reads back.
func TestQuotaMetadataRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		q      limiter.Quota
		retry  time.Duration
		policy string
		r, t   int64
	}{
		{limiter.Quota{Limit: 100, Window: time.Minute, Remaining: 42, Reset: 17 * time.Second}, 0, `"default";q=100;w=60`, 42, 17},
		{limiter.Quota{Limit: 1, Window: 100 * time.Millisecond, Remaining: 0, Reset: 60 * time.Millisecond}, 60 * time.Millisecond, `"default";q=10;w=1`, 0, 1},
		{limiter.Quota{Limit: 3, Window: 1500 * time.Millisecond, Remaining: 1, Reset: 2500 * time.Millisecond}, 0, `"default";q=4;w=2`, 1, 3},
		{limiter.Quota{Limit: 8, Remaining: 5}, 0, `"default";q=8;qu="concurrent-requests"`, 5, 0},
		{limiter.Quota{Limit: 8}, 1500 * time.Millisecond, `"default";q=8;qu="concurrent-requests"`, 0, 2},
	} {
		md := quotaMetadata(quoteString("default"), tc.q, tc.retry)
		if got := md.Get(MetadataPolicy); len(got) != 1 || got[0] != tc.policy {
			t.Errorf("%+v: policy %q, want %q", tc.q, got, tc.policy)
		}
		r, tt, ok := parseRateLimit(md.Get(MetadataRateLimit))
		if !ok || r != tc.r || tt != tc.t {
			t.Errorf("%+v: ratelimit %q reads %d, %d, %v; want %d, %d", tc.q, md.Get(MetadataRateLimit), r, tt, ok, tc.r, tc.t)
		}
	}
	long := strings.Repeat("p", 200)
	md := quotaMetadata(quoteString(long), limiter.Quota{Limit: 1, Window: time.Second}, 0)
	if got := md.Get(MetadataPolicy)[0]; got != `"`+long+`";q=1;w=1` {
		t.Errorf("a long policy name: %q", got)
	}
}

func FuzzParseRateLimit(f *testing.F) {
	for _, s := range []string{`"default";r=42;t=17`, `"a";r=5;t=1, "b";r=2;t=60`, `"q\"x";r=1`, `"d";pk=:YWJj:;r=0;t=9223372036854775807`, `,`, `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r, tt, ok := parseRateLimit([]string{v})
		if !ok && (r != 0 || tt != 0) {
			t.Fatalf("not ok, but %d, %d", r, tt)
		}
		if r < 0 || tt < 0 {
			t.Fatalf("negative: %d, %d", r, tt)
		}
	})
}
