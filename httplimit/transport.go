package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rategate/rategate/limiter"
)

// DefaultRetries is the retries of a refused request when Transport.Retries
// is 0.
const DefaultRetries = 2

// DefaultMaxRetryWait is the longest Retry-After a Transport waits out to
// retry when Transport.MaxRetryWait is 0.
const DefaultMaxRetryWait = time.Minute

// Transport is an http.RoundTripper for a client of rate-limited servers:
// it keeps to its own limits and to the ones the servers state.
//
//   - Before each request (and each retry) it takes a permit from Limiter
//     and from PerHost's limiter for the request's host, waiting as the
//     request's context allows. A permit of a limiter that takes permits
//     back (limiter.Concurrency) is released when the response body is
//     closed, so it caps the requests in flight.
//   - After a 429 or 503 response with Retry-After (delay seconds or an
//     HTTP date), it sends no request to that host before that time.
//   - It reads the RateLimit field of every response (see
//     draft-ietf-httpapi-ratelimit-headers): after r more requests to a
//     host it sends no more to it until the effective window t has passed,
//     then one, whose response says what the server allows next. Requests
//     in flight when a response comes count against its r.
//   - It retries a refused request (429 or 503 with Retry-After) up to
//     Retries times, after waiting out the Retry-After, when the request
//     can be replayed: its method is idempotent (GET, HEAD, OPTIONS, TRACE,
//     PUT, DELETE) or it has GetBody, and its body, if any, can be made
//     again with GetBody. Otherwise, or when the wait would be longer than
//     MaxRetryWait or would outlast the context's deadline, it returns the
//     refusal.
//
// What it learns is kept per host, not per route: a server that gives its
// routes different policies is best called through one Transport per
// policy. A request whose wait would outlast its context's deadline fails at once
// with an error for which errors.Is(err, context.DeadlineExceeded) holds.
// The zero Transport uses http.DefaultTransport and limits nothing itself.
// A Transport must not be copied after first use.
type Transport struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Limiter, if set, gives a permit to every request.
	Limiter limiter.Limiter
	// PerHost, if set, returns the limiter of a host (the request URL's
	// Host: "host" or "host:port"), such as a limiter.Keyed's For.
	PerHost func(host string) limiter.Limiter
	// Retries is how many times a refused, replayable request is sent
	// again: 0 means DefaultRetries, a negative value none.
	Retries int
	// MaxRetryWait is the longest Retry-After waited out to retry: 0 means
	// DefaultMaxRetryWait.
	MaxRetryWait time.Duration

	mu    sync.Mutex
	hosts map[string]*hostState
}

