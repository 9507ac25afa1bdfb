// Package limiter hands out permits: at most so many per unit of time (a
// rate limiter) or at most so many at once (a concurrency limiter). It is
// the core of rategate: every other package (channels, byte streams, range
// loops, worker pools) takes a [Limiter] and asks it for permits.
//
// # Permits and leases
//
// A permit is one unit of whatever is limited: a request, a message, a byte,
// a running task. A caller asks a Limiter for n permits and gets back a
// [Lease], a small value (never allocated) that says whether the permits
// were granted ([Lease.Granted], [Lease.Permits]) and, if not, why
// ([Lease.Err]) and when to try again ([Lease.RetryAfter]).
//
// A rate limiter spends its permits when it grants them; only the passing of
// time brings them back, and [Lease.Release] does nothing. A [Concurrency]
// limiter lends its permits: a granted lease holds them until Release gives
// them back. Release is safe on any lease (a refused lease or the zero Lease
// does nothing), so code written for any Limiter can release every lease it
// was granted, once, when it is done.
//
// # TryAcquire and Acquire
//
// Every Limiter has two ways to ask:
//
//   - TryAcquire(n) never waits and never queues. It grants n permits if they
//     are available now, and otherwise returns a lease that is not granted.
//   - Acquire(ctx, n) waits, in the limiter's queue, until the n permits are
//     granted. It returns an error exactly when they are not: ctx ended, the
//     queue was full, the limiter was closed, or n can never be granted.
//
// A typical loop:
//
//	lim, err := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 5, Window: time.Second})
//	if err != nil {
//		return err
//	}
//	for _, job := range jobs {
//		if _, err := lim.Acquire(ctx, 1); err != nil {
//			return err // ctx ended, or lim was closed
//		}
//		do(job) // at most 5 jobs start in any second
//	}
//
// A request for more permits than the limiter can ever grant at once (more
// than a token bucket's Burst or a window's Limit) fails at once with
// [ErrExceedsLimit]; a negative n fails with [ErrInvalidCount]. A request for
// 0 permits takes nothing and is granted only when at least one permit could
// be: TryAcquire(0) asks "is there room now?", Acquire(ctx, 0) waits until
// there is.
//
// # The queue
//
// Callers that Acquire when permits are short wait in a queue, served in the
// order set by [QueueOptions].Order:
//
//   - [OldestFirst] (the default) serves waiters first in, first out.
//   - [NewestFirst] serves the newest waiter first, which keeps latency low
//     for fresh work under overload.
//
// [QueueOptions].Limit caps the permits waiting in the queue (permits, not
// callers). When a request that has to wait would go over it, OldestFirst
// fails the newcomer at once with [ErrQueueFull] and NewestFirst fails the
// oldest waiters with ErrQueueFull to make room. The zero Limit means no cap:
// Acquire waits until its context ends, as golang.org/x/time/rate's Wait does.
// Callers that must not wait use TryAcquire.
//
// There is no barging. While anyone waits, TryAcquire fails (with
// [ErrLimited]) rather than take permits ahead of them. The queue is served
// strictly in order: a large request at the head is not starved by small
// ones behind it, even when the small ones would fit now; they wait until
// the head is served. Waiting costs little: only the head waiter arms a
// timer, for the instant the limiter says it can be served; the others sleep
// until they reach the head.
//
// # Algorithms and their bounds
//
// Each limiter keeps one bound, under any interleaving of goroutines, and
// with demand above it grants as close to the bound as it allows: a queued
// request is served at the first instant the bound permits (as far as timers
// are punctual; see Waiting precisely below).
//
//	constructor       algorithm                  bound
//	NewTokenBucket    token bucket (GCRA)        ≤ Burst + Rate·t permits in every interval of length t
//	NewFixedWindow    fixed window counter       ≤ Limit permits per aligned window
//	NewSlidingWindow  segmented sliding window   ≤ Limit permits in every segment-aligned window
//	NewSlidingLog     exact log of grants        ≤ Limit permits in ANY window of length Window
//	NewLeakyBucket    pacer                      consecutive grants ≥ k/Rate apart (k: permits of the first)
//	NewConcurrency    counting semaphore         ≤ Limit permits in use at every instant
//
// In more detail:
//
//   - [TokenBucket]: a bucket of Burst permits, refilled at Rate, full when
//     made. It is the generic cell rate algorithm: its state is one word, so
//     TryAcquire is a clock read and one compare-and-swap, without a lock.
//   - [FixedWindow]: counts permits in the windows [0, Window),
//     [Window, 2·Window), … measured from the limiter's creation. The
//     cheapest and the loosest: up to 2·Limit permits can pass across a
//     window boundary.
//   - [SlidingWindow]: divides the window into Segments and slides it one
//     segment at a time. More segments bring it closer to the sliding log;
//     still, a window of length Window that straddles segments can hold up
//     to 2·Limit.
//   - [SlidingLog]: the strict limiter. It logs its grants for the last
//     Window, so at every instant t the permits granted in (t-Window, t]
//     number at most Limit: no burst at a window edge, no rounding. Its
//     memory is 16 bytes per instant with grants in the last Window, given
//     back as they leave; SlidingWindow's, 16 bytes per segment with grants.
//   - [LeakyBucket]: a pacer that never bursts. After a grant of k permits at
//     t, the next grant comes no earlier than t + k/Rate; its first grant may
//     come at once. Callers that arrive early wait in its queue.
//   - [Concurrency]: a counting semaphore. TryAcquire is one
//     compare-and-swap; permits come back through Lease.Release.
//
// # Exact arithmetic
//
// A [Rate] is two integers, n events per duration d (made by [Per] or
// [ParseRate], which reads "100/s", "5/min", "2/1500ms"), never a float:
// Per(3, time.Second) is three a second, not one every 333.333333 ms. The
// token bucket and the pacer count time in units in which a permit costs a
// whole number of units, and the windows count whole nanoseconds, so no
// rounding accumulates however long a limiter runs; RetryAfter is rounded up
// to the nanosecond, never down. Constructors reject an invalid option (a
// zero or negative limit, window, burst or rate, or one whose arithmetic
// would overflow) with an [*OptionError] naming the field; they never panic
// and never clamp a value silently.
//
// # Time
//
// Each limiter records time.Now when it is made and from then on measures
// time as the monotonic nanoseconds since that instant: wall-clock jumps do
// not affect it, and it works in testing/synctest bubbles, whose virtual
// clock starts in 2000. Limiters are passive: no goroutine, no ticker. Time
// is read only when a limiter is asked, and a timer exists only while someone
// waits in Acquire (the head waiter's). An idle limiter costs only its memory.
//
// # Cancellation and failure
//
// When ctx ends while Acquire waits, Acquire returns ctx's error, so
// errors.Is(err, ctx.Err()) holds. When the limiter can tell at the call that
// the grant would come after ctx's deadline, it does not wait to fail: it
// fails at once with an error for which errors.Is(err,
// context.DeadlineExceeded) holds, and the returned lease's RetryAfter is the
// wait it foresaw.
//
// A waiter that fails (cancelled, timed out, pushed out of the queue, or
// closed) consumes no permits, and the waiters behind it move up. If a grant
// and a cancellation race, the grant wins: err == nil always means the lease
// was granted and must be released like any other.
//
// Every refusal says why, through errors.Is on Acquire's error or on
// [Lease.Err]:
//
//   - [ErrLimited]: TryAcquire found too few permits now, or waiters ahead.
//   - [ErrQueueFull]: the queue's permit cap was reached, or a NewestFirst
//     waiter was pushed out by newer ones.
//   - [ErrClosed]: the limiter was closed.
//   - [ErrExceedsLimit]: n is more than the limiter can ever grant at once,
//     including waiters left asking for more than a lowered limit (SetLimit,
//     SetBurst).
//   - [ErrInvalidCount]: n is negative.
//   - [ErrNoLimiter]: a keyed limiter could not make the key's limiter.
//   - context.Canceled or context.DeadlineExceeded: Acquire's context ended,
//     or its deadline would have passed before the grant.
//
// After a failed Acquire the lease's Err and the returned error agree under
// errors.Is; the error also carries the details (counts, the foreseen wait).
//
// # Retry after
//
// For a lease that was not granted, [Lease.RetryAfter] is the earliest wait
// after which the same request could be granted if nothing else took permits
// meanwhile: what an HTTP server puts in its Retry-After header. It is 0 when
// that cannot be known: a concurrency limiter waits for a release, waiters
// queued ahead are served first, and a closed limiter or an impossible
// request never becomes grantable.
//
// # Chain
//
// [Chain] combines limiters into one that grants n permits only when every
// member grants n: all or nothing. A per-second limit and a per-hour quota,
// or a rate limit and a concurrency limit, become one Limiter. For this
// package's limiters the chain locks the members (in one process-wide
// order), reads the clock once, takes from each at that instant and, if one
// refuses, undoes the others before any lock is released: no other goroutine
// sees the intermediate state, every member's bound holds however else it is
// used, and a refused chain consumes nothing. Members from other packages are
// asked first, with TryAcquire; their leases are released if a member of this
// package then refuses (a concurrency permit comes back; a rate permit of
// theirs stays spent, the safe side). The chain's lease releases every
// member's lease, in reverse order. Callers waiting in a chain's Acquire are
// served in arrival order, and TryAcquire does not jump them.
//
// # Keyed limiters
//
// A [Keyed] limiter holds one limiter per key (per client IP, per host, per
// tenant), made by [KeyedOptions].New on the key's first use, and made anew
// if the key was evicted. Its TryAcquire and Acquire take the key as well as
// n. A key whose limiter is idle (nobody waits, no lease is held, and its
// state is that of a new limiter, so evicting it changes no decision; for
// the fixed and sliding windows, up to where their window edges fall: see
// [KeyedOptions]) is evicted lazily: each new key examines a few existing ones. No goroutine or
// timer runs per key or per Keyed; [Keyed.Prune] evicts every idle key at
// once. Limiters from other packages, whose state cannot be read, are evicted
// after KeyedOptions.IdleTimeout without a call. When New fails, the request
// fails with [ErrNoLimiter].
//
// [NewKeyedTokenBucket] is the compact form for the common case of one token
// bucket per key, all with the same Rate and Burst: a key costs one 8-byte
// state in a Go map rather than a limiter, so millions of keys fit, and
// keys whose bucket is full are dropped as the map grows. Its Acquire
// queues each key's callers on their own (in Queue.Order, at most Queue.Limit
// permits waiting per key), and the head of a key's queue waits precisely,
// as every queue here does.
//
// # Waiting precisely
//
// Timers fire late (on Linux often by up to a millisecond), and a pacer
// would lose each grant's lateness. So the head waiter sleeps on a timer to
// just before its instant and waits the rest precisely: on Linux on one OS
// timer the whole process shares, elsewhere by polling the clock. The grant
// is booked at that instant, never earlier. [QueueOptions].Spin fixes how
// long that rest is instead of the lateness the process has observed;
// [QueueOptions].PlainTimers waits on the timer alone, saving the CPU of
// the precise end at the cost of the timer's lateness. In a
// testing/synctest bubble the waiter waits on its timer alone. A Chain's
// Acquire and a KeyedTokenBucket key's queue wait the same way.
//
// # Outcomes and actual costs
//
// A caller that knows what became of the work a lease admitted can say so
// with [Lease.Report]: [Succeeded], [Throttled] (the other side pushed
// back) or [Failed], with the latency it measured. Limiters that adapt their
// limit to the other side's capacity learn from it; the others ignore it.
// [OutcomeOf] classifies a work's error, and wrapping [ErrThrottled] into an
// error marks it as throttling. A caller that took permits on an estimate
// settles the lease with the actual cost once known, with [Lease.Settle].
// Limiters outside this package take part by making leases with [NewLease]
// whose Releaser is also a [Reporter] or a [Settler]; one that wraps a
// limiter of this package keeps its leases' settlement exact with
// [Lease.WithReleaser].
//
// Leases of the six limiters, of [Keyed.For] and [KeyedTokenBucket.For],
// and of a [Chain] of them settle, and the bounds then hold over the actual
// costs. Count each lease at the instant it was granted, at its actual
// cost once settled and at its permits until then. Every grant g keeps its
// limiter's bound over the windows that end with g (the token bucket's
// Burst + Rate·t over every interval [s, g]; a pacer's spacing; the
// permits in g's fixed, sliding or log window; the permits held at g)
// provided every lease granted before g that used more than its permits
// was settled before g. Overuse is booked at once as a debt that later
// grants pay: no grant comes until the bound over the actual costs allows
// it. Unused permits come back as far as no later grant can have relied on
// them: a token bucket or pacer gives back the part of the lease's cost
// that has not refilled since its grant (all of it when settled at once,
// nothing once its cost has refilled, nothing for a lease granted before
// a SetRate); a window limiter gives back while the lease's window (fixed),
// segment (sliding) or instant (log) still counts; a concurrency limiter at
// once, and the settled lease then holds, and releases, its actual permits.
// A debt larger than the limit is the same as the limit (the window or the
// semaphore is full), and a token bucket caps one where its integer
// arithmetic ends (two scaled limits ahead: at least days of refill). A
// Keyed key evicted while a lease of its For limiter was out takes the
// debt into the key's next limiter, from the settlement on. Leases taken
// with a key rather than through For settle less: Keyed's with the limiter
// that granted them, even if it was evicted since (the debt is then lost);
// KeyedTokenBucket's not at all.
//
// # Close and Stats
//
// Each of the six limiters has Close, which fails every queued waiter
// with ErrClosed; later TryAcquire and Acquire calls fail with ErrClosed too.
// Close returns nil, also when called again; leases a Concurrency limiter
// granted before Close may still be released. Stats returns a snapshot:
// permits available now, permits and callers waiting, and the counts of
// leases granted and of acquisitions refused. Limiters that change at run
// time (SetRate, SetBurst, SetLimit) apply the change at once, counting the
// permits already granted against the new setting.
//
// Limiters outside this package can join in (in a Chain, or anywhere a
// Limiter is taken) by implementing [Limiter] and building their leases with
// [NewLease] and [Denied].
package limiter
