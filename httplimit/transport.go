package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rategate/rategate/internal/ratelimit"
	"github.com/rategate/rategate/limiter"
)

// DefaultRetries is the retries of a refused request when Transport.Retries
// is 0.
const DefaultRetries = 2

// DefaultMaxRetryWait is the longest Retry-After a Transport waits out to
// retry when Transport.MaxRetryWait is 0.
const DefaultMaxRetryWait = time.Minute

// ErrBlocked is returned, wrapped, by Transport.RoundTrip for a request
// that would have to wait longer than Transport.MaxRetryWait for its host:
// the server asked for no request until then (Retry-After, or no quota
// left for that long).
var ErrBlocked = errors.New("httplimit: the host takes no request for longer than MaxRetryWait")

// Transport is an http.RoundTripper for a client of rate-limited servers:
// it keeps to its own limits and to the ones the servers state.
//
//   - Before each request (and each retry) it takes a permit from Limiter
//     and from PerHost's limiter for the request's host, waiting as the
//     request's context allows. A permit of a limiter that takes permits
//     back (limiter.Concurrency) is released when the response body is
//     closed, so it caps the requests in flight. The lease is told the
//     response's outcome (Lease.Report: throttled for a 429 or 503, or
//     for a request that timed out; succeeded or failed otherwise, with
//     the latency), so an adaptive limiter given as PerHost (say an
//     adaptive.ConcurrencyLimiter per host, which follows latency) learns
//     from each host's answers.
//   - After a 429 or 503 response with Retry-After (delay seconds or an
//     HTTP date; a delay too large to count means a very long time), it
//     sends no request to that host before that time, also to requests
//     that were already waiting for a permit.
//   - It reads the limits every response states, in the dialects servers
//     use (see below), and sends no more requests than they leave. Only
//     what responses received before a request was sent allow counts for
//     it: a request still in flight, or answered after it was sent, may
//     have been counted by the server after the response that allowed it.
//   - When the quota it knows of is used, it spreads requests at the pace
//     of the server's policy (w/q apart: q requests per w seconds), each
//     request owing w/q from when the last response came, rather than
//     waiting for the quota to be whole again; a policy's burst parameter
//     (which rategate's middleware states for token buckets) lets that
//     many go at once at that pace. Without a policy it waits for the time
//     the server gives and then sends one request, whose response says
//     what is allowed next.
//   - A host that pushes back without stating its limits (a 429 or 503,
//     or a request that times out, with no RateLimit field of any
//     dialect) gets a rate learned from its answers: an
//     adaptive.RateLimiter between Learn.Floor and Learn.Ceiling, which
//     every later request to that host takes a permit from, and which
//     starts at the rate of the responses the host gave over the last
//     second. It comes down at once when the host throttles, climbs while
//     the host takes what it is sent, and follows a host whose capacity
//     moves (see package adaptive); it keeps about 0.3% of requests
//     throttled while the capacity holds still. What a host states wins:
//     from the first response that states limits, the learned rate is
//     dropped and the statement kept to. Until a host pushes back, the
//     Transport limits nothing; Learn.Off turns learning off.
//   - It retries a refused request (429 or 503 with Retry-After) up to
//     Retries times, after waiting out the Retry-After, when the request
//     can be replayed: its method is idempotent (GET, HEAD, OPTIONS, TRACE,
//     PUT, DELETE) or it has GetBody, and its body, if any, can be made
//     again with GetBody. Otherwise, or when the wait would be longer than
//     MaxRetryWait or would outlast the context's deadline, it returns the
//     refusal.
//
// The dialects read: the RateLimit and RateLimit-Policy fields of
// draft-ietf-httpapi-ratelimit-headers -08 to -11 (Structured Fields, RFC
// 9651; policy names as Strings or Tokens), draft -07's RateLimit
// dictionary (limit, remaining, reset), draft -06's RateLimit-Limit,
// RateLimit-Remaining and RateLimit-Reset, and X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset. X-RateLimit-Reset is a Unix
// time for some servers (GitHub, go-chi/httprate) and seconds from now for
// others: a value of at least half the current Unix time in milliseconds is
// read as Unix milliseconds, one of at least half the current Unix time in
// seconds as Unix seconds, a smaller one as seconds from now (no reset is
// decades away). Responses served from a cache (Age > 0) are not
// read.
//
// What it learns is kept per host, not per route: a server that gives its
// routes different policies is best called through one Transport per
// policy. It keeps what it learned of at most MaxHosts hosts (plus those
// with requests under way): beyond that, the least recently used host is
// forgotten (its learned rate, limits and Retry-After), and is learned
// afresh if it comes back. A host's state takes about 340 bytes with a
// stated policy, 1.35 KB with a learned rate: at most about 5.5 MB with
// the default MaxHosts. A request whose wait would outlast its context's deadline fails
// at once with an error for which errors.Is(err, context.DeadlineExceeded)
// holds, and one whose host takes no request for longer than MaxRetryWait
// fails at once with ErrBlocked. The zero Transport uses
// http.DefaultTransport and limits nothing itself. A Transport must not be
// copied after first use.
type Transport struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Limiter, if set, gives a permit to every request.
	Limiter limiter.Limiter
	// PerHost, if set, returns the limiter of a host (the request URL's
	// Host: "host" or "host:port"), such as a limiter.Keyed's For, or an
	// adaptive limiter per host, which learns from the outcomes the
	// Transport reports on its leases.
	PerHost func(host string) limiter.Limiter
	// Retries is how many times a refused, replayable request is sent
	// again: 0 means DefaultRetries, a negative value none.
	Retries int
	// MaxRetryWait is the longest Retry-After waited out to retry, and the
	// longest a request waits for its host: 0 means DefaultMaxRetryWait.
	MaxRetryWait time.Duration
	// Learn configures the rates learned for hosts that push back without
	// stating their limits.
	Learn LearnOptions
	// MaxHosts caps the hosts whose limits are kept: 0 means
	// DefaultMaxHosts.
	MaxHosts int

	once  sync.Once
	hosts *ratelimit.Hosts
	err   error // of the options
}

