package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rategate/rategate/internal/precise"
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
//     response's outcome (Lease.Report: throttled for a 429 or 503,
//     succeeded or failed otherwise, with the latency), so an adaptive
//     limiter given as PerHost learns from each host's answers.
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
// policy. A request whose wait would outlast its context's deadline fails
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

	mu    sync.Mutex
	hosts map[string]*hostState
}

// hostState is what a Transport knows of one host's limits.
//
// Each response's r says the host could take r more requests when it
// answered; of the requests sent since, those answered before that
// response's request was sent were counted in r, the others may not have
// been. So the host can take at least r + 1 + answeredAtSend - sent more,
// and time only adds to that (windows pass, buckets refill): sent may
// reach the largest such cap. When it has, a request goes at the policy's
// pace, or once the time the last response gave for more quota has come.
type hostState struct {
	notBefore time.Time // Retry-After: no request before this
	sent      int64     // requests sent to the host
	answered  int64     // of which answered (or failed)
	known     bool      // the host states limits
	quotas    []policyCap
	probing   bool // one request out beyond a cap, to learn more
	pace      time.Duration
	burst     int64     // requests that may go at once at the policy's pace
	tat       time.Time // with pace: no request at the policy's pace before tat - (burst-1)*pace
	maxFlight int64     // a concurrent-requests policy's quota (0: none)
	changed   chan struct{}
}

// ticket is what a sent request remembers for its response.
type ticket struct {
	answeredAtSend int64 // responses received before it was sent
	probe          bool
	sentAt         time.Time
}

