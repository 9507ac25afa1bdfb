package ratelimit

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rategate/rategate/internal/exact"
	"github.com/rategate/rategate/limiter"
)

// Quota is one policy's quota as the fields state it.
type Quota struct {
	limiter.Quota
	// Burst is, for a limiter whose permits come back continuously (a
	// token bucket), the requests that may arrive at once and then be
	// spread at the policy's pace: its Burst. 0 for the others.
	Burst int64
}

// quotaAppender is implemented by a limiter made of several policies, such
// as a chain: it appends one Quota per member.
type quotaAppender interface {
	AppendQuotas(dst []limiter.Quota) []limiter.Quota
}

// AppendQuotas appends to dst the quota of each of lim's policies: one, or
// one per member of a limiter that appends several (none when the limiter
// cannot say).
func AppendQuotas(dst []Quota, lim limiter.Limiter) []Quota {
	if a, ok := lim.(quotaAppender); ok {
		var qs [4]limiter.Quota
		for _, q := range a.AppendQuotas(qs[:0]) {
			dst = Append(dst, q, false)
		}
		return dst
	}
	q, _ := limiter.QuotaOf(lim)
	return Append(dst, q, q.Limit > 1 && q.Window > 0 && Continuous(lim))
}

// Append appends q unless it is the zero Quota; continuous says that its
// permits come back continuously (a token bucket), so that its burst is
// stated.
func Append(dst []Quota, q limiter.Quota, continuous bool) []Quota {
	if q == (limiter.Quota{}) {
		return dst
	}
	p := Quota{Quota: q}
	if continuous && q.Limit > 1 && q.Window > 0 {
		p.Burst = q.Limit
	}
	return append(dst, p)
}

// Continuous reports whether lim's permits come back continuously, one at
// a time, as a token bucket's do: whether it is a limiter.Foreseer that
// can foresee.
func Continuous(lim limiter.Limiter) bool {
	switch l := lim.(type) {
	case *limiter.TokenBucket:
		return true
	case limiter.Foreseer:
		_, ok := l.Foresee(0)
		return ok
	}
	return false
}

// MostConstrained returns the index of the quota with the fewest permits
// remaining (of those with as few, the longest reset).
func MostConstrained(ps []Quota) int {
	best := 0
	for i := 1; i < len(ps); i++ {
		if p, b := ps[i].Quota, ps[best].Quota; p.Remaining < b.Remaining || (p.Remaining == b.Remaining && p.Reset > b.Reset) {
			best = i
		}
	}
	return best
}

// The fields, in the syntax of draft-ietf-httpapi-ratelimit-headers (-09
// to -11):
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=50;t=30
//
// Each quota is a policy of its own, named after the policy (a
// structured-field String, see PolicyName) with "-1", "-2", ... when there
// are several. q/w is the sustained rate over whole seconds (PolicyWindow);
// a token bucket's burst is its burst parameter; a limit of requests in
// flight (a Quota with no window) counts "concurrent-requests".

// AppendPolicy appends the RateLimit-Policy value of ps to b.
func AppendPolicy(b []byte, name string, ps []Quota) []byte {
	for i, p := range ps {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendName(b, name, i, len(ps))
		b = append(b, ";q="...)
		if p.Window <= 0 {
			b = strconv.AppendInt(b, p.Limit, 10)
			b = append(b, `;qu="concurrent-requests"`...)
			continue
		}
		w, quota := PolicyWindow(p.Limit, p.Window)
		b = strconv.AppendInt(b, quota, 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, w, 10)
		if p.Burst > 1 {
			b = append(b, ";burst="...)
			b = strconv.AppendInt(b, p.Burst, 10)
		}
	}
	return b
}

// AppendLimit appends the RateLimit value of ps[mc] (the most constrained)
// to b: its remaining quota and the seconds until it is whole again, or,
// for a refusal (retry > 0), retry seconds, so that the field does not end
// before Retry-After.
func AppendLimit(b []byte, name string, ps []Quota, mc int, retry int64) []byte {
	q := ps[mc].Quota
	b = appendName(b, name, mc, len(ps))
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, q.Remaining, 10)
	t := CeilSeconds(q.Reset)
	if retry > 0 {
		t = retry
	}
	if q.Window > 0 || retry > 0 {
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, t, 10)
	}
	return b
}

// appendName appends the name of policy i of n: name (a structured-field
// String), with "-1", "-2", ... when there are several.
func appendName(b []byte, name string, i, n int) []byte {
	if n == 1 {
		return append(b, name...)
	}
	b = append(b, name[:len(name)-1]...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(i+1), 10)
	return append(b, '"')
}

// PolicyName returns the policy name the fields state for name ("default"
// when empty) as a structured-field String (RFC 9651 §3.3.3): in double
// quotes, with '"' and '\' escaped. name is printable ASCII (see
// CheckPolicyName).
func PolicyName(name string) string {
	if name == "" {
		name = "default"
	}
	return quoteString(name)
}

// quoteString returns s as a structured-field String. s is printable ASCII.
func quoteString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// CheckPolicyName returns the index of the first byte of name that is not
// printable ASCII, or -1.
func CheckPolicyName(name string) int {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c > 0x7e {
			return i
		}
	}
	return -1
}

// CeilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

// maxPolicyWindow bounds the w a policy is stated over when its window is
// not a whole number of seconds.
const maxPolicyWindow = 3600

// PolicyWindow returns the policy of limit permits per window over whole
// seconds: q per w seconds at the same rate. A window of whole seconds is
// stated as it is; another over the fewest whole seconds that make the
// rate exact (3 per 1.5 s: q=2;w=1; 5 per 300 ms: q=50;w=3), if at most
// maxPolicyWindow; else over enough whole seconds for a quota of 100 (at
// most maxPolicyWindow, at least the seconds that hold window), rounded
// down: the rate stated is never above the limiter's, and less than 1%
// below it when the window allows.
func PolicyWindow(limit int64, window time.Duration) (w, quota int64) {
	w = CeilSeconds(window)
	if time.Duration(w)*time.Second == window || limit <= 0 || w > maxPolicyWindow {
		return w, limit
	}
	if ew := exactWindow(limit, int64(window)); ew > 0 && ew <= maxPolicyWindow {
		if q, ok := exact.MulDiv(limit, ew*int64(time.Second), int64(window)); ok {
			return ew, q
		}
	}
	// Seconds for 100 permits: 100·window/limit, rounded up.
	if hundred, ok := exact.MulDiv(100, int64(window), limit*int64(time.Second)); ok && limit <= math.MaxInt64/int64(time.Second) {
		w = min(max(w, hundred+1), maxPolicyWindow)
	}
	q, ok := exact.MulDiv(limit, w*int64(time.Second), int64(window))
	if !ok {
		return CeilSeconds(window), limit // too large to scale: keep the stated limit
	}
	return w, max(q, 1)
}

// exactWindow returns the fewest whole seconds w for which limit per
// window ns is a whole number of permits per w seconds: the denominator of
// limit·1e9/window in lowest terms.
func exactWindow(limit, window int64) int64 {
	d := window / gcd(limit, window)
	return d / gcd(d, int64(time.Second))
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