// DefaultMaxHosts is Transport.MaxHosts when it is 0.
const DefaultMaxHosts = ratelimit.DefaultMaxHosts

// The bounds of the learned rates when LearnOptions leaves them zero: 1
// request a second, and 10,000.
var (
	DefaultLearnFloor   = ratelimit.DefaultFloor
	DefaultLearnCeiling = ratelimit.DefaultCeiling
)

// LearnOptions configures the rates a Transport learns for the hosts that
// push back without stating their limits. The zero LearnOptions learns,
// between DefaultLearnFloor and DefaultLearnCeiling.
type LearnOptions struct {
	// Off learns nothing: such a host is held back only by its
	// Retry-After and by the Transport's own limiters.
	Off bool
	// Floor is the lowest learned rate: however often a host throttles,
	// requests go at least this fast (and Retry-After still holds them
	// back). The zero Rate means DefaultLearnFloor.
	Floor limiter.Rate
	// Ceiling is the highest learned rate. The zero Rate means
	// DefaultLearnCeiling, or Floor when that is higher.
	Ceiling limiter.Rate
}

// state returns the Transport's hosts, made on first use, or the error of
// its options.
func (t *Transport) state() (*ratelimit.Hosts, error) {
	t.once.Do(func() {
		if t.MaxHosts < 0 {
			t.err = &limiter.OptionError{Field: "MaxHosts", Problem: fmt.Sprintf("%d is negative", t.MaxHosts)}
			return
		}
		cfg := ratelimit.Config{MaxHosts: t.MaxHosts, Learn: !t.Learn.Off, Floor: t.Learn.Floor, Ceiling: t.Learn.Ceiling}
		if t.err = ratelimit.CheckLearn(&cfg); t.err != nil {
			var oe *limiter.OptionError
			if errors.As(t.err, &oe) {
				t.err = &limiter.OptionError{Field: "Learn." + oe.Field, Problem: oe.Problem}
			}
			return
		}
		t.hosts = ratelimit.NewHosts(cfg)
	})
	return t.hosts, t.err
}

