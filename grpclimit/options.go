package grpclimit

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/rategate/rategate/internal/ratelimit"
	"github.com/rategate/rategate/limiter"
)

// Options configures New. The zero Options limits nothing: a nil Limiter
// means no limit, as everywhere in rategate.
type Options struct {
	// Limiter is one limit for every call (a server-wide rate, or a
	// limiter.Concurrency capping the calls in flight). Set at most one of
	// Limiter and PerKey.
	Limiter limiter.Limiter
	// PerKey returns the limiter of a key (see Key): one limit per client,
	// method, API key or tenant, such as a limiter.Keyed's or
	// KeyedTokenBucket's For, or a redislimit keyed For. A nil limiter for a
	// key means no limit for it.
	PerKey func(key string) limiter.Limiter
	// Key names what a call counts against when PerKey is set. The default
	// is PeerAddr() (the peer's IP address, an IPv6 client's /64; behind a
	// proxy, give PeerAddr the proxy's prefixes). A call whose key cannot
	// be found is refused with KeyErrorCode, or with the code of the
	// KeyFunc's error when that is a gRPC status error.
	Key KeyFunc
	// KeyErrorCode is the status code of a call whose key cannot be found:
	// codes.InvalidArgument when 0 (codes.OK). A KeyFunc that returns a
	// gRPC status error (status.Error(codes.Unauthenticated, ...)) chooses
	// the code itself.
	KeyErrorCode codes.Code
	// Cost returns the permits a call or a stream takes when it opens (msg
	// is the request of a unary call, nil for a stream) and, with
	// PerMessage, each message a stream receives (msg is the message); the
	// default is 1. A cost of 0 takes nothing and is never refused; a
	// negative cost is a bug, refused with codes.Internal.
	Cost func(ctx context.Context, method string, msg any) int
	// PerMessage makes each message a stream receives take permits too,
	// besides the ones the stream takes when it opens: the handler's
	// RecvMsg returns the message once its permits are granted, or a
	// refusal (which the handler returns, ending the stream). A message's
	// permits are released as soon as it is received.
	PerMessage bool
	// Wait, when positive, queues a call (or a message) that cannot be
	// served at once in the limiter's queue for up to Wait, so that calls
	// are served in turn at the limiter's pace. A call that cannot be served
	// within Wait, or before its deadline, is refused: at once when the
	// limiter can tell (a token bucket or pacer, limiter.Foreseer), else
	// when the wait ends. A call whose client goes away (cancels, or its
	// deadline passes) while queued leaves the queue and consumes nothing.
	// 0 refuses at once what TryAcquire does not grant.
	Wait time.Duration
	// Code chooses the status of a call the limiter refused with err;
	// return codes.OK to keep the default, which is
	// codes.ResourceExhausted for a call over the limit (limiter.ErrLimited,
	// ErrQueueFull, ErrExceedsLimit, a wait that would outlast Wait or the
	// deadline), the code of an err that carries a gRPC status
	// (GRPCStatus() *status.Status), and codes.Unavailable for any other
	// error: the limiter could not decide (closed, or its store unreachable,
	// as redislimit.ErrUnavailable under FailClosed). Only a
	// codes.ResourceExhausted refusal carries RetryInfo.
	Code func(err error) codes.Code
	// Outcome classifies the error a handler returned, for the lease's
	// Report (adaptive limiters learn from it); the default is OutcomeOf.
	Outcome func(err error) limiter.Outcome

	// Policy names the quota policy in the ratelimit-policy and ratelimit
	// metadata; the default is "default". Printable ASCII only.
	Policy string
	// NoMetadata leaves out the ratelimit-policy and ratelimit metadata (a
	// refusal still carries RetryInfo).
	NoMetadata bool
	// OnDecision, if set, is called with every decision (served, refused,
	// client gone, failed), for metrics and logs. It runs on the call's
	// goroutine: keep it fast.
	OnDecision func(ctx context.Context, d Decision)
}

// Decision is the server's decision on a call, or on a message of a
// stream, as given to Options.OnDecision.
type Decision struct {
	// Method is the call's full method, "/package.Service/Method".
	Method string
	// Key is the call's key (with Options.PerKey).
	Key string
	// Message is true for a message received on a stream (with
	// Options.PerMessage), false for a call or a stream opening.
	Message bool
	// Cost is the permits asked for.
	Cost int
	// Code is codes.OK for a call served, and otherwise the status it was
	// refused with (codes.Canceled or codes.DeadlineExceeded when the
	// client went away while queued).
	Code codes.Code
	// Waited is how long the call waited in the queue (with Wait > 0).
	Waited time.Duration
	// RetryAfter is, for a codes.ResourceExhausted refusal, the delay sent
	// in RetryInfo (0: none, as for a request that can never be granted).
	RetryAfter time.Duration
	// Quota is the limiter's quota, as sent in the ratelimit metadata; the
	// zero Quota when the limiter cannot say.
	Quota limiter.Quota
	// Err says why a call was not served: the limiter's error, the
	// KeyFunc's, or the context's.
	Err error
}

func (o *Options) validate() error {
	if o.Limiter != nil && o.PerKey != nil {
		return &limiter.OptionError{Field: "Limiter", Problem: "set at most one of Limiter and PerKey"}
	}
	if o.Wait < 0 {
		return &limiter.OptionError{Field: "Wait", Problem: fmt.Sprintf("%v is negative", o.Wait)}
	}
	if o.KeyErrorCode > codes.Unauthenticated {
		return &limiter.OptionError{Field: "KeyErrorCode", Problem: fmt.Sprintf("%d is not a gRPC status code", uint32(o.KeyErrorCode))}
	}
	if ratelimit.CheckPolicyName(o.Policy) >= 0 {
		return &limiter.OptionError{Field: "Policy", Problem: fmt.Sprintf("%q holds a byte that is not printable ASCII", o.Policy)}
	}
	return nil
}
