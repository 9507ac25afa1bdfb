// Package adaptive provides limiters whose limit is not told but found: a
// rate limiter that follows the capacity of a service that throttles its
// callers, and a concurrency limiter that follows what keeps a service's
// latency near its latency unloaded. Both are [limiter.Limiter]s, so
// everything in rategate that takes a limiter (a pool, a range loop, a
// channel, a byte stream, an HTTP client) can run under one.
//
// # The feedback
//
// A limiter that adapts needs to hear what became of the calls it admitted.
// The caller says so on the lease it already holds, with
// [limiter.Lease.Report]: [limiter.Succeeded], [limiter.Throttled] (HTTP 429
// or 503, gRPC RESOURCE_EXHAUSTED, a timeout taken for overload),
// [limiter.Failed] (an error that says nothing about capacity), and the
// latency it measured. [limiter.OutcomeOf] turns an error into an outcome,
// and wrapping [limiter.ErrThrottled] marks an error as throttling. A report
// costs a mutex and no allocation. A lease that is never reported teaches
// nothing, and a limiter that hears nothing keeps its limit.
//
//	lease, err := lim.Acquire(ctx, 1)
//	if err != nil {
//		return err
//	}
//	start := time.Now()
//	err = call(ctx)
//	lease.Report(limiter.OutcomeOf(err), time.Since(start))
//	lease.Release()
//
// The primitives that acquire for their caller hand the lease on: a
// pool's tasks are reported with the error they return, a range loop over
// iter.Leases gets each value's lease, channel.Chan.RecvLease gives the
// receiver the item's, and httplimit and grpclimit report each request's
// status.
//
// # How the rate moves
//
// A [RateLimiter] is a token bucket whose rate moves between a floor and a
// ceiling the caller sets. Throttling is the only thing that says where the
// capacity of the other side is, so the limiter works in cycles, each of
// which ends with (about) one throttled call:
//
//   - Search. With no capacity known, the rate doubles every 0.4 s of
//     successful calls, from Initial, until a call is throttled.
//   - Back off. A throttled call brings the rate down at once, to 90% of
//     the capacity it estimates: what the other side let through over the
//     last second (at a few calls a second, the count plus one, since a
//     count of evenly spaced calls is one short at worst), at most the rate
//     that was throttled. Calls granted before the decrease and throttled
//     after it were answered by it and lower nothing more; calls granted
//     after it and throttled soon (before 20 successes and within 1 s)
//     mean the decrease was not enough, and each such decrease in a row
//     cuts deeper (by the share of calls that got through, once there are
//     enough of them to tell). A call reported throttled within about one
//     latency of the decrease (granted just after it, so it reached the
//     other side among the last calls granted before) is not taken for
//     such a sign.
//   - Return and hold. The rate climbs back to the capacity found quickly
//     at first, then gently, and levels off there. Getting back takes as
//     long as about 300 successful calls at that capacity (at least 1 s, at
//     most 8 s).
//   - Probe. Then the rate creeps above the capacity found, slowly at first
//     and faster and faster. If the other side has not grown, a call is
//     throttled soon, and the cycle starts again. If the rate gets 30% above
//     the capacity found without a throttle, the capacity has moved, and the
//     limiter searches again.
//   - Pace by the latency. Above the capacity found, the rate goes at most
//     3% above the rate at which the call just reported was granted (its
//     latency ago), or 0.3 calls per round trip if that is more, and while
//     searching at most 25% above it, or one call per round trip: growth
//     waits for the outcomes of the calls sent at the rate it grows from.
//     With calls of a few milliseconds this never binds; with calls of
//     hundreds, it keeps the calls sent past the capacity before the first
//     throttle comes back few. Reports with a latency of 0 set no pace.
//
// So each failed probe costs about one throttled call (plus those already on
// the wire, which grow with the latency), once per some 300 successful
// calls: about 0.3% of the calls are throttled while the capacity holds
// still. Under about 40 calls a second, the probes come every 8 s or so,
// fewer than 300 calls apart: at 25 calls a second about 0.5% of the calls
// are throttled, at 4 a second about 5%. Calls that take long cost more:
// in the scenario of TestRateFollowsCapacity (100, 40, then 200 calls a
// second), 0.4% of all calls are throttled with 20 ms calls, 1.4% with
// 100 ms calls, 2.8% with 250 ms and 4.2% with 500 ms, most of them while
// searching at the start and after the step up. A capacity that falls is followed within a few calls. A capacity
// that rises is found at the next probe: from 40 calls a second, within
// about 2 to 8 s, depending on where in its cycle the rise finds the
// limiter (bench/adaptive measures it). Time, for all of this, is counted in
// successful calls at the rate in force, and only while the caller uses at
// least a quarter of the rate: an idle or lightly used limiter does not
// climb, so that it does not reach its ceiling untested and flood the other
// side when the demand comes back.
//
// Whatever the outcomes, the bucket's bound holds: in every interval, the
// permits granted stay within Burst plus what the rates in force allowed
// over it (a decrease keeps the permits already granted counted), and the
// rate never goes above Ceiling nor below Floor.
//
// A caller that takes permits on an estimate (1,000 tokens of a model
// call, a 64 KiB transfer) settles the lease with the actual cost once
// known, with [limiter.Lease.Settle], as it would a [limiter.TokenBucket]'s
// lease, and then reports the outcome on the settled lease, so that the
// limiter counts what went through at its actual cost. Unused permits go
// back to the bucket as far as no later grant can have relied on them (all
// of them when settled at once; nothing for a lease granted before the
// rate last changed), and overuse becomes a debt that later grants pay:
// the bound above holds over the actual costs, as package limiter states
// for its token bucket.
//
// # How the concurrency limit moves
//
// A [ConcurrencyLimiter] is a counting semaphore whose limit follows
// latency, in rounds. A round gathers the latencies of the calls completed
// over at least one unloaded latency, and enough of them for their mean to
// be known within about 3% (more when latencies vary more). The unloaded
// latency is learned from the rounds that run under the capacity found.
//
//   - A round whose mean latency is over the unloaded latency by more than
//     5% (or by more than four standard errors of its mean, when latencies
//     vary more) means calls queued at the other side, which therefore
//     worked at its capacity: by Little's law, the calls it completed per
//     second times its unloaded latency. The limit goes to 95% of that at
//     once, so that the queue drains; the round that follows, whose calls
//     were admitted before, is not judged; then the limit goes back to the
//     capacity found.
//   - A round without queueing, with the limit in use, raises the limit: by
//     a quarter per round while far from the capacity found (under 80% of
//     it, or none known, or when the calls in flight passed it by 20%
//     without queueing: it moved), by about √limit/4 per round near it.
//   - When cut after cut leaves the latency as long, the calls were not
//     queueing: the other side got slower, and that latency is its unloaded
//     latency now.
//
// So the calls in flight keep close to the other side's capacity (on
// average within a few percent, swinging between about 90% and 115% of
// it), and their latency close to the unloaded latency. [limiter.Throttled]
// lowers the limit by a tenth at once (at most once per unloaded latency).
// A server shedding load puts one in front of its handlers and refuses what
// TryAcquire refuses; a client puts one in front of a dependency and waits
// in Acquire.
//
// Whatever the outcomes, the semaphore's bound holds: at every instant, the
// permits held number at most the limit in force, and never more than
// Ceiling. A lowered limit revokes nothing; it grants nothing more until
// enough leases are released.
//
// # The API
//
// [NewRateLimiter] and [NewConcurrencyLimiter] validate their options into
// a *[limiter.OptionError] naming the field (Floor ≤ Initial ≤ Ceiling, and
// positive). Each limiter has TryAcquire and Acquire (with the queue of
// [limiter.QueueOptions]), Stats, Quota and Close, like the limiters of
// package limiter, and reports its current limit: [RateLimiter.Rate] and
// [ConcurrencyLimiter.Limit].
package adaptive
