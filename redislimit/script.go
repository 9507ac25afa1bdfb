package redislimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
)

// luaPrelude starts every script. Scripts read TIME before they write,
// which needs effects replication: the default since Redis 5, the oldest
// version this package supports. now is Redis's clock in microseconds:
// below 2^53 until the year 2255. keepms(us) is the expiry, in
// milliseconds, of a key whose state matters for us more microseconds:
// rounded down, and 2 ms to spare.
const luaPrelude = `
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local function keepms(us) return math.floor(us / 1000) + 2 end
`

// luaServer defines, for the scripts that guard against restarts, server()
// and started(). server() returns the server's run_id ('-' when INFO is not
// available in scripts) and the latest instant at which it can have
// started, or nil when it cannot be known. Redis counts its uptime in
// whole seconds of its clock (uptime_in_seconds is the difference of the
// whole seconds of now and of the start), so a start in whole second
// floor(now) - up is all it says: the start is taken at the end of that
// second (never after now), up to a second after the true start, never
// before it. started() is server()'s start. (A script defines its
// functions anew at every call: a script that does not guard leaves them
// out.)
const luaServer = `
local function server()
  local ok, info = pcall(redis.call, 'INFO', 'server')
  if not ok or type(info) ~= 'string' then return '-', nil end
  local id = string.match(info, 'run_id:(%w+)') or '-'
  local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  if up == nil then return id, nil end
  return id, math.min(now, (tonumber(tm[1]) - up + 1) * 1000000)
end
local function started()
  local _, s = server()
  return s
end
`

// permitSet defines the helpers of the strict log and the semaphore, which
// keep grants as the members of a sorted set named "<id>:<permits>" beside
// a hash of the limit's state. permits(m) is the permits member m holds;
// reclaim(set, t) removes the members scored at or before t and returns the
// permits they held; expire(set, hash, us) makes both keys expire when
// their state no longer matters, us microseconds from now; save(set, hash,
// n, us, field, value, …) keeps a limit that counts n permits: it sets the
// hash's fields and expire(us), or, when n is 0, deletes both keys (an
// empty limit leaves nothing in Redis).
const permitSet = `
local function permits(m) return tonumber(string.match(m, ':(%d+)$')) end
local function reclaim(set, t)
  local old = redis.call('ZRANGEBYSCORE', set, '-inf', t)
  local n = 0
  if #old > 0 then
    for _, m in ipairs(old) do n = n + permits(m) end
    redis.call('ZREMRANGEBYSCORE', set, '-inf', t)
  end
  return n
end
local function expire(set, hash, us)
  local ms = keepms(us)
  redis.call('PEXPIRE', set, ms)
  redis.call('PEXPIRE', hash, ms)
end
local function save(set, hash, n, us, ...)
  if n == 0 then
    redis.call('DEL', set, hash)
    return
  end
  redis.call('HSET', hash, ...)
  expire(set, hash, us)
end
`

// newScript returns the script of src after the prelude. It runs with
// redis.Script.Run: by its SHA1 (EVALSHA), sent in full (EVAL) only when
// Redis answers NOSCRIPT, which says the script did not run; after any
// other failure the script may have run, so it is never sent again.
func newScript(src string) *redis.Script {
	return redis.NewScript(luaPrelude + src)
}

// errTimeout is the cause of an unavailability when Redis did not answer
// within Options.Timeout.
var errTimeout = errors.New("redislimit: no answer from redis within Options.Timeout")

// unavailableError is a decision Redis could not make: it wraps
// ErrUnavailable and the cause.
type unavailableError struct{ cause error }

func (e *unavailableError) Error() string { return ErrUnavailable.Error() + ": " + e.cause.Error() }

// Unwrap returns ErrUnavailable and the cause.
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.cause} }

// unavailable wraps a failed round trip's error. A deadline that was the
// round-trip bound (not the caller's) becomes errTimeout, so that callers
// testing for context.DeadlineExceeded see only their own deadlines.
func unavailable(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (%v)", errTimeout, err)
	}
	return &unavailableError{cause: err}
}

