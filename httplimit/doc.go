// Package httplimit puts rategate's limiters around HTTP: a server
// middleware that answers clients over their quota with 429 Too Many
// Requests, and a client http.RoundTripper that keeps to its own limits and
// to the ones the servers it calls state.
//
// # The model
//
// Every request asks a [limiter.Limiter] for permits before its handler
// runs: one permit by default, or what Options.Cost says (a costly search
// may take ten). The limiter is one for the whole server (Options.Limiter),
// or one per key (Options.PerKey or Options.Keyed), where the key names what
// the request counts against: the client's IP address (the default,
// [ClientIP]), an API key ([HeaderKey]), a route ([Route]), or several
// together ([Keys]). Any limiter works, local or shared through Redis, and
// its algorithm sets the bound: a sliding log lets at most n requests of a
// client through in any window, a token bucket allows bursts, a
// limiter.Concurrency caps the requests in flight (its permit is held until
// the handler returns).
//
// A request that is granted its permits is served. One that is not is
// refused at once ([Options].Wait = 0), or waits in the limiter's queue for
// up to Wait and is then served in its turn: the leaky-bucket middleware,
// which turns bursts into a steady flow.
// A request that cannot be served within Wait is refused: at once when the
// limiter can tell (a token bucket or pacer always can, behind its whole
// queue: limiter.Foreseer, also per key; the other limiters when no one waits ahead, or
// when the one ahead will wait longer), else when Wait ends. One whose
// client goes away leaves the queue having consumed nothing.
//
// A refusal is 429 with Retry-After, in whole seconds rounded up, and every
// response of a limited request tells the client where it stands with the
// IETF fields of draft-ietf-httpapi-ratelimit-headers:
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=17
//
// Legacy X-RateLimit-* fields are an option. [Options].OnDecision sees every
// decision, for metrics and logs; the package keeps no global state.
//
// # Quota and capacity: 429 and 503
//
// The limiters above are quotas: they say what a client (or all of them)
// may ask for, and a request over its quota is 429 Too Many Requests. A
// server past its own capacity sheds load instead: [Options].Shed takes a
// limiter of the requests the server takes on at once, typically an
// adaptive.ConcurrencyLimiter, whose limit follows what keeps the
// handler's latency near its latency unloaded. A request its quota
// granted and Shed refuses is 503 Service Unavailable with Retry-After,
// and carries no RateLimit field: its quota was not the reason. The
// middleware reports each served request's outcome (from the status the
// handler answers: 429 and 503 are throttled, another 5xx failed) and
// latency to its leases, so that adaptive limiters learn from the handler.
//
// # What the fields promise
//
// The fields count whole seconds, so they state what the limiter enforces
// in a form that never promises more:
//
//   - q and w are the sustained rate: q requests per w seconds. A client
//     whose requests reach the server w/q apart is never refused. A window
//     of whole seconds is stated as it is (100 per minute: q=100;w=60),
//     another over the fewest whole seconds that make the rate exact (5
//     per 300 ms: q=50;w=3; a pacer of 10/s: q=10;w=1), or, when no number
//     of seconds up to an hour does, rounded down to within 1%. q is not
//     what may be sent at once: r is.
//   - burst, for a token bucket whose Burst is over 1: that many requests
//     may arrive at once and then be spread w/q apart. It is an extension
//     parameter, which the drafts let clients that do not know it ignore;
//     rategate's Transport uses it.
//   - r is the requests that can be served now (0 while others queue).
//   - t is the seconds until the quota is whole again, rounded up (more
//     may come sooner); on a refusal, Retry-After's value.
//
// Per limiter (from its [limiter.Quota]):
//
//   - TokenBucket (and KeyedTokenBucket): q/w its Rate, burst its Burst, r
//     the whole tokens now, t until the bucket is full.
//   - LeakyBucket: q/w its Rate, r 1 when a request can go now (else 0), t
//     until the next slot.
//   - FixedWindow: q/w Limit per Window, r Limit less this window's grants,
//     t until the window ends.
//   - SlidingWindow: q/w Limit per Window, r Limit less the grants in the
//     window, t until the newest grant's segment leaves it.
//   - SlidingLog, and LimitByIP: q/w Limit per Window, r Limit less the
//     grants of the last Window, t until the newest grant leaves it.
//   - Concurrency: q its Limit with qu="concurrent-requests" and no w, r
//     the free permits, no t.
//
// A limiter of several policies, which says so with an AppendQuotas method
// (limiter.Chain, redislimit.Chain), has each member stated as a policy of
// its own ("default-1", "default-2", ...), and RateLimit states the one with
// the fewest requests left.
//
// # Keys and proxies
//
// [ClientIP] keys a request by RemoteAddr. Behind a reverse proxy every
// request comes from the proxy, so give ClientIP the proxy's prefixes: it
// then reads X-Forwarded-For (or Forwarded), but only when the hop that sent
// it is trusted, and takes the rightmost address that is not trusted, so a
// client cannot choose its own key by sending the header itself. An IPv6
// client is keyed by its /64 (one host or home usually holds a /64 whole,
// and could otherwise pick a new key, and a new quota, per request);
// [IPKey] takes another prefix length.
//
// Per-route limits need no router support: wrap each route's handler with
// its own Middleware, or key one Middleware by [Route] (net/http's
// ServeMux pattern) or [RouteFunc] (chi's, gorilla's).
//
// For the common case, [LimitByIP] is one line:
//
//	handler = httplimit.LimitByIP(100, time.Minute)(mux)
//
// # The client
//
// [Transport] takes a permit from its Limiter (and its PerHost limiter)
// before each request, as the request's context allows; after a 429 or 503
// with Retry-After it sends nothing to that host before the time given; it
// retries refused requests that can be replayed, within a budget; and it
// reads the limits responses state, in every dialect servers use (the
// RateLimit fields of drafts -06 to -11, X-RateLimit-* with a Unix or a
// relative reset), sending no more than what they leave and spreading the
// rest at the pace of the server's policy, so that the server does not
// have to refuse it. A host that pushes back without stating anything (a
// plain 429 or 503, a timeout) gets a rate the Transport learns from its
// answers, down at once when it throttles and up while it takes what it is
// sent: a zero Transport in a crawler limits nothing until a host pushes
// back, then keeps each host near its capacity, which [Transport.Limits]
// reports.
package httplimit
