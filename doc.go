// Package rategate is a set of rate-limited concurrency primitives for Go.
// It has no API of its own: it is the map of the module, and the one place
// that states the conventions every package keeps.
//
// # The model
//
// One small abstraction, [limiter.Limiter], hands out permits: at most so
// many per unit of time (a rate limiter) or at most so many at once (a
// concurrency limiter). A caller asks for n permits and gets a
// [limiter.Lease], a small value that says whether they were granted, why
// not, and when to retry. Every other package composes a Limiter into
// something Go programmers already know, and takes any Limiter, so one
// limiter (or a [limiter.Chain] of them) can govern many channels, streams,
// loops, pools and HTTP handlers at once.
//
// # The packages
//
//   - [github.com/rategate/rategate/limiter]: the Limiter interface, Lease,
//     Rate (n events per duration, exact integers), and the algorithms, each
//     with the bound it keeps over every interval: a token bucket, fixed and
//     sliding windows, a strict sliding log (at most n in ANY window), a
//     leaky-bucket pacer and a concurrency limit; FIFO or LIFO queues for
//     waiters; Chain (all or nothing); keyed limiters (one per IP, host or
//     tenant) that evict idle keys.
//   - [github.com/rategate/rategate/channel]: Chan, a channel whose buffered
//     items each hold a lease until received, so that a limiter bounds the
//     buffer (in items or bytes) or the producers' rate.
//   - [github.com/rategate/rategate/pipe]: io.Reader, io.Writer, net.Conn
//     and net.Listener wrappers whose permits are bytes, and ParseByteRate
//     for rates such as "2MiB/s"; [github.com/rategate/rategate/pipe/progress]
//     counts a transfer's bytes for progress lines (rate, ETA).
//   - [github.com/rategate/rategate/iter]: iter.Seq and iter.Seq2 wrappers,
//     so that a range loop runs no faster than a limiter allows.
//   - [github.com/rategate/rategate/pool]: a bounded worker pool whose task
//     starts pass a limiter (and a per-key limiter, for a crawler's hosts).
//   - [github.com/rategate/rategate/redislimit]: the same Limiter contract
//     shared by many processes, with the state in Redis and Redis's clock;
//     a Redis error never admits silently.
//   - [github.com/rategate/rategate/httplimit]: net/http server middleware
//     (429 Too Many Requests, Retry-After, the IETF RateLimit fields,
//     optional queueing) and a client RoundTripper that keeps to its own
//     limits and to the server's.
//
// The programs under examples/ show each in use (go run
// ./examples/crawler); the bench module compares rategate with
// golang.org/x/time/rate and other peers.
//
// # Conventions
//
// Every package keeps these rules, so they are stated here once:
//
//   - A nil [limiter.Limiter] means no limit: a Chan, stream, loop, pool or
//     middleware given nil passes everything at once.
//   - A nil [context.Context] is a programming error. Every function that
//     takes one panics with "<package>: nil Context" at once, before it
//     takes a lock or changes any state, so the value stays usable.
//   - Every package's ErrClosed wraps [limiter.ErrClosed]: errors.Is(err,
//     limiter.ErrClosed) reports a use after Close, whichever package said
//     it. Refusals wrap [limiter.ErrLimited], [limiter.ErrQueueFull] or
//     [limiter.ErrExceedsLimit] the same way.
//   - Constructors validate their options and return (*T, error); an
//     invalid option is a [*limiter.OptionError] naming the field, never a
//     panic and never a silently clamped value.
//   - Limiters are passive: no goroutine per limiter and no ticking timer.
//     They read the monotonic clock when asked, relative to their own
//     creation, so code using them can be tested in testing/synctest
//     bubbles on a virtual clock.
package rategate

import "github.com/rategate/rategate/limiter"

// The import resolves the links to package limiter in the documentation
// above.
var _ limiter.Limiter