// hostState is what a Transport knows of one host's limits.
type hostState struct {
	notBefore time.Time // Retry-After: no request before this
	known     bool      // budget and until come from a RateLimit field
	budget    int64     // requests that may be sent before until
	until     time.Time // the end of the effective window
	probing   bool      // known, window over, one request out to learn more
	sent      int64     // requests sent to the host (their sequence numbers)
	applied   int64     // sequence number of the last response applied
	inflight  int       // requests sent and not answered
	changed   chan struct{}
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
	seq, err := t.admit(ctx, host)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	leases, err := t.permits(ctx, host)
	if err != nil {
		t.learn(host, seq, nil)
		closeBody(req)
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	t.learn(host, seq, resp)
	if err != nil {
		releaseAll(leases)
		return nil, err
	}
	if len(leases) > 0 {
		resp.Body = &releasingBody{ReadCloser: resp.Body, leases: leases}
	}
	return resp, nil
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

// admit waits until host may be sent a request (Retry-After passed, budget
// left or a new window), counts the request as sent and returns its
// sequence number.
func (t *Transport) admit(ctx context.Context, host string) (int64, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		t.mu.Lock()
		h := t.host(host)
		now := time.Now()
		wait, changed := h.wait(now)
		if wait == 0 && changed == nil {
			h.sent++
			h.inflight++
			seq := h.sent
			t.mu.Unlock()
			return seq, nil
		}
		t.mu.Unlock()
		if wait > 0 && pastDeadline(ctx, wait) {
			return 0, fmt.Errorf("httplimit: %s asks for no request for %v, past the context deadline: %w", host, wait, context.DeadlineExceeded)
		}
		var tick <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			tick = timer.C
		}
		select {
		case <-tick:
		case <-changed:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// wait says how long a request to h must wait at now (0: none), or which
// channel to wait on (a probe is out): nil, 0 when it may go now, in which
// case the budget is taken.
func (h *hostState) wait(now time.Time) (time.Duration, <-chan struct{}) {
	if now.Before(h.notBefore) {
		return h.notBefore.Sub(now), nil
	}
	if !h.known {
		return 0, nil
	}
	if h.budget > 0 {
		h.budget--
		return 0, nil
	}
	if now.Before(h.until) {
		return h.until.Sub(now), nil
	}
	if h.probing {
		if h.changed == nil {
			h.changed = make(chan struct{})
		}
		return 0, h.changed
	}
	h.probing = true
	return 0, nil
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
			if h.inflight == 0 && !now.Before(h.notBefore) && !now.Before(h.until) {
				delete(t.hosts, k)
			}
		}
	}
	h := &hostState{}
	t.hosts[host] = h
	return h
}

// learn records the response to request seq of host (nil: not sent).
func (t *Transport) learn(host string, seq int64, resp *http.Response) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.host(host)
	h.inflight--
	if h.changed != nil {
		close(h.changed)
		h.changed = nil
	}
	if resp == nil {
		h.probing = false
		return
	}
	if wait, refused := retryAfter(resp, now); refused && now.Add(wait).After(h.notBefore) {
		h.notBefore = now.Add(wait)
	}
	if seq <= h.applied {
		return // a later request's response was applied already
	}
	h.applied = seq
	h.probing = false
	r, tsecs, ok := parseRateLimit(resp.Header)
	if !ok || fromCache(resp) {
		if !now.Before(h.until) {
			h.known = false // the window is over and the server says no more
		}
		return
	}
	// The requests still in flight, sent before or after this one, may not
	// be counted in r yet.
	h.known = true
	h.budget = r - int64(h.inflight)
	h.until = now.Add(time.Duration(tsecs) * time.Second)
}

// retryAfter returns the wait a 429 or 503 response asks for with
// Retry-After, and whether it is such a response.
func retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return 0, false
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, int64(1<<63-1)/int64(time.Second))) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}

// parseRateLimit reads the RateLimit field: a list of service limit items
// `"policy";r=50;t=30`. It returns the item with the least quota left (of
// those with as little, the longest window), and false when the field is
// absent or malformed (a malformed field is ignored, as the draft says).
func parseRateLimit(h http.Header) (r, t int64, ok bool) {
	vals := h["Ratelimit"]
	if len(vals) == 0 {
		return 0, 0, false
	}
	found := false
	for _, v := range vals {
		for _, item := range splitList(v) {
			ir, it, iok := parseLimitItem(item)
			if !iok {
				return 0, 0, false
			}
			if !found || ir < r || (ir == r && it > t) {
				r, t, found = ir, it, true
			}
		}
	}
	return r, t, found
}

// splitList splits a structured-field list at the commas outside strings.
func splitList(v string) []string {
	var items []string
	quoted, start := false, 0
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			items = append(items, v[start:i])
			start = i + 1
		}
	}
	return append(items, v[start:])
}

// parseLimitItem reads `"policy";r=50;t=30` (t optional).
func parseLimitItem(item string) (r, t int64, ok bool) {
	item = strings.TrimSpace(item)
	if len(item) < 2 || item[0] != '"' {
		return 0, 0, false
	}
	end := 1
	for ; end < len(item) && item[end] != '"'; end++ {
		if item[end] == '\\' {
			end++
		}
	}
	if end >= len(item) {
		return 0, 0, false
	}
	hasR := false
	for _, p := range strings.Split(item[end+1:], ";")[1:] {
		name, val, _ := strings.Cut(strings.TrimSpace(p), "=")
		n, err := strconv.ParseInt(val, 10, 64)
		switch {
		case name != "r" && name != "t":
			continue // other parameters are comments
		case err != nil || n < 0:
			return 0, 0, false
		case name == "r":
			r, hasR = n, true
		default:
			t = n
		}
	}
	return r, t, hasR
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
