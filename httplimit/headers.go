package httplimit

import (
	"math"
	"net/http"
	"strconv"
	"time"
	"unsafe"

	"github.com/rategate/rategate/internal/exact"
	"github.com/rategate/rategate/limiter"
)

// Canonical header keys, so that the fields are set without canonicalizing
// them per request. HTTP field names are case-insensitive.
const (
	hRateLimit  = "Ratelimit"        // RateLimit
	hPolicy     = "Ratelimit-Policy" // RateLimit-Policy
	hRetryAfter = "Retry-After"
	hXLimit     = "X-Ratelimit-Limit"
	hXRemaining = "X-Ratelimit-Remaining"
	hXReset     = "X-Ratelimit-Reset"
)

// smallFields holds the two RateLimit fields of a served response, and
// fields every field of a refusal or of legacy headers, each in one
// allocation: the values are strings over b, the header's []string over v.
type smallFields struct {
	v [2]string
	b [96]byte
}

type fields struct {
	v [6]string
	b [192]byte
}

// fieldWriter appends field values to one buffer and sets them in h.
type fieldWriter struct {
	h    http.Header
	vals []string
	buf  []byte
}

// set sets name to the bytes appended since start. The bytes are never
// written again (later values are appended after them, or to a new array),
// so the string can share them.
func (f *fieldWriter) set(name string, start int) {
	s := unsafe.String(&f.buf[start], len(f.buf)-start)
	i := len(f.vals)
	f.vals = append(f.vals, s)
	f.h[name] = f.vals[i : i+1 : i+1]
}

// policyQuota is one policy's quota as the fields state it.
type policyQuota struct {
	limiter.Quota
	// burst is, for a limiter whose permits come back continuously (a
	// token bucket), the requests that may arrive at once and then be
	// spread at the policy's pace: its Burst. 0 for the others.
	burst int64
}

// mostConstrained returns the index of the quota with the fewest permits
// remaining (of those with as few, the longest reset).
func mostConstrained(ps []policyQuota) int {
	best := 0
	for i := 1; i < len(ps); i++ {
		if p, b := ps[i].Quota, ps[best].Quota; p.Remaining < b.Remaining || (p.Remaining == b.Remaining && p.Reset > b.Reset) {
			best = i
		}
	}
	return best
}

// setFields sets the RateLimit fields of ps (if known and wanted), the
// legacy fields of ps[mc] (if wanted) and, for a refusal (retry > 0),
// Retry-After: retry seconds, also the RateLimit field's t then, so that
// Retry-After does not end before it.
func (m *Middleware) setFields(h http.Header, ps []policyQuota, mc int, retry int64) {
	known := len(ps) > 0
	if (m.noHeaders || !known) && !m.legacy && retry == 0 {
		return
	}
	f := fieldWriter{h: h}
	if retry == 0 && !m.legacy && len(ps) == 1 {
		s := new(smallFields)
		f.vals, f.buf = s.v[:0], s.b[:0]
	} else {
		s := new(fields)
		f.vals, f.buf = s.v[:0], s.b[:0]
	}
	if retry > 0 {
		f.buf = strconv.AppendInt(f.buf, retry, 10)
		f.set(hRetryAfter, 0)
	}
	if known && !m.noHeaders {
		m.appendStandard(&f, ps, mc, retry)
	}
	if known && m.legacy {
		appendLegacy(&f, ps[mc].Quota)
	}
}

// appendStandard sets RateLimit-Policy and RateLimit in the syntax of
// draft-ietf-httpapi-ratelimit-headers (-09 to -11):
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=50;t=30
//
// Each quota is a policy of its own (named "default-1", "default-2", ...
// when there are several), and RateLimit states the most constrained one
// (ps[mc]). How each limiter maps to q, w, r and t is documented on
// Options.
func (m *Middleware) appendStandard(f *fieldWriter, ps []policyQuota, mc int, retry int64) {
	start := len(f.buf)
	for i, p := range ps {
		if i > 0 {
			f.buf = append(f.buf, ", "...)
		}
		f.buf = m.appendName(f.buf, i, len(ps))
		f.buf = append(f.buf, ";q="...)
		if p.Window > 0 {
			w, quota := policyWindow(p.Limit, p.Window)
			f.buf = strconv.AppendInt(f.buf, quota, 10)
			f.buf = append(f.buf, ";w="...)
			f.buf = strconv.AppendInt(f.buf, w, 10)
			if p.burst > 1 {
				f.buf = append(f.buf, ";burst="...)
				f.buf = strconv.AppendInt(f.buf, p.burst, 10)
			}
		} else {
			f.buf = strconv.AppendInt(f.buf, p.Limit, 10)
			f.buf = append(f.buf, `;qu="concurrent-requests"`...)
		}
	}
	f.set(hPolicy, start)

	q := ps[mc].Quota
	start = len(f.buf)
	f.buf = m.appendName(f.buf, mc, len(ps))
	f.buf = append(f.buf, ";r="...)
	f.buf = strconv.AppendInt(f.buf, q.Remaining, 10)
	t := ceilSeconds(q.Reset)
	if retry > 0 {
		t = retry
	}
	if q.Window > 0 || retry > 0 {
		f.buf = append(f.buf, ";t="...)
		f.buf = strconv.AppendInt(f.buf, t, 10)
	}
	f.set(hRateLimit, start)
}

// appendName appends the name of policy i of n: the policy name, with
// "-1", "-2", ... when there are several.
func (m *Middleware) appendName(b []byte, i, n int) []byte {
	if n == 1 {
		return append(b, m.quoted...)
	}
	b = append(b, m.quoted[:len(m.quoted)-1]...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(i+1), 10)
	return append(b, '"')
}

// appendLegacy sets X-RateLimit-Limit, -Remaining and -Reset (Unix seconds).
func appendLegacy(f *fieldWriter, q limiter.Quota) {
	start := len(f.buf)
	f.buf = strconv.AppendInt(f.buf, q.Limit, 10)
	f.set(hXLimit, start)
	start = len(f.buf)
	f.buf = strconv.AppendInt(f.buf, q.Remaining, 10)
	f.set(hXRemaining, start)
	start = len(f.buf)
	f.buf = strconv.AppendInt(f.buf, time.Now().Add(q.Reset).Add(time.Second-1).Unix(), 10)
	f.set(hXReset, start)
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/time.Second) + 1
}

// maxPolicyWindow bounds the w a policy is stated over when its window is
// not a whole number of seconds.
const maxPolicyWindow = 3600

// policyWindow returns the policy of limit permits per window over whole
// seconds: q per w seconds at the same rate. A window of whole seconds is
// stated as it is; another over the fewest whole seconds that make the
// rate exact (3 per 1.5 s: q=2;w=1; 5 per 300 ms: q=50;w=3), if at most
// maxPolicyWindow; else over enough whole seconds for a quota of 100 (at
// most maxPolicyWindow, at least the seconds that hold window), rounded
// down: the rate stated is never above the limiter's, and less than 1%
// below it when the window allows.
func policyWindow(limit int64, window time.Duration) (w, quota int64) {
	w = ceilSeconds(window)
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
		return ceilSeconds(window), limit // too large to scale: keep the stated limit
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
