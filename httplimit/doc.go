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
// (a quota of 100 requests per 60 s, of which 42 are left; the quota is
// whole again in 17 s, as the limiter's [limiter.Quota] says). Legacy
// X-RateLimit-* fields are an option. [Options].OnDecision sees every
// decision, for metrics and logs; the package keeps no global state.
//
// # Keys and proxies
//
// [ClientIP] keys a request by RemoteAddr. Behind a reverse proxy every
// request comes from the proxy, so give ClientIP the proxy's prefixes: it
// then reads X-Forwarded-For (or Forwarded), but only when the hop that sent
// it is trusted, and takes the rightmost address that is not trusted, so a
// client cannot choose its own key by sending the header itself. [IPKey]
// also keys IPv6 clients by their /64.
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
// reads the RateLimit field to slow down before the server has to refuse
// it.
package httplimit