// intReply reads a script's reply as an array of integers, appended to
// dst; ok is false for any other reply.
func intReply(dst []int64, v any) (out []int64, ok bool) {
	a, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out = dst
	for _, x := range a {
		n, ok := x.(int64)
		if !ok {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// caller makes the round trips of one limiter: each runs under a context
// that ends Timeout after the call began, so that every wait inside the
// client (for a pooled connection, a dial, a retry's backoff, and with
// ContextTimeoutEnabled the reply itself) ends by then.
type caller struct {
	c       redis.UniversalClient
	timeout time.Duration
	// inline: c bounds a call's I/O by its context's deadline
	// (ContextTimeoutEnabled), so the call runs in the caller's goroutine.
	// Otherwise the client would wait for a reply up to its own
	// ReadTimeout, and the call runs in a goroutine of its own that the
	// caller stops waiting for when the context ends. (go-redis's
	// Client.WithTimeout would bound it inline, but its clone does not run
	// the client's hooks: tracing would lose the limiter's calls.)
	inline bool
}

// newCaller returns the caller of c.
func newCaller(c redis.UniversalClient, timeout time.Duration) caller {
	return caller{c: c, timeout: timeout, inline: honoursDeadlines(c)}
}

// run runs s once and returns its reply, or an error wrapping
// ErrUnavailable, within the timeout. parent gives the call its values
// (tracing); its cancellation does not end the call, which may already have
// committed in Redis and may decide for other callers too. When the call
// outlives the timeout, its outcome is handed to late (if not nil) once it
// arrives, so that what it decided can be undone; with an inline call that
// failed, late is called too, as the call may have committed before it
// failed.
func (c *caller) run(parent context.Context, s *redis.Script, late func(any, error), keys []string, args ...any) (any, error) {
	if parent != context.Background() {
		parent = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithTimeout(parent, c.timeout)
	if c.inline {
		v, err := s.Run(ctx, c.c, keys, args...).Result()
		cancel()
		if err != nil {
			if late != nil {
				go late(nil, err)
			}
			return nil, unavailable(err)
		}
		return v, nil
	}
	type reply struct {
		v   any
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		v, err := s.Run(ctx, c.c, keys, args...).Result()
		ch <- reply{v, err}
		cancel()
	}()
	var r reply
	select {
	case r = <-ch:
	case <-ctx.Done():
		select {
		case r = <-ch: // it ended as the time ran out
		default:
			go func() {
				r := <-ch
				if late != nil {
					late(r.v, r.err)
				}
			}()
			return nil, unavailable(errTimeout)
		}
	}
	if r.err != nil {
		return nil, unavailable(r.err)
	}
	return r.v, nil
}

// honoursDeadlines reports whether c bounds a command by its context's
// deadline (ContextTimeoutEnabled). Without it go-redis bounds the wait for
// a reply only by the client's ReadTimeout.
func honoursDeadlines(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// onError applies policy p (with fallback fb, for UseFallback) to a
// decision Redis could not make: an Acquire's with ctx when wait, else a
// TryAcquire's.
func onError(ctx context.Context, wait bool, p ErrorPolicy, fb limiter.Limiter, n int, cause error) (limiter.Lease, error) {
	switch {
	case p == FailOpen:
		return limiter.NewLease(n, nil), nil
	case p == UseFallback && !wait:
		l := fb.TryAcquire(n)
		return l, l.Err()
	case p == UseFallback:
		return fb.Acquire(ctx, n)
	}
	return limiter.Denied(cause, 0), cause
}

// policyTry applies Options.OnError to a TryAcquire Redis could not decide.
func (o *Options) policyTry(n int, cause error) limiter.Lease {
	l, _ := onError(context.Background(), false, o.OnError, o.Fallback, n, cause)
	return l
}

// policyAcquire applies Options.OnError to an Acquire Redis could not
// decide.
func (o *Options) policyAcquire(ctx context.Context, n int, cause error) (limiter.Lease, error) {
	return onError(ctx, true, o.OnError, o.Fallback, n, cause)
}
