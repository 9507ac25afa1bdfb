// Package redislimit shares one limit among many processes by keeping its
// state in Redis. Every limiter here is a [limiter.Limiter], so channels,
// streams, range loops, worker pools and HTTP middleware take it unchanged:
// what changes is that every process naming the same [Options.Key] shares
// one bound, however many processes there are.
//
// # The model
//
// A limit's state (a token bucket's debt, a window's count, a log of
// grants, the holders of a semaphore) lives in Redis under a key derived
// from Options.Key. Each decision is one Lua script call: the script reads
// the state, reads Redis's own clock (TIME), decides, writes the new state
// and answers, atomically. No client clock is ever used, so processes on
// machines whose clocks disagree still share one exact bound, and the
// script's answer carries the Redis time it decided at. The scripts need
// Redis 5 or later (they read TIME before they write, which effects
// replication, the default since Redis 5, allows).
//
// Arithmetic in the scripts is exact: Lua numbers are doubles, so every
// value a script computes is an integer kept below 2^53 (time in
// microseconds, rates reduced to lowest terms in scaled units);
// constructors reject options whose arithmetic could not stay below it.
//
// The algorithms and their bounds, for every interval and across all
// processes, are those of package limiter:
//
//   - [NewTokenBucket]: at most Burst + Rate·t in every interval of length t.
//   - [NewFixedWindow]: at most Limit in each window aligned to Redis's clock.
//   - [NewSlidingLog]: at most Limit in ANY window of length Window.
//   - [NewConcurrency]: at most Limit permits held at once; Lease.Release
//     gives them back, and a holder that crashes has its permits reclaimed
//     LeaseTTL after its last renewal.
//
// Each has a keyed form (one limit per tenant, API key or client address)
// whose For(key) returns a limiter.Limiter; a key's state expires in Redis
// once it no longer affects a decision, so idle keys cost nothing.
//
// # Several policies at once: Chain
//
// [Chain] decides for several limits of this package at once ("10 a second
// and 10,000 a day"; a user's limit inside its tenant's): one script call
// checks every member at one instant of Redis's clock and takes the permits
// from all of them, or from none. A refusal says which member refused
// ([ChainRefusal]) and when every member could grant. (limiter.Chain of
// Redis limiters decides member after member, and a refused chain has
// spent the permits of the members before the one that refused.)
//
// # Settling
//
// A rate limiter's lease (TokenBucket, FixedWindow, SlidingLog, a keyed
// For result, a Chain) taken on an estimate (1,000 tokens of a
// language-model call, a 64 KiB read) can be settled with the actual cost
// once it is known: limiter.Lease.Settle(actual) is one round trip that
// gives back the permits not used and books those used beyond the lease as
// a debt that later grants pay, so that the bound holds over the actual
// costs. What comes back is what the limit would not have had anyway: a
// token bucket gives back the unused permits less what it refilled since
// the grant (capacity a full bucket would have wasted must not return), a
// fixed window only within the grant's window, a strict log from the
// grant's own entries while they are in the log. Overuse is booked at
// once: in the bucket's debt, the window's count (carried into the next
// windows past its limit), the log at the grant's time. A settlement
// Redis cannot take (it is out of reach) is lost: the unused permits stay
// spent, an overuse is not booked. A semaphore's lease does not settle.
//
// # Waiting
//
// TryAcquire is one round trip. Acquire waits the time the script says the
// request could be granted (never polling) and asks again; a waiter refused
// again, having lost a race with another process, adds a small random delay
// to its next wait, so that many waiting processes do not all retry at the
// same instant. While Acquire calls of this process wait on a limit (a key
// of a keyed limiter, a Chain), TryAcquire on it fails with
// limiter.ErrLimited rather than take the permits they wait for, as in
// package limiter; only other processes' calls race with them. Acquire
// fails at once with an error wrapping
// context.DeadlineExceeded when that time is past ctx's deadline. (A
// semaphore cannot know when another process will release: its waiters wake
// at a release in their own process, or after a jittered backoff.) Waiters
// are not served in arrival order across processes, so of the options'
// QueueOptions only Limit applies: it caps the permits waiting in this
// process's Acquire calls (beyond it Acquire fails with
// limiter.ErrQueueFull); a NewestFirst Order or a Spin is refused with an
// *limiter.OptionError. ([Partitioned] queues its waiters in the process and
// takes all three.) Every other option a constructor is given takes effect,
// or the constructor refuses it: Options.LeaseTTL is for the semaphores
// only, Options.Fallback for OnError: UseFallback only.
// Concurrent decisions for one key in one process are coalesced into one
// script call.
//
// # When Redis cannot decide
//
// A Redis error never admits silently. Every round trip ends within
// Options.Timeout (DefaultTimeout when zero), whatever the failure: a
// refused or unreachable server, a client pool with no free connection, a
// stalled server, a server killed mid-call. An error or a timeout is
// handled by Options.OnError:
// FailClosed (the default) refuses with an error wrapping [ErrUnavailable]
// and the cause, FailOpen grants, and UseFallback asks Options.Fallback, a
// local limiter. This package sends a script again only when Redis answers
// NOSCRIPT (its script cache was flushed); never after a failure that may
// have committed, which would count a decision twice. (go-redis itself
// resends a command whose connection broke, up to its MaxRetries, within
// the same Timeout: a rate limiter's decision counted twice spends its
// permits twice, which keeps the bound; a semaphore's is not counted
// twice. MaxRetries: -1 turns that off.)
//
// A decision whose answer was lost (a timeout) may still have been made in
// Redis: a rate limiter's permits are then spent without being granted (the
// bound holds, the permits are lost), and a semaphore gives back what such a
// decision may have granted.
//
// A Redis server restarted without persistence has forgotten every limit's
// state. Set Options.GuardRestarts to keep the bound across such restarts.
//
// # Stats and Quota
//
// Stats counts this process's grants and refusals; Quota (for HTTP
// RateLimit header fields, see limiter.Quoter) is the limit's state as the
// last script call in this process reported it, with no round trip of its
// own.
// Options.OnDecision is told of every decision that asked Redis (and of
// every Partitioned lease sync): how long it took, why Redis could not
// decide, and who decided ([DecisionInfo]), for metrics.
//
// # Keys and Redis Cluster
//
// Options.Key and the keys given to For may come from clients (an IP
// address, an API key, a tenant name). They are encoded so that no input
// can reach another limit's Redis key or end or open a hash tag, and long
// inputs are hashed, so a key's length is bounded. Every Redis key of one
// limit carries one hash tag, so each script touches one slot and works
// unchanged on Redis Cluster. The tag follows Redis Cluster's own rule: it
// is Options.Key (for a keyed limiter, the key given to For), or, when
// that contains a non-empty "{…}", the part between the first '{' and the
// next '}'. Limits whose keys name one tag share a slot: the For results of
// two keyed limiters for one key, plain limiters keyed "{acme}day" and
// "{acme}second", a tenant's For("acme") and its user's For("{acme}alice").
// [Chain] needs that on Cluster.
//
// # Deciding locally: Partitioned
//
// Every limiter above pays a round trip per decision. [Partitioned] splits a
// global rate into Partitions shares that processes lease in Redis (one
// script call renews, takes and gives back leases, at most a few times per
// LeaseTTL); each grant is then decided in the process, on a local bucket
// over the partitions it holds, with no round trip and no allocation. A
// process stops using a partition before its lease can have expired in
// Redis, a crashed holder's partitions come back empty after the TTL, and
// busy processes gain partitions from idle ones, so the global bound,
// Burst + Rate·t summed over all processes, holds while processes come, go,
// stall and crash. The repository's docs/partitioned.md gives the argument
// and the measured trade-offs (partitions against fairness against lease
// traffic).
package redislimit
