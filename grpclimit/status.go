package grpclimit

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rategate/rategate/internal/exact"
	"github.com/rategate/rategate/limiter"
)

// The metadata keys of the quota fields, as in HTTP's RateLimit-Policy and
// RateLimit (draft-ietf-httpapi-ratelimit-headers); gRPC metadata keys are
// lower case.
const (
	MetadataPolicy    = "ratelimit-policy"
	MetadataRateLimit = "ratelimit"
)

// OutcomeOf classifies the error of a gRPC call for [limiter.Lease.Report]:
// nil is limiter.Succeeded; codes.ResourceExhausted (and an error wrapping
// limiter.ErrThrottled) is limiter.Throttled, which adaptive limiters
// answer by lowering their limit at once; codes.Canceled is
// limiter.Unknown (the call was abandoned, not refused); any other error is
// limiter.Failed.
func OutcomeOf(err error) limiter.Outcome {
	if err == nil {
		return limiter.Succeeded
	}
	if errors.Is(err, limiter.ErrThrottled) {
		return limiter.Throttled
	}
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return limiter.Throttled
	case codes.Canceled:
		return limiter.Unknown
	}
	return limiter.OutcomeOf(err)
}

// defaultCode is the status of a call the limiter refused with err, when
// Options.Code leaves it to the default.
func defaultCode(err error) codes.Code {
	switch {
	case errors.Is(err, limiter.ErrLimited), errors.Is(err, limiter.ErrQueueFull),
		errors.Is(err, limiter.ErrExceedsLimit), errors.Is(err, context.DeadlineExceeded):
		return codes.ResourceExhausted
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if st := se.GRPCStatus(); st != nil && st.Code() != codes.OK {
			return st.Code()
		}
	}
	return codes.Unavailable
}

// refusal is the codes.ResourceExhausted status of a call over the limit,
// with RetryInfo when retry > 0.
func refusal(retry time.Duration, err error) error {
	msg := "grpclimit: rate limit exceeded"
	if errors.Is(err, limiter.ErrExceedsLimit) {
		msg = "grpclimit: the call costs more than the limit can ever grant"
	} else if retry > 0 {
		msg += "; retry after " + retry.String()
	}
	st := status.New(codes.ResourceExhausted, msg)
	if retry <= 0 {
		return st.Err()
	}
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}); err == nil {
		st = d
	}
	return st.Err()
}

// retryDelay returns the RetryInfo delay of a refusal: the lease's
// RetryAfter, else the time until the quota is whole again, else a second
// (a limit whose permits come back with releases cannot say when); 0 for a
// request that can never be granted.
func retryDelay(l limiter.Lease, q limiter.Quota, err error) time.Duration {
	switch {
	case errors.Is(err, limiter.ErrExceedsLimit):
		return 0
	case l.RetryAfter() > 0:
		return l.RetryAfter()
	case q.Reset > 0:
		return q.Reset
	}
	return time.Second
}

// serverRetryInfo returns the delay of the RetryInfo detail of a status
// error, and false when it has none or its delay is malformed or negative.
func serverRetryInfo(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return 0, false
	}
	for _, d := range st.Details() {
		ri, ok := d.(*errdetails.RetryInfo)
		if !ok {
			continue
		}
		rd := ri.GetRetryDelay()
		if rd == nil || rd.CheckValid() != nil || rd.AsDuration() < 0 {
			return 0, false
		}
		return rd.AsDuration(), true
	}
	return 0, false
}

// quoteString returns s as a structured-field String (RFC 9651 §3.3.3):
// for printable ASCII, which Options.Policy is, that is strconv.Quote's
// form (in double quotes, '"' and '\' escaped, nothing else).
func quoteString(s string) string { return strconv.Quote(s) }

