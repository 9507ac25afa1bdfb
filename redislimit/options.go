package redislimit

import (
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
)

// ErrUnavailable is the error of a decision Redis could not make: the server
// could not be reached, did not answer within Options.Timeout, or answered
// with an error. With FailClosed (the default) a refused lease's Err and
// Acquire's error wrap it together with the cause, so both
// errors.Is(err, ErrUnavailable) and errors.Is(err, cause) hold.
var ErrUnavailable = errors.New("redislimit: redis unavailable")

// ErrClosed is returned by every call after Close. It wraps limiter.ErrClosed.
var ErrClosed = fmt.Errorf("redislimit: %w", limiter.ErrClosed)

// ErrorPolicy says what a limiter does when Redis cannot decide.
type ErrorPolicy int

const (
	// FailClosed refuses: the lease is not granted and its Err wraps
	// ErrUnavailable and the cause. It is the zero value: a Redis error
	// never admits silently.
	FailClosed ErrorPolicy = iota
	// FailOpen grants: while Redis cannot decide, nothing is limited. Choose
	// it only where an unlimited burst is better than a refusal.
	FailOpen
	// UseFallback asks Options.Fallback, a local limiter, to decide while
	// Redis cannot. Size it for one process's share of the global limit.
	UseFallback
)

// String returns the policy's name.
func (p ErrorPolicy) String() string {
	switch p {
	case FailClosed:
		return "FailClosed"
	case FailOpen:
		return "FailOpen"
	case UseFallback:
		return "UseFallback"
	}
	return fmt.Sprintf("ErrorPolicy(%d)", int(p))
}

// Defaults used when the corresponding Options field is zero.
const (
	// DefaultTimeout bounds one round trip to Redis (see Options.Timeout).
	DefaultTimeout = 500 * time.Millisecond
	// DefaultLeaseTTL is how long a Concurrency holder's permits outlive its
	// last renewal, and so how soon a crashed holder's permits come back.
	DefaultLeaseTTL = 10 * time.Second
)

// Options are the settings every limiter of this package shares: where the
// state lives and what to do when Redis cannot decide.
type Options struct {
	// Client is the Redis client: a *redis.Client, a *redis.ClusterClient,
	// a Sentinel failover client or a *redis.Ring. Required. The limiter
	// does not close it.
	Client redis.UniversalClient
	// Key names the limit. Every process that uses the same Key (and the
	// same algorithm) shares one limit. Required; any string: it is encoded
	// into a Redis key of bounded length. Its hash tag (its cluster slot) is
	// the Key, or the part between its first '{' and the next '}' when not
	// empty, as in Redis Cluster; see the package doc, Keys and Redis
	// Cluster.
	Key string
	// OnError is what happens when Redis cannot decide: FailClosed (the
	// zero value), FailOpen or UseFallback.
	OnError ErrorPolicy
	// Fallback decides while Redis cannot, with UseFallback (with another
	// OnError, constructors refuse it). It is typically a local limiter sized for this process's
	// share of the limit.
	Fallback limiter.Limiter
	// Timeout bounds every round trip to Redis, whatever the failure: a
	// decision that Redis has not answered within it (the server refuses
	// connections, cannot be reached, stalls or dies mid-call, or the
	// client's pool has no free connection) is an error (see OnError),
	// returned within Timeout. Zero means DefaultTimeout. Each round trip
	// runs under context.WithTimeout. With a client that honours context
	// deadlines (go-redis's ContextTimeoutEnabled, recommended) it runs in
	// the calling goroutine; with one that does not, which would wait for a
	// reply up to its own ReadTimeout, it runs in a goroutine of its own
	// that the caller stops waiting for after Timeout, at the cost of a
	// goroutine hand-off per call.
	Timeout time.Duration
	// LeaseTTL is, for NewConcurrency and NewKeyedConcurrency only (other
	// constructors refuse it), how long a holder's permits
	// outlive its last renewal in Redis. Held leases are renewed every
	// LeaseTTL/3 while held; a holder that crashes gives its permits back
	// LeaseTTL after its last renewal. Zero means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// GuardRestarts makes a limiter assume that a Redis server which started
	// less than one limit period ago (a window, a bucket's refill time, a
	// lease TTL) may have lost the state of that limit in the restart: state
	// found missing on such a server is taken as used up at the server's
	// start. It keeps the bound across a restart of a server without
	// persistence, at the price of refusing for up to one period after any
	// server start, the first one included. The server's uptime comes from
	// INFO; servers that do not answer INFO inside scripts are not guarded.
	GuardRestarts bool
	// OnDecision, when not nil, is called once for every decision that
	// asked Redis (TryAcquire, each ask of a waiting Acquire, a Chain's
	// decision for each of its members), and for Partitioned once for every
	// lease sync, after the round trip and before OnError applies: with how
	// long it took, the error if Redis could not decide, and who decided.
	// It is for metrics (package otellimit), called on the deciding
	// goroutine: it must be quick and must not block. It costs no
	// allocation; without it the clock is not read.
	OnDecision func(DecisionInfo)
}

func optErr(field, format string, args ...any) error {
	return &limiter.OptionError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// validate checks the options shared by every limiter of this package and
// returns an *limiter.OptionError naming the first invalid field. leases
// is true for the semaphores, the only limiters LeaseTTL is for; a field a
// limiter would not use is refused when set.
func (o *Options) validate(leases bool) error {
	if o.Client == nil {
		return optErr("Client", "a redis.UniversalClient is required")
	}
	if o.Key == "" {
		return optErr("Key", "must not be empty")
	}
	switch o.OnError {
	case FailClosed, FailOpen:
		if o.Fallback != nil {
			return optErr("Fallback", "is used only with OnError: UseFallback, got OnError %v", o.OnError)
		}
	case UseFallback:
		if o.Fallback == nil {
			return optErr("Fallback", "is required with OnError: UseFallback")
		}
	default:
		return optErr("OnError", "must be FailClosed, FailOpen or UseFallback, got %d", int(o.OnError))
	}
	if o.Timeout < 0 {
		return optErr("Timeout", "must not be negative, got %v", o.Timeout)
	}
	if o.LeaseTTL != 0 && !leases {
		return optErr("LeaseTTL", "is for NewConcurrency and NewKeyedConcurrency (a Partitioned's is PartitionedOptions.LeaseTTL), got %v", o.LeaseTTL)
	}
	if o.LeaseTTL < 0 {
		return optErr("LeaseTTL", "must not be negative, got %v", o.LeaseTTL)
	}
	if o.LeaseTTL != 0 && o.LeaseTTL < 3*time.Millisecond {
		return optErr("LeaseTTL", "must be at least 3ms (renewed every LeaseTTL/3), got %v", o.LeaseTTL)
	}
	return nil
}

// timeout is the round-trip bound.
func (o *Options) timeout() time.Duration {
	if o.Timeout == 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

// leaseTTL is the Concurrency lease TTL.
func (o *Options) leaseTTL() time.Duration {
	if o.LeaseTTL == 0 {
		return DefaultLeaseTTL
	}
	return o.LeaseTTL
}