// HostLimits is what a Transport knows of one host's limits; see
// Transport.Limits.
type HostLimits struct {
	// Stated: the host states its limits in its responses, and the
	// Transport keeps to them.
	Stated bool
	// Pace is the spacing of the stated policy (w/q: q requests per w
	// seconds), 0 when the host states none.
	Pace time.Duration
	// Learned is the rate learned from the host's pushback while it
	// states nothing; the zero Rate when none was learned.
	Learned limiter.Rate
	// NotBefore is the time before which the host asked for no request
	// (Retry-After); the zero Time when it asked for none, or that time
	// has passed.
	NotBefore time.Time
}

// Limits returns what t knows of host's limits ("host" or "host:port", as
// in the request URL), and false when it keeps nothing of the host.
func (t *Transport) Limits(host string) (HostLimits, bool) {
	hs, err := t.state()
	if err != nil {
		return HostLimits{}, false
	}
	in, ok := hs.Info(host)
	return HostLimits{Stated: in.Stated, Pace: in.Pace, Learned: in.Learned, NotBefore: in.NotBefore}, ok
}

// RoundTrip sends r, keeping to the limits; see Transport.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	retries := t.Retries
	if retries == 0 {
		retries = DefaultRetries
	}
	replayable := canReplay(r)
	req := r
	for attempt := 0; ; attempt++ {
		resp, err := t.send(ctx, req, r.URL.Host)
		if err != nil || attempt >= retries || !replayable {
			return resp, err
		}
		wait, refused := retryAfter(resp, time.Now())
		if !refused || wait > t.maxRetryWait() || pastDeadline(ctx, wait) {
			return resp, nil
		}
		next, err := replay(r)
		if err != nil {
			return resp, nil
		}
		discard(resp)
		req = next
	}
}

func (t *Transport) maxRetryWait() time.Duration {
	if t.MaxRetryWait > 0 {
		return t.MaxRetryWait
	}
	return DefaultMaxRetryWait
}

// send waits for the host and the permits, sends req, and learns from the
// response.
func (t *Transport) send(ctx context.Context, req *http.Request, host string) (*http.Response, error) {
	hs, err := t.state()
	if err != nil {
		closeBody(req)
		return nil, err
	}
	// Wait for the host first, so that no permit is held while it is
	// closed; then for the permits; then for the host again, counting
	// the request, as what it allows may have changed meanwhile (a
	// Retry-After learned by another request).
	h := hs.Pin(host)
	tk, leases, err := t.admit(ctx, hs, h, host)
	if err != nil {
		hs.Unpin(h)
		closeBody(req)
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	start := time.Now()
	resp, err := base.RoundTrip(req)
	now := time.Now()
	latency := now.Sub(start)
	outcome := outcomeOf(resp, err)
	hs.Done(h, tk, response(resp, outcome, now))
	for _, l := range leases {
		l.Report(outcome, latency)
	}
	if err != nil {
		releaseAll(leases)
		return nil, err
	}
	if len(leases) > 0 {
		resp.Body = &releasingBody{ReadCloser: resp.Body, leases: leases}
	}
	return resp, nil
}

// admit waits until h may be sent a request, takes the request's permits,
// and counts it as sent.
func (t *Transport) admit(ctx context.Context, hs *ratelimit.Hosts, h *ratelimit.Host, host string) (ratelimit.Ticket, []limiter.Lease, error) {
	if _, err := hs.Wait(ctx, h, false, t.maxRetryWait()); err != nil {
		return ratelimit.Ticket{}, nil, waitError(host, err)
	}
	leases, err := t.permits(ctx, host, hs.Learned(h))
	if err != nil {
		return ratelimit.Ticket{}, nil, err
	}
	tk, err := hs.Wait(ctx, h, true, t.maxRetryWait())
	if err != nil {
		releaseAll(leases)
		return ratelimit.Ticket{}, nil, waitError(host, err)
	}
	return tk, leases, nil
}

// waitError is the error of a wait for host that failed with err.
func waitError(host string, err error) error {
	var we *ratelimit.WaitError
	switch {
	case !errors.As(err, &we):
		return err // the context's
	case we.Deadline:
		return fmt.Errorf("httplimit: %s takes no request for %v, past the context deadline: %w", host, we.Wait, context.DeadlineExceeded)
	}
	return fmt.Errorf("%w: %s takes no request for %v", ErrBlocked, host, we.Wait)
}

// response is what Hosts learns from a response (nil: none came), whose
// outcome is o.
func response(resp *http.Response, o limiter.Outcome, now time.Time) ratelimit.Response {
	r := ratelimit.Response{At: now, Answered: resp != nil, Throttled: o == limiter.Throttled}
	if resp == nil {
		return r
	}
	r.RetryAfter, r.Refused = retryAfter(resp, now)
	if r.Stale = fromCache(resp); !r.Stale {
		f := ratelimit.HeaderFields(resp.Header, false)
		r.Limits = ratelimit.Read(&f, now)
	}
	return r
}

// outcomeOf is what a response (or the error of a request that got
// none) says of the request's fate: a 429 or 503, or no response in time
// (a timeout), is Throttled; another 4xx or 5xx Failed.
func outcomeOf(resp *http.Response, err error) limiter.Outcome {
	var ne net.Error
	switch {
	case err == nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable):
		return limiter.Throttled
	case err == nil && resp.StatusCode >= 400:
		return limiter.Failed
	case err == nil:
		return limiter.Succeeded
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return limiter.Throttled
	}
	return limiter.OutcomeOf(err)
}

