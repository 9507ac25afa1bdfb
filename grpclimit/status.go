package grpclimit

import (
	"context"
	"errors"
	"time"
	"unsafe"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rategate/rategate/internal/ratelimit"
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

// maxProtoSeconds is the largest Duration.Seconds a valid protobuf
// Duration holds (10,000 years).
const maxProtoSeconds = 315_576_000_000

// serverRetryInfo returns the delay of the RetryInfo detail of a status
// error, and false when it has none or its delay is malformed or negative.
// A delay beyond the protobuf range, which a server can mean only as
// "not again", is taken as the longest delay, not as malformed.
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
		if rd == nil {
			return 0, false
		}
		beyond := rd.GetSeconds() > maxProtoSeconds && rd.GetNanos() >= 0 && rd.GetNanos() < 1e9
		if (rd.CheckValid() != nil && !beyond) || rd.AsDuration() < 0 {
			return 0, false
		}
		return rd.AsDuration(), true // saturated past time.Duration's range
	}
	return 0, false
}

// quotaMetadata returns the ratelimit-policy and ratelimit metadata of
// ps, as package httplimit sends the RateLimit-Policy and RateLimit fields
// in HTTP (see its documentation, "What the fields promise"):
//
//	ratelimit-policy: "default";q=100;w=60
//	ratelimit: "default";r=50;t=30
//
// w and t are whole seconds: a window of another length is stated over
// the fewest whole seconds that make the rate exact, a token bucket's
// burst is its burst parameter, and a concurrency limit counts
// "concurrent-requests". Each member of a limiter of several policies is
// a policy of its own; ratelimit states the most constrained, ps[mc]. For
// a refusal (retry > 0), t is retry, rounded up.
func quotaMetadata(quoted string, ps []ratelimit.Quota, mc int, retry time.Duration) metadata.MD {
	// One allocation holds both values and the slices the metadata keeps
	// them in (a long policy name, or several policies, move the bytes to
	// a second one).
	f := new(quotaFields)
	buf := ratelimit.AppendPolicy(f.buf[:0], quoted, ps)
	policyEnd := len(buf)
	var secs int64
	if retry > 0 {
		secs = max(ratelimit.CeilSeconds(retry), 1)
	}
	buf = ratelimit.AppendLimit(buf, quoted, ps, mc, secs)
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
