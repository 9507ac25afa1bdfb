package httplimit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/rategate/rategate/internal/ratelimit"
	"github.com/rategate/rategate/limiter"
)

// Middleware limits the requests of the handlers it wraps. Make it with
// New; it is safe for concurrent use, holds no global state, and one
// Middleware may wrap many handlers, which then share its limits.
type Middleware struct {
	lim    limiter.Limiter
	shed   limiter.Limiter
	perKey func(string) limiter.Limiter
	keyed  KeyedLimiter
	key    KeyFunc
	cost   func(*http.Request) int
	wait   time.Duration

	quoted     string // the policy name as a structured-field string
	noHeaders  bool
	legacy     bool
	fullStatus int
	onRefuse   func(http.ResponseWriter, *http.Request, Decision)
	onDecision func(*http.Request, Decision)
}

// New returns a Middleware, or an *limiter.OptionError naming the first
// invalid option.
func New(o Options) (*Middleware, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	m := &Middleware{
		lim: o.Limiter, shed: o.Shed, perKey: o.PerKey, keyed: o.Keyed, key: o.Key, cost: o.Cost, wait: o.Wait,
		noHeaders: o.NoHeaders, legacy: o.LegacyHeaders, fullStatus: o.QueueFullStatus,
		onRefuse: o.OnRefuse, onDecision: o.OnDecision,
	}
	if m.key == nil {
		m.key = ClientIP()
	}
	if m.fullStatus == 0 {
		m.fullStatus = http.StatusTooManyRequests
	}
	if m.onRefuse == nil {
		m.onRefuse = writeRefusal
	}
	m.quoted = ratelimit.PolicyName(o.Policy)
	return m, nil
}

