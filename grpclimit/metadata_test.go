package grpclimit

import (
	"strings"
	"testing"
	"time"

	"github.com/rategate/rategate/internal/ratelimit"
	"github.com/rategate/rategate/limiter"
)

// The quota metadata is what httplimit states in HTTP: q/w over the fewest
// whole seconds that make the rate exact, a token bucket's burst, a
// concurrency limit's "concurrent-requests", each policy of a limiter of
// several, and, on a refusal, the delay rounded up as t.
func TestQuotaMetadata(t *testing.T) {
	one := func(q limiter.Quota, burst int64) []ratelimit.Quota {
		return []ratelimit.Quota{{Quota: q, Burst: burst}}
	}
	for _, tc := range []struct {
		ps             []ratelimit.Quota
		retry          time.Duration
		policy, limits string
	}{
		{one(limiter.Quota{Limit: 100, Window: time.Minute, Remaining: 42, Reset: 17 * time.Second}, 0), 0, `"default";q=100;w=60`, `"default";r=42;t=17`},
		{one(limiter.Quota{Limit: 1, Window: 100 * time.Millisecond, Reset: 60 * time.Millisecond}, 0), 60 * time.Millisecond, `"default";q=10;w=1`, `"default";r=0;t=1`},
		{one(limiter.Quota{Limit: 3, Window: 1500 * time.Millisecond, Remaining: 1, Reset: 2500 * time.Millisecond}, 0), 0, `"default";q=2;w=1`, `"default";r=1;t=3`},
		{one(limiter.Quota{Limit: 5, Window: 500 * time.Millisecond, Remaining: 5}, 5), 0, `"default";q=10;w=1;burst=5`, `"default";r=5;t=0`},
		{one(limiter.Quota{Limit: 8, Remaining: 5}, 0), 0, `"default";q=8;qu="concurrent-requests"`, `"default";r=5`},
		{one(limiter.Quota{Limit: 8}, 0), 1500 * time.Millisecond, `"default";q=8;qu="concurrent-requests"`, `"default";r=0;t=2`},
		{[]ratelimit.Quota{{Quota: limiter.Quota{Limit: 10, Window: time.Second, Remaining: 4}}, {Quota: limiter.Quota{Limit: 1000, Window: time.Hour, Remaining: 2, Reset: time.Minute}}}, 0,
			`"default-1";q=10;w=1, "default-2";q=1000;w=3600`, `"default-2";r=2;t=60`},
	} {
		md := quotaMetadata(ratelimit.PolicyName(""), tc.ps, ratelimit.MostConstrained(tc.ps), tc.retry)
		if got := md.Get(MetadataPolicy); len(got) != 1 || got[0] != tc.policy {
			t.Errorf("%+v: policy %q, want %q", tc.ps, got, tc.policy)
		}
		if got := md.Get(MetadataRateLimit); len(got) != 1 || got[0] != tc.limits {
			t.Errorf("%+v: ratelimit %q, want %q", tc.ps, got, tc.limits)
		}
	}
	long := strings.Repeat("p", 200)
	md := quotaMetadata(ratelimit.PolicyName(long), one(limiter.Quota{Limit: 1, Window: time.Second}, 0), 0, 0)
	if got := md.Get(MetadataPolicy)[0]; got != `"`+long+`";q=1;w=1` {
		t.Errorf("a long policy name: %q", got)
	}
}