// maxHosts is how many hosts a Transport keeps state for before it drops
// those with nothing to remember.
const maxHosts = 1024

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
	// Wait for the host first, so that no permit is held while it is
	// closed; then for the permits; then for the host again, counting
	// the request, as what it allows may have changed meanwhile (a
	// Retry-After learned by another request).
	if _, err := t.admit(ctx, host, false); err != nil {
		closeBody(req)
		return nil, err
	}
	leases, err := t.permits(ctx, host)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	tk, err := t.admit(ctx, host, true)
	if err != nil {
		releaseAll(leases)
		closeBody(req)
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	latency := time.Since(tk.sentAt)
	t.learn(host, tk, resp)
	outcome := limiter.OutcomeOf(err)
	if err == nil {
		outcome = outcomeOf(resp.StatusCode)
	}
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

// outcomeOf is what a response's status says of the request's fate.
func outcomeOf(status int) limiter.Outcome {
	switch {
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return limiter.Throttled
	case status >= 400:
		return limiter.Failed
	}
	return limiter.Succeeded
}

// permits takes a permit from Limiter and from PerHost's limiter.
func (t *Transport) permits(ctx context.Context, host string) ([]limiter.Lease, error) {
	var leases []limiter.Lease
	for _, lim := range [2]limiter.Limiter{t.Limiter, t.perHost(host)} {
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

// admit waits until host may be sent a request. With count, it then counts
// the request as sent and returns its ticket.
func (t *Transport) admit(ctx context.Context, host string, count bool) (ticket, error) {
	var timer precise.Timer
	defer timer.Stop()
	for {
		t.mu.Lock()
		h := t.host(host)
		now := time.Now()
		how, wait, changed := h.admit(now)
		if how != 0 {
			var tk ticket
			if count {
				tk = h.take(how, now)
			}
			t.mu.Unlock()
			return tk, nil
		}
		t.mu.Unlock()
		if err := t.tooLong(ctx, host, wait); err != nil {
			return ticket{}, err
		}
		var at time.Time
		if wait > 0 {
			at = now.Add(wait)
		}
		// The pace of a server's policy is kept on time: a request late
		// by a timer's lateness is a request the server allowed and did
		// not get.
		if timer.Until(ctx, changed, at, 0) == precise.Done {
			return ticket{}, ctx.Err()
		}
	}
}

// tooLong fails a wait for host that is longer than MaxRetryWait or would
// outlast ctx's deadline.
func (t *Transport) tooLong(ctx context.Context, host string, wait time.Duration) error {
	switch {
	case wait > t.maxRetryWait():
		return fmt.Errorf("%w: %s takes no request for %v", ErrBlocked, host, wait)
	case wait > 0 && pastDeadline(ctx, wait):
		return fmt.Errorf("httplimit: %s takes no request for %v, past the context deadline: %w", host, wait, context.DeadlineExceeded)
	}
	return nil
}

// policyCap is what the host's responses say of one of its policies.
type policyCap struct {
	name string
	cap  int64     // sent may reach this
	more time.Time // when the last response said more quota comes
}

// maxPolicies bounds the policies a host's state keeps; further ones are
// not read.
const maxPolicies = 8

// policy returns the state of the named policy, made if new (nil beyond
// maxPolicies).
func (h *hostState) policy(name string) *policyCap {
	for i := range h.quotas {
		if h.quotas[i].name == name {
			return &h.quotas[i]
		}
	}
	if len(h.quotas) == maxPolicies {
		return nil
	}
	h.quotas = append(h.quotas, policyCap{name: name, cap: math.MinInt64})
	return &h.quotas[len(h.quotas)-1]
}

// How a request may go: within what responses allow, at the policy's
// pace, or as the one request that learns what is allowed now.
type admission uint8

const (
	allowed admission = iota + 1
	paced
	probe
)

// admit says how a request to h may go at now, or how long it must wait
// (0: no timer) and which channel to wait on for a response (nil: none).
func (h *hostState) admit(now time.Time) (admission, time.Duration, <-chan struct{}) {
	if now.Before(h.notBefore) {
		return 0, h.notBefore.Sub(now), nil
	}
	if h.maxFlight > 0 && h.sent-h.answered >= h.maxFlight {
		return 0, 0, h.change()
	}
	exhausted, more := false, time.Time{}
	for _, p := range h.quotas {
		if h.sent >= p.cap {
			exhausted = true
			more = maxTime(more, p.more)
		}
	}
	if !h.known || !exhausted {
		return allowed, 0, nil
	}
	next := more
	if h.pace > 0 && h.sent == h.answered {
		due := h.tat.Add(-time.Duration(min(h.burst-1, int64(maxWait/h.pace))) * h.pace)
		if !now.Before(due) {
			return paced, 0, nil
		}
		next = minTime(next, due)
	}
	if !now.Before(more) {
		if !h.probing {
			return probe, 0, nil
		}
		return 0, 0, h.change() // the probe's answer says what comes next
	}
	if h.sent > h.answered {
		return 0, next.Sub(now), h.change()
	}
	return 0, next.Sub(now), nil
}

// take counts a request admitted as a at now as sent.
func (h *hostState) take(a admission, now time.Time) ticket {
	tk := ticket{answeredAtSend: h.answered, sentAt: now, probe: a == probe}
	if tk.probe {
		h.probing = true
	}
	h.sent++
	return tk
}

func (h *hostState) change() <-chan struct{} {
	if h.changed == nil {
		h.changed = make(chan struct{})
	}
	return h.changed
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// host returns host's state, made if new. t.mu is held.
func (t *Transport) host(host string) *hostState {
	if h, ok := t.hosts[host]; ok {
		return h
	}
	if t.hosts == nil {
		t.hosts = make(map[string]*hostState)
	}
	if len(t.hosts) >= maxHosts {
		now := time.Now()
		for k, h := range t.hosts {
			if h.idle(now) {
				delete(t.hosts, k)
			}
		}
	}
	h := &hostState{}
	t.hosts[host] = h
	return h
}

// idle reports whether h remembers nothing that could hold a request back.
func (h *hostState) idle(now time.Time) bool {
	if h.sent != h.answered || now.Before(h.notBefore) || now.Before(h.tat) {
		return false
	}
	for _, p := range h.quotas {
		if now.Before(p.more) {
			return false
		}
	}
	return true
}

// learn records the response to a request sent with tk (resp nil: no
// response).
func (t *Transport) learn(host string, tk ticket, resp *http.Response) {
	now := time.Now()
	var lim serverLimits
	if resp != nil && !fromCache(resp) {
		lim = readLimits(resp.Header, now)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.host(host)
	h.answered++
	if tk.probe {
		h.probing = false
	}
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
	if resp == nil {
		h.owe(now)
		return
	}
	if wait, refused := retryAfter(resp, now); refused && addTime(now, wait).After(h.notBefore) {
		h.notBefore = addTime(now, wait)
	}
	if !lim.known() {
		if !fromCache(resp) && h.idle(now) {
			h.known, h.quotas, h.pace, h.maxFlight = false, nil, 0, 0 // the server says no more
		}
		h.owe(now)
		return
	}
	h.known = true
	if lim.pace > 0 {
		h.pace, h.burst = lim.pace, max(lim.burst, 1)
	}
	h.maxFlight = lim.concurrent
	for _, q := range lim.left {
		// The requests answered before this one was sent are counted in
		// q.r; every other request sent so far may not be.
		if p := h.policy(q.policy); p != nil {
			p.cap = max(p.cap, satAdd(q.r, tk.answeredAtSend+1))
			p.more = addTime(now, q.t)
		}
	}
	h.owe(now)
}

// owe moves the policy's pace on by one request answered at now.
func (h *hostState) owe(now time.Time) {
	if h.pace > 0 {
		if h.tat.Before(now) {
			h.tat = now
		}
		h.tat = addTime(h.tat, h.pace)
	}
}

// addTime is t.Add(d), saturating at a time far in the future.
func addTime(t time.Time, d time.Duration) time.Time {
	if far := t.Add(maxWait); d >= maxWait || t.Add(d).After(far) {
		return far
	}
	return t.Add(d)
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
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
			return maxWait, true // too many digits: a very long time
		}
		return seconds(secs), true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
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