// Wrap returns a handler that serves a request with next once the
// middleware grants it its permits, and otherwise refuses it (see
// Options.OnRefuse). A granted lease is released when next returns, so a
// limiter.Concurrency caps the requests in flight.
// It panics if next is nil, as http.Handle does.
func (m *Middleware) Wrap(next http.Handler) http.Handler {
	if next == nil {
		panic("httplimit: nil handler")
	}
	return &handler{m: m, next: next}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

// target is the limiter a request counts against: a Limiter, or a key of
// a KeyedLimiter (kept as a pair so that no Limiter value is made).
type target struct {
	lim   limiter.Limiter
	keyed KeyedLimiter
	key   string
	// quota is the key's Quota after try, when the KeyedLimiter tells it
	// with its decision (a KeyedLog): known says so.
	quota limiter.Quota
	known bool
}

// keyedTryQuoter is a KeyedLimiter that tells a key's Quota with its
// decision, in one look-up.
type keyedTryQuoter interface {
	tryQuota(key string, n int) (limiter.Lease, limiter.Quota)
}

func (t *target) none() bool { return t.lim == nil && t.keyed == nil }

func (t *target) try(n int) limiter.Lease {
	if q, ok := t.keyed.(keyedTryQuoter); ok {
		var l limiter.Lease
		l, t.quota = q.tryQuota(t.key, n)
		t.known = true
		return l
	}
	if t.keyed != nil {
		return t.keyed.TryAcquire(t.key, n)
	}
	return t.lim.TryAcquire(n)
}

func (t *target) acquire(ctx context.Context, n int) (limiter.Lease, error) {
	if t.keyed != nil {
		return t.keyed.Acquire(ctx, t.key, n)
	}
	return t.lim.Acquire(ctx, n)
}

// keyedForeseer is the optional Foresee method of a KeyedLimiter:
// limiter.Foreseer for one key.
type keyedForeseer interface {
	Foresee(key string, n int) (time.Duration, bool)
}

// foresee is the wait of n permits behind t's queue, when its limiter can
// tell it (limiter.Foreseer, or a KeyedLimiter's Foresee).
func (t *target) foresee(n int) (time.Duration, bool) {
	if t.keyed != nil {
		if f, ok := t.keyed.(keyedForeseer); ok {
			return f.Foresee(t.key, n)
		}
		return 0, false
	}
	if f, ok := t.lim.(limiter.Foreseer); ok {
		return f.Foresee(n)
	}
	return 0, false
}

// keyedQuotaAppender is implemented by a KeyedLimiter whose keys' limiters
// are made of several policies: it appends one Quota per member of key's.
type keyedQuotaAppender interface {
	AppendQuotas(key string, dst []limiter.Quota) []limiter.Quota
}

// policies appends to dst the quota of each of t's policies: one, or one
// per member of a limiter that appends several (none when the limiter
// cannot say).
func (t *target) policies(dst []ratelimit.Quota) []ratelimit.Quota {
	switch {
	case t.known:
		return ratelimit.Append(dst, t.quota, false)
	case t.keyed == nil:
		return ratelimit.AppendQuotas(dst, t.lim)
	}
	if a, ok := t.keyed.(keyedQuotaAppender); ok {
		for _, q := range a.AppendQuotas(t.key, nil) {
			dst = ratelimit.Append(dst, q, false)
		}
		return dst
	}
	if q, ok := t.keyed.(keyedQuoter); ok {
		quota := q.Quota(t.key)
		return ratelimit.Append(dst, quota, quota.Limit > 1 && quota.Window > 0 && t.keyedContinuous())
	}
	return dst
}

// keyedContinuous reports whether the permits of t's key come back
// continuously, one at a time, as a token bucket's do.
func (t *target) keyedContinuous() bool {
	switch k := t.keyed.(type) {
	case *limiter.KeyedTokenBucket[string]:
		return true
	case keyedForeseer:
		_, ok := k.Foresee(t.key, 0)
		return ok
	}
	return false
}

// setQuota sets d.Quota to the most constrained of ps and returns its
// index.
func setQuota(d *Decision, ps []ratelimit.Quota) int {
	if len(ps) == 0 {
		return 0
	}
	mc := ratelimit.MostConstrained(ps)
	d.Quota = ps[mc].Quota
	return mc
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	d := Decision{Cost: 1}
	if m.cost != nil {
		d.Cost = m.cost(r)
	}
	t, ok := m.target(r, &d)
	if !ok {
		m.refuse(w, r, &d, nil, false)
		return
	}
	if t.none() || d.Cost == 0 {
		m.admit(w, r, h.next, &d, &t, limiter.Lease{})
		return
	}
	lease, err := m.take(r, &t, &d)
	if err == nil {
		m.admit(w, r, h.next, &d, &t, lease)
		return
	}
	d.Err = err
	m.classify(r, &d, lease)
	if d.Outcome == Gone {
		if m.onDecision != nil {
			m.onDecision(r, d)
		}
		return
	}
	limited := d.Outcome == Limited || d.Outcome == QueueFull
	var buf [2]ratelimit.Quota
	var ps []ratelimit.Quota
	if limited {
		ps = t.policies(buf[:0]) // not after a failure: the limiter could not decide
	}
	m.refuse(w, r, &d, ps, limited)
}

// target finds the limiter of r, or fills d with a failure.
func (m *Middleware) target(r *http.Request, d *Decision) (target, bool) {
	if d.Cost < 0 {
		d.Outcome, d.Status = Failed, http.StatusInternalServerError
		d.Err = errors.New("httplimit: Options.Cost returned a negative cost")
		return target{}, false
	}
	if m.perKey == nil && m.keyed == nil {
		if m.onDecision != nil {
			d.Key, _ = m.key(r) // for the hook only: one limit does not need it
		}
		return target{lim: m.lim}, true
	}
	key, err := m.key(r)
	if err != nil {
		d.Outcome, d.Status, d.Err = Failed, http.StatusBadRequest, err
		return target{}, false
	}
	d.Key = key
	if m.keyed != nil {
		return target{keyed: m.keyed, key: key}, true
	}
	return target{lim: m.perKey(key)}, true
}

// take asks t for d.Cost permits: at once, or queued up to m.wait.
func (m *Middleware) take(r *http.Request, t *target, d *Decision) (limiter.Lease, error) {
	if m.wait <= 0 {
		l := t.try(d.Cost)
		if l.Granted() {
			return l, nil
		}
		return l, l.Err()
	}
	// The wait behind the whole queue, not only its head's: a request that
	// cannot be served within Wait is refused now, not when Wait ends.
	est, ok := t.foresee(d.Cost)
	if ok && est > m.wait {
		err := fmt.Errorf("httplimit: the wait of %v behind the queue is longer than Options.Wait (%v): %w", est, m.wait, context.DeadlineExceeded)
		return limiter.Denied(err, est), err
	}
	if ok && est == 0 {
		// Grantable now: decided at once, so that however short Wait is
		// (its deadline may pass before Acquire looks), it refuses
		// nothing that needs no wait.
		if l := t.try(d.Cost); l.Granted() || !errors.Is(l.Err(), limiter.ErrLimited) {
			return l, l.Err()
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), m.wait)
	defer cancel()
	if ctx.Err() != nil && r.Context().Err() == nil {
		// Wait ended before the limiter could be asked: it can only
		// grant at once.
		l := t.try(d.Cost)
		return l, l.Err()
	}
	l, err := t.acquire(ctx, d.Cost)
	d.Waited = time.Since(start)
	return l, err
}

// classify sets d's outcome and status from the error of a refused lease.
func (m *Middleware) classify(r *http.Request, d *Decision, l limiter.Lease) {
	d.RetryAfter = l.RetryAfter()
	err := d.Err
	switch {
	case r.Context().Err() != nil:
		d.Outcome = Gone
	case errors.Is(err, limiter.ErrQueueFull):
		d.Outcome, d.Status = QueueFull, m.fullStatus
	case errors.Is(err, limiter.ErrLimited), errors.Is(err, context.DeadlineExceeded):
		d.Outcome, d.Status = Limited, http.StatusTooManyRequests
	case errors.Is(err, limiter.ErrExceedsLimit):
		// Never grantable: refused, with no time to retry after.
		d.Outcome, d.Status, d.RetryAfter = Limited, http.StatusTooManyRequests, -1
	default: // closed, a store that cannot decide, no limiter for the key
		d.Outcome, d.Status = Failed, http.StatusServiceUnavailable
	}
}

// admit takes a permit of Shed for a request its quota granted (l), and
// serves it, or sheds it.
func (m *Middleware) admit(w http.ResponseWriter, r *http.Request, next http.Handler, d *Decision, t *target, l limiter.Lease) {
	var shed limiter.Lease
	if m.shed != nil {
		if shed = m.shed.TryAcquire(1); !shed.Granted() {
			l.Release()
			m.shedOne(w, r, d, shed)
			return
		}
	}
	m.serve(w, r, next, d, t, l, shed)
}

// shedOne answers a request Shed refused (lease): 503 with Retry-After.
func (m *Middleware) shedOne(w http.ResponseWriter, r *http.Request, d *Decision, lease limiter.Lease) {
	d.Outcome, d.Status, d.Err = Shed, http.StatusServiceUnavailable, lease.Err()
	if d.Err == nil {
		d.Err = limiter.ErrLimited
	}
	d.RetryAfter = max(lease.RetryAfter(), time.Second)
	m.setFields(w.Header(), nil, 0, ratelimit.CeilSeconds(d.RetryAfter))
	if m.onDecision != nil {
		m.onDecision(r, *d)
	}
	m.onRefuse(w, r, *d)
}

// serve sets the RateLimit fields, reports the decision, calls next, and
// reports its outcome and latency to the request's leases (the quota's l
// and Shed's shed) when a limiter that may learn from them holds one.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler, d *Decision, t *target, l, shed limiter.Lease) {
	defer shed.Release()
	defer l.Release()
	if !t.none() && (!m.noHeaders || m.legacy || m.onDecision != nil) {
		var buf [2]ratelimit.Quota
		ps := t.policies(buf[:0])
		m.setFields(w.Header(), ps, setQuota(d, ps), 0)
	}
	if m.onDecision != nil {
		m.onDecision(r, *d)
	}
	if !shed.Granted() && (t.lim == nil || !l.Granted()) {
		next.ServeHTTP(w, r) // a Keyed quota, or none: nothing learns
		return
	}
	rec := &statusRecorder{ResponseWriter: w}
	start := time.Now()
	next.ServeHTTP(rec, r)
	o, latency := handlerOutcome(rec.status), time.Since(start)
	shed.Report(o, latency)
	l.Report(o, latency)
}

