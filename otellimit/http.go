package otellimit

import (
	"net/http"

	"github.com/rategate/rategate/httplimit"
)

// Middleware returns o instrumented for httplimit.New under the policy
// o.Policy (DefaultPolicy when empty), the name the middleware also gives
// its RateLimit-Policy field:
//
//   - its OnDecision hook counts every decision (then calls o.OnDecision,
//     if set): served is Granted, a client gone while queued Canceled, any
//     other refusal or failure the [Result] of its error (a request whose
//     key cannot be found, or whose cost is negative, is Error);
//   - its Limiter, PerKey or Keyed is wrapped (as by [Metrics.Wrap],
//     [Metrics.WrapPerKey] or [WrapKeyed], without counting again) to
//     record the time requests wait in the queue (with Options.Wait), the
//     time a lease is held (for a limiter.Concurrency: the handler's time),
//     the outcomes reported, and the queue, limit and rate gauges.
//
// With PerKey or Keyed, mapKey (see [KeyMapper]) may add the key attribute
// to the decisions; it is given "" for a request whose key could not be
// found. With Limiter, mapKey is not used. The returned Options keep every
// other field of o. The state of the limiters wrapped here is observed for
// as long as m is (a middleware has no Close).
func (m *Metrics) Middleware(o httplimit.Options, mapKey KeyMapper[string]) httplimit.Options {
	name := o.Policy
	if name == "" {
		name = DefaultPolicy
	}
	if o.PerKey == nil && o.Keyed == nil {
		mapKey = nil
	}
	kp := newKeyPolicies(m, name, mapKey)
	if o.Limiter != nil {
		o.Limiter = m.wrap(o.Limiter, m.policy(name, "", false), false)
	}
	if o.PerKey != nil {
		o.PerKey = m.wrapPerKey(o.PerKey, kp, false)
	}
	if o.Keyed != nil {
		o.Keyed = wrapKeyed[string](m, o.Keyed, kp, false)
	}
	next := o.OnDecision
	o.OnDecision = func(r *http.Request, d httplimit.Decision) {
		kp.of(d.Key).count(m.decisionResult(d))
		if next != nil {
			next(r, d)
		}
	}
	return o
}

// decisionResult is the Result of a middleware's decision.
func (m *Metrics) decisionResult(d httplimit.Decision) Result {
	switch d.Outcome {
	case httplimit.Served:
		return Granted
	case httplimit.Gone:
		return Canceled
	}
	if r := m.result(d.Err); r != Granted {
		return r
	}
	return Error
}
