// Package otellimit records what rategate's limiters decide as
// OpenTelemetry metrics (go.opentelemetry.io/otel/metric): how many
// acquisitions each policy granted and refused, and why; how long callers
// waited and how many wait; how many leases are held and for how long; the
// limit or rate in force; the outcomes callers report; who answered the
// decisions of Redis-backed limiters.
//
// It is a module of its own, so that a program that uses package limiter
// alone downloads no OpenTelemetry.
//
// # Setup
//
// Make one [Metrics] per meter provider and wrap each limiter under a
// policy name:
//
//	m, err := otellimit.New(otellimit.Options{MeterProvider: provider})
//	lim := m.Wrap(bucket, "api")                          // any limiter.Limiter
//	mw, err := httplimit.New(m.Middleware(opts, nil))     // an HTTP middleware
//	p, err := pool.New(pool.Options{Workers: 8, Limiter: m.Wrap(conc, "jobs")})
//	t := &httplimit.Transport{Limiter: m.Wrap(out, "upstream"), PerHost: m.WrapPerKey(hosts.For, "upstream.host", nil)}
//
// A wrapped limiter decides exactly as the limiter it wraps: only what it
// decided is recorded. Wrap the limiter a primitive is given, not a member
// of a limiter.Chain (a pool with both Limiter and PerKey chains them
// itself: wrap neither of those, or wrap them knowing that the chain then
// asks a wrapped member first and cannot give back its rate permits when
// another member refuses; see limiter.Chain).
//
// # Instruments
//
// Names follow ASP.NET Core's stable rate-limiting conventions
// (aspnetcore.rate_limiting.*) in the rategate namespace. Every instrument
// has the attribute rategate.rate_limiting.policy, the name given when
// wrapping. Keyed limiters (one limiter per client, host or tenant) are
// counted together under their policy: no key, IP address or URL becomes an
// attribute unless a [KeyMapper] maps keys to a few values, recorded as
// rategate.rate_limiting.key (at most Options.MaxKeyValues of them per
// policy).
//
//	rategate.rate_limiting.requests                 counter   {request}   policy, result [, key]
//	rategate.rate_limiting.request.time_in_queue    histogram s           policy, result [, key]
//	rategate.rate_limiting.queued_requests          updown    {request}   policy
//	rategate.rate_limiting.queued_permits           updown    {permit}    policy
//	rategate.rate_limiting.active_request_leases    updown    {request}   policy [, key]
//	rategate.rate_limiting.request_lease.duration   histogram s           policy [, key]
//	rategate.rate_limiting.limit                    gauge     {permit}    policy
//	rategate.rate_limiting.rate                     gauge     {permit}/s  policy
//	rategate.rate_limiting.outcomes                 counter   {request}   policy, outcome [, key]
//	rategate.rate_limiting.redis.decisions          counter   {decision}  policy, redis.answer
//	rategate.rate_limiting.redis.duration           histogram s           policy, redis.answer
//
// What they say:
//
//   - requests counts every TryAcquire and Acquire (and every request of an
//     instrumented middleware) by [Result]: granted, limited, queue_full,
//     exceeds_limit, unavailable, closed, canceled, deadline_exceeded,
//     error.
//   - request.time_in_queue is the time each Acquire call took, granted or
//     not (0 for one granted at once), by result.
//   - queued_requests and queued_permits are the Acquire calls waiting and
//     the permits they ask for, from the wrapped limiters' Stats, summed
//     over the limiters of the policy.
//   - active_request_leases and request_lease.duration are the leases
//     that hold permits until released (a limiter.Concurrency's, a
//     redislimit.Concurrency's, a chain's holding one) from grant to
//     Release. A rate limiter's permits are spent when granted: its leases
//     are neither counted nor timed.
//   - limit and rate are the limit in force of a wrapped limiter with a
//     Limit() int method (limiter.Concurrency, the window limiters, adaptive
//     limiters) and the rate of one with a Rate() limiter.Rate method (the
//     token bucket, the pacer, adaptive rate limiters), summed over the
//     limiters of the policy.
//   - outcomes counts the outcomes reported with Lease.Report
//     (succeeded, throttled, failed, unknown) on the leases that hold
//     permits (limiter.Lease.Holds: a concurrency limiter's), which still
//     reach the wrapped limiter's lease. A rate limiter's leases are
//     passed to the caller as they are, with nothing allocated, so that
//     their Report and Settle reach the limiter exactly; their outcomes
//     are not counted here (an adaptive rate limiter's response to them
//     shows in the rate gauge).
//   - redis.decisions and redis.duration count the decisions of
//     Redis-backed limiters by who answered (redis, fail_closed,
//     fail_open, fallback) and time them; see [Metrics.Redis].
//
// Histograms use the boundaries of the OpenTelemetry HTTP conventions
// (5 ms to 10 s).
//
// # Cost
//
// Nothing changes for code that does not wrap its limiters. A wrapped
// limiter counts its decisions in atomic counters of the policy, which one
// callback reads when the meter provider collects, together with the
// limiters' Stats: a granted TryAcquire of a rate limiter costs one atomic
// add more and allocates nothing. No goroutine or timer is started. An
// Acquire reads the clock twice and records into a histogram; a lease that
// holds permits is allocated, timed and recorded when released.
package otellimit