// handlerOutcome is what the status a handler answered says of its
// request: 429 and 503 are Throttled (the handler, or what it depends on,
// is over its capacity), another 5xx Failed (it says nothing of
// capacity), anything else Succeeded.
func handlerOutcome(status int) limiter.Outcome {
	switch {
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return limiter.Throttled
	case status >= 500:
		return limiter.Failed
	}
	return limiter.Succeeded
}

// statusRecorder records the status a handler answers (0 until it writes
// one; a handler that writes nothing answers 200). Unwrap lets
// http.ResponseController reach what it wraps; Flush, Hijack and
// ReadFrom pass through to it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code // 1xx are informational: the status comes after
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	w.wrote()
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) wrote() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
}

// Unwrap returns the ResponseWriter w wraps, for http.ResponseController.
func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush flushes what w wraps, if it can.
func (w *statusRecorder) Flush() {
	w.wrote()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hijacks the connection of what w wraps, if it can.
func (w *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// ReadFrom copies from r with what w wraps (with its ReadFrom, a file's
// sendfile, when it has one).
func (w *statusRecorder) ReadFrom(r io.Reader) (int64, error) {
	w.wrote()
	return io.Copy(w.ResponseWriter, r)
}

// refuse sets Retry-After (for a refusal over the limit) and the RateLimit
// fields, reports the decision and writes the refusal.
func (m *Middleware) refuse(w http.ResponseWriter, r *http.Request, d *Decision, ps []ratelimit.Quota, limited bool) {
	if limited {
		mc := setQuota(d, ps)
		secs := int64(0)
		if d.RetryAfter >= 0 {
			if d.RetryAfter == 0 {
				// Unknown (a full queue, an expired wait): when the
				// quota is whole again, or a second.
				d.RetryAfter = d.Quota.Reset
			}
			secs = max(ratelimit.CeilSeconds(d.RetryAfter), 1)
		} else {
			d.RetryAfter = 0
		}
		m.setFields(w.Header(), ps, mc, secs)
	}
	if m.onDecision != nil {
		m.onDecision(r, *d)
	}
	m.onRefuse(w, r, *d)
}

// writeRefusal is the default Options.OnRefuse.
func writeRefusal(w http.ResponseWriter, _ *http.Request, d Decision) {
	h := w.Header()
	h["Content-Type"] = textPlain
	h["X-Content-Type-Options"] = nosniff
	w.WriteHeader(d.Status)
	_, _ = w.Write(statusLine(d.Status))
}

var (
	textPlain = []string{"text/plain; charset=utf-8"}
	nosniff   = []string{"nosniff"}
	line429   = []byte(http.StatusText(http.StatusTooManyRequests) + "\n")
)

func statusLine(code int) []byte {
	if code == http.StatusTooManyRequests {
		return line429
	}
	return []byte(http.StatusText(code) + "\n")
}
