package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rategate/rategate/internal/ratelimit"
	"github.com/rategate/rategate/limiter"
)

// Options configures New. The zero Options limits nothing: a nil Limiter
// means no limit, as everywhere in rategate.
type Options struct {
	// Limiter is one limit for every request (a server-wide rate, or a
	// limiter.Concurrency capping the requests in flight). Set at most one
	// of Limiter, PerKey and Keyed.
	//
	// The outcome and latency of each request served are reported to the
	// lease of Limiter or PerKey's limiter (and of Shed), with
	// limiter.Lease.Report, so that adaptive limiters learn from the
	// handler: the status the handler answers says which (429 or 503:
	// limiter.Throttled, the handler or what it depends on is over its
	// capacity; another 5xx: limiter.Failed, which says nothing of
	// capacity; anything else: limiter.Succeeded), and the latency is the
	// handler's time. To see the status the middleware wraps the
	// ResponseWriter (its Unwrap serves http.ResponseController; Flush,
	// Hijack and ReadFrom pass through), with one allocation. Keyed's
	// leases (fixed algorithms per key) are reported to only when Shed is
	// set; without Shed, a request under Keyed costs nothing of this.
	Limiter limiter.Limiter
	// PerKey returns the limiter of a key (see Key): one limit per client,
	// API key or route, such as a limiter.Keyed's or KeyedTokenBucket's For,
	// or a redislimit keyed For. A nil limiter for a key means no limit for
	// it.
	PerKey func(key string) limiter.Limiter
	// Keyed is PerKey for a keyed limiter used directly, such as a
	// *limiter.Keyed[string] or *limiter.KeyedTokenBucket[string]: the same
	// decisions without making a Limiter value per request.
	Keyed KeyedLimiter
	// Key names what a request counts against when PerKey or Keyed is set.
	// The default is ClientIP() (RemoteAddr only; behind a proxy, give
	// ClientIP the proxy's prefixes). A request whose key cannot be found
	// is answered 400 Bad Request.
	Key KeyFunc
	// Cost returns the permits a request takes; the default is 1. A cost of
	// 0 takes nothing and is never refused; a negative cost is a bug and is
	// answered 500 Internal Server Error.
	Cost func(r *http.Request) int
	// Wait, when positive, queues a request that cannot be served at once
	// in the limiter's queue for up to Wait (the leaky-bucket middleware:
	// requests are served in turn at the limiter's pace). A request that
	// cannot be served within Wait is refused: at once when the limiter can
	// tell (a token bucket or pacer foresees the wait behind its whole queue,
	// limiter.Foreseer, and so does a key's bucket of a limiter.Keyed or
	// KeyedTokenBucket, through Keyed or their For in PerKey; other limiters
	// when no one waits ahead, or the one ahead will wait longer), else when
	// Wait ends. One whose client goes
	// away while queued leaves the queue, consumes nothing and gets no response (net/http notices that a
	// client has gone once the request's body has been read, at once for a
	// request without one). A request the limiter can grant at once is
	// served however short Wait is. 0 refuses at once what TryAcquire does
	// not grant.
	Wait time.Duration
	// Shed, if set, limits the requests the server takes on at once, to
	// shed load past its capacity: typically an adaptive.ConcurrencyLimiter,
	// whose limit follows what keeps the handler's latency near its
	// latency unloaded. A request its quota (Limiter, PerKey or Keyed)
	// granted then takes one permit of Shed, at once (TryAcquire: a
	// request never queues for capacity), held until the handler returns;
	// one that Shed refuses is answered 503 Service Unavailable with
	// Retry-After (Shed's RetryAfter, at least 1 s) and no RateLimit field,
	// as the server's capacity, not the client's quota, refused it (its
	// quota's permits are spent, as for any request the server received).
	// The outcome and latency of each request served are reported to
	// Shed's lease (see Options.Limiter).
	Shed limiter.Limiter

	// Policy names the quota policy in the RateLimit-Policy and RateLimit
	// fields; the default is "default" (and "default-1", "default-2", ...
	// for the members of a limiter of several policies). Printable ASCII
	// only. What the fields say for each limiter is in the package
	// documentation ("What the fields promise").
	Policy string
	// NoHeaders leaves out the RateLimit-Policy and RateLimit fields (a
	// refusal still carries Retry-After).
	NoHeaders bool
	// LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (the Unix time, in seconds, at which the quota is
	// whole again), as GitHub and go-chi/httprate send them.
	LegacyHeaders bool
	// QueueFullStatus is the status of a request refused because the
	// limiter's queue is full: 429 Too Many Requests (the default) or 503
	// Service Unavailable.
	QueueFullStatus int
	// OnRefuse writes the response to a request that is not served:
	// d.Status says which (429, QueueFullStatus, 400 when the key cannot be
	// found, 503 when the limiter fails, as when it is closed or its store
	// cannot be reached, or when Shed refuses, 500 for a negative cost). Retry-After and the
	// RateLimit fields are set when it is called. The default writes
	// d.Status and its status text, as http.Error does.
	OnRefuse func(w http.ResponseWriter, r *http.Request, d Decision)
	// OnDecision, if set, is called with every decision (served, refused,
	// client gone, failed), for metrics and logs, before the request is
	// served or the refusal is written. It runs on the request's goroutine:
	// keep it fast.
	OnDecision func(r *http.Request, d Decision)
}

