package httplimit

import (
	"net/http"
	"strconv"
	"time"
	"unsafe"

	"github.com/rategate/rategate/internal/ratelimit"
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

// setFields sets the RateLimit fields of ps (if known and wanted), the
// legacy fields of ps[mc] (if wanted) and, for a refusal (retry > 0),
// Retry-After: retry seconds, also the RateLimit field's t then, so that
// Retry-After does not end before it.
func (m *Middleware) setFields(h http.Header, ps []ratelimit.Quota, mc int, retry int64) {
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

// appendStandard sets RateLimit-Policy and RateLimit (see package
// ratelimit for their syntax): each quota is a policy of its own, and
// RateLimit states the most constrained one (ps[mc]). How each limiter
// maps to q, w, r and t is documented on Options.
func (m *Middleware) appendStandard(f *fieldWriter, ps []ratelimit.Quota, mc int, retry int64) {
	start := len(f.buf)
	f.buf = ratelimit.AppendPolicy(f.buf, m.quoted, ps)
	f.set(hPolicy, start)
	start = len(f.buf)
	f.buf = ratelimit.AppendLimit(f.buf, m.quoted, ps, mc, retry)
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