// quotaMetadata returns the ratelimit-policy and ratelimit metadata of q in
// the syntax of draft-ietf-httpapi-ratelimit-headers, as package httplimit
// sends them in HTTP:
//
//	ratelimit-policy: "default";q=100;w=60
//	ratelimit: "default";r=50;t=30
//
// w and t are whole seconds: a window of another length is advertised as
// the whole seconds that hold it, with the quota scaled to the same rate.
// A concurrency limit has no window and counts "concurrent-requests". For
// a refusal (retry > 0), t is retry, rounded up.
func quotaMetadata(quoted string, q limiter.Quota, retry time.Duration) metadata.MD {
	// One allocation holds both values and the slices the metadata keeps
	// them in (a long policy name moves the bytes to a second one).
	f := new(quotaFields)
	buf := f.buf[:0]
	buf = append(buf, quoted...)
	buf = append(buf, ";q="...)
	if q.Window > 0 {
		w, quota := wholeWindow(q.Limit, q.Window)
		buf = strconv.AppendInt(buf, quota, 10)
		buf = append(buf, ";w="...)
		buf = strconv.AppendInt(buf, w, 10)
	} else {
		buf = strconv.AppendInt(buf, q.Limit, 10)
		buf = append(buf, `;qu="concurrent-requests"`...)
	}
	policyEnd := len(buf)
	buf = append(buf, quoted...)
	buf = append(buf, ";r="...)
	buf = strconv.AppendInt(buf, q.Remaining, 10)
	t := ceilSeconds(q.Reset)
	if retry > 0 {
		t = max(ceilSeconds(retry), 1)
	}
	if q.Window > 0 || retry > 0 {
		buf = append(buf, ";t="...)
		buf = strconv.AppendInt(buf, t, 10)
	}
	// The bytes are never written again, so the strings can share them.
	s := unsafe.String(unsafe.SliceData(buf), len(buf))
	f.vals = [2]string{s[:policyEnd], s[policyEnd:]}
	return metadata.MD{MetadataPolicy: f.vals[0:1:1], MetadataRateLimit: f.vals[1:2:2]}
}

// quotaFields is the storage of the two values of quotaMetadata.
type quotaFields struct {
	vals [2]string
	buf  [112]byte
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return exact.CeilDiv(int64(d), int64(time.Second))
}

// wholeWindow returns the whole seconds w that hold window, and the quota
// over w seconds at the rate limit/window, rounded down (at least 1).
func wholeWindow(limit int64, window time.Duration) (w, quota int64) {
	w = ceilSeconds(window)
	if time.Duration(w)*time.Second == window || limit <= 0 || w > 1<<62/int64(time.Second) {
		return w, limit
	}
	scaled, ok := exact.MulDiv(limit, w*int64(time.Second), int64(window))
	if !ok {
		return w, limit
	}
	return w, max(scaled, 1)
}

// parseRateLimit reads ratelimit metadata: a list of items
// `"policy";r=50;t=30` (t optional), in one or more values. It returns the
// item with the least quota remaining (of those with as little, the
// longest t), and false when the field is absent or any item is malformed:
// a malformed field is ignored, as the draft says.
func parseRateLimit(vals []string) (r, t int64, ok bool) {
	for _, v := range vals {
		for v != "" {
			var ir, it int64
			var iok bool
			ir, it, v, iok = nextLimitItem(v)
			if !iok {
				return 0, 0, false
			}
			if !ok || ir < r || (ir == r && it > t) {
				r, t, ok = ir, it, true
			}
		}
	}
	return r, t, ok
}

// nextLimitItem reads the first item of a list `"policy";r=50;t=30, ...`
// and returns its r and t and the rest of the list.
func nextLimitItem(v string) (r, t int64, rest string, ok bool) {
	v = strings.TrimLeft(v, " \t")
	if len(v) < 2 || v[0] != '"' {
		return 0, 0, "", false
	}
	i := 1
	for ; i < len(v) && v[i] != '"'; i++ {
		if v[i] == '\\' {
			i++
		}
	}
	if i >= len(v) {
		return 0, 0, "", false
	}
	params, rest, _ := strings.Cut(v[i+1:], ",")
	hasR, first := false, true
	for p := range strings.SplitSeq(params, ";") {
		name, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		if first {
			if name != "" {
				return 0, 0, "", false // text between the policy and its parameters
			}
			first = false
			continue
		}
		if name != "r" && name != "t" {
			continue // other parameters (pk, comments) say nothing here
		}
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, "", false
		}
		if name == "r" {
			r, hasR = n, true
		} else {
			t = n
		}
	}
	return r, t, rest, hasR
}