// KeyedLimiter is a set of limiters, one per key, used by key: what
// Options.Keyed takes. *limiter.Keyed[string] and
// *limiter.KeyedTokenBucket[string] implement it, and report each key's
// Quota for the RateLimit fields through an optional
// Quota(key string) limiter.Quota method.
type KeyedLimiter interface {
	TryAcquire(key string, n int) limiter.Lease
	Acquire(ctx context.Context, key string, n int) (limiter.Lease, error)
}

// keyedQuoter is the optional Quota method of a KeyedLimiter.
type keyedQuoter interface {
	Quota(key string) limiter.Quota
}

func (o *Options) validate() error {
	set := 0
	for _, s := range []bool{o.Limiter != nil, o.PerKey != nil, o.Keyed != nil} {
		if s {
			set++
		}
	}
	if set > 1 {
		return &limiter.OptionError{Field: "Limiter", Problem: "set at most one of Limiter, PerKey and Keyed"}
	}
	if o.Wait < 0 {
		return &limiter.OptionError{Field: "Wait", Problem: fmt.Sprintf("%v is negative", o.Wait)}
	}
	switch o.QueueFullStatus {
	case 0, http.StatusTooManyRequests, http.StatusServiceUnavailable:
	default:
		return &limiter.OptionError{Field: "QueueFullStatus", Problem: fmt.Sprintf("%d is neither 429 nor 503", o.QueueFullStatus)}
	}
	if ratelimit.CheckPolicyName(o.Policy) >= 0 {
		return &limiter.OptionError{Field: "Policy", Problem: fmt.Sprintf("%q holds a byte that is not printable ASCII", o.Policy)}
	}
	return nil
}

// Outcome is what the middleware did with a request.
type Outcome int

const (
	// Served: the request was granted its permits and passed to the handler.
	Served Outcome = iota
	// Limited: refused, over the limit now or, with Wait, within Wait.
	Limited
	// QueueFull: refused, the limiter's queue was full.
	QueueFull
	// Gone: the client went away while the request was queued; it took no
	// permits and gets no response.
	Gone
	// Failed: no decision could be made: the key could not be found, the
	// cost was negative, or the limiter failed (closed, its store
	// unreachable, no limiter for the key).
	Failed
	// Shed: granted by its quota, refused by Options.Shed: the server was
	// at its capacity (503 Service Unavailable).
	Shed
)

var outcomeNames = [...]string{"served", "limited", "queue full", "gone", "failed", "shed"}

// String returns "served", "limited", "queue full", "gone", "failed" or
// "shed".
func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Decision is the middleware's decision on one request, as given to
// Options.OnDecision and Options.OnRefuse.
type Decision struct {
	Outcome Outcome
	// Status is the response status of a request not served (0 when
	// served, or gone).
	Status int
	// Key is the request's key. With Options.Limiter, which needs none, it
	// is the Key function's result when OnDecision is set ("" if that
	// fails), so that hooks can log the client.
	Key string
	// Cost is the permits the request asked for.
	Cost int
	// Waited is how long the request waited in the queue (with Wait > 0).
	Waited time.Duration
	// RetryAfter is, for a refusal, the wait the limiter gave before the
	// permits could be granted (Retry-After is this, in whole seconds,
	// rounded up; at least 1).
	RetryAfter time.Duration
	// Quota is the limiter's quota after the decision, as sent in the
	// RateLimit fields; the zero Quota when the limiter cannot say.
	Quota limiter.Quota
	// Err says why a request was not served (errors.Is: limiter.ErrLimited,
	// limiter.ErrQueueFull, context.DeadlineExceeded, ErrNoKey, ...).
	Err error
}