// permits takes a permit from Limiter, from PerHost's limiter and from
// the rate learned for the host (learned, if not nil).
func (t *Transport) permits(ctx context.Context, host string, learned limiter.Limiter) ([]limiter.Lease, error) {
	var leases []limiter.Lease
	for _, lim := range [3]limiter.Limiter{t.Limiter, t.perHost(host), learned} {
		if lim == nil {
			continue
		}
		l, err := lim.Acquire(ctx, 1)
		if err != nil {
			releaseAll(leases)
			return nil, fmt.Errorf("httplimit: waiting for a permit: %w", err)
		}
		leases = append(leases, l)
	}
	return leases, nil
}

func (t *Transport) perHost(host string) limiter.Limiter {
	if t.PerHost == nil {
		return nil
	}
	return t.PerHost(host)
}

// retryAfter returns the wait a 429 or 503 response asks for with
// Retry-After, and whether it is such a response. A delay too large to
// count saturates (RFC 9111's rule for delta-seconds).
func retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return 0, false
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return ratelimit.Forever, true // too many digits: a very long time
		}
		return ratelimit.Seconds(secs), true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// fromCache reports whether resp was served from a cache (a positive Age),
// whose RateLimit fields are stale.
func fromCache(resp *http.Response) bool {
	age := resp.Header.Get("Age")
	return age != "" && age != "0"
}

// canReplay reports whether r may be sent again: an idempotent method or a
// GetBody, and a body that is absent or can be made again.
func canReplay(r *http.Request) bool {
	noBody := r.Body == nil || r.Body == http.NoBody
	if !noBody && r.GetBody == nil {
		return false
	}
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return r.GetBody != nil
}

// replay returns a copy of r to send again, with a new body.
func replay(r *http.Request) (*http.Request, error) {
	next := r.Clone(r.Context())
	if r.Body == nil || r.Body == http.NoBody {
		return next, nil
	}
	body, err := r.GetBody()
	if err != nil {
		return nil, err
	}
	next.Body = body
	return next, nil
}

// pastDeadline reports whether a wait of d would end after ctx's deadline.
func pastDeadline(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < d
}

// discard reads a little of a response that is not returned, so that its
// connection can be reused, and closes it.
func discard(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	_ = resp.Body.Close()
}

func closeBody(r *http.Request) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
}

func releaseAll(leases []limiter.Lease) {
	for i := len(leases) - 1; i >= 0; i-- {
		leases[i].Release()
	}
}

// releasingBody releases the request's leases when the body is closed or
// read to its end.
type releasingBody struct {
	io.ReadCloser
	once   sync.Once
	leases []limiter.Lease
}

func (b *releasingBody) release() { b.once.Do(func() { releaseAll(b.leases) }) }

func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.release()
	}
	return n, err
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}
