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

// setFields sets the RateLimit fields of q (if known and wanted), the
// legacy fields (if wanted) and, for a refusal (retry > 0), Retry-After:
// retry seconds, also the RateLimit field's effective window then, so that
// Retry-After does not end before it.
func (m *Middleware) setFields(h http.Header, q limiter.Quota, retry int64) {
	known := q != (limiter.Quota{})
	if (m.noHeaders || !known) && !m.legacy && retry == 0 {
		return
	}
	f := fieldWriter{h: h}
	if retry == 0 && !m.legacy {
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
		m.appendStandard(&f, q, retry)
	}
	if known && m.legacy {
		appendLegacy(&f, q)
	}
}

// appendStandard sets RateLimit-Policy and RateLimit in the syntax of
// draft-ietf-httpapi-ratelimit-headers (-09 to -11):
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=50;t=30
//
// w is in whole seconds (the draft has no finer unit): a window of another
// length is advertised as the whole seconds that hold it, with the quota
// scaled to the same rate (a token bucket of 10 a second with a burst of 1
// reads q=10;w=1), and RateLimit's r says what can be taken now. A
// concurrency limiter's policy has no window and counts
// "concurrent-requests".
func (m *Middleware) appendStandard(f *fieldWriter, q limiter.Quota, retry int64) {
	start := len(f.buf)
	f.buf = append(f.buf, m.quoted...)
	f.buf = append(f.buf, ";q="...)
	if q.Window > 0 {
		w, quota := policyWindow(q.Limit, q.Window)
		f.buf = strconv.AppendInt(f.buf, quota, 10)
		f.buf = append(f.buf, ";w="...)
		f.buf = strconv.AppendInt(f.buf, w, 10)
	} else {
		f.buf = strconv.AppendInt(f.buf, q.Limit, 10)
		f.buf = append(f.buf, `;qu="concurrent-requests"`...)
	}
	f.set(hPolicy, start)

	start = len(f.buf)
	f.buf = append(f.buf, m.quoted...)
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

// policyWindow returns the whole seconds w that hold window, and the quota
// over w seconds at the same rate: limit when window is w seconds, else
// limit·w/window rounded down.
func policyWindow(limit int64, window time.Duration) (w, quota int64) {
	w = ceilSeconds(window)
	if time.Duration(w)*time.Second == window || limit <= 0 {
		return w, limit
	}
	if w > math.MaxInt64/int64(time.Second) {
		return w, limit // too long to scale: keep the stated limit
	}
	qq, ok := exact.MulDiv(limit, w*int64(time.Second), int64(window))
	if !ok {
		return w, limit // too large to scale: keep the stated limit
	}
	return w, max(qq, 1)
}
