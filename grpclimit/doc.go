// Package grpclimit gives gRPC what package httplimit gives HTTP: server
// interceptors that refuse what is over its quota and say when to come
// back, and client interceptors that keep to their own limits and to the
// servers'.
//
// It is a module of its own (github.com/rategate/rategate/grpclimit), so
// that users of package limiter alone do not download grpc-go.
//
// # The server
//
// [New] returns a [Server] whose Unary and Stream methods are the
// interceptors:
//
//	lim, err := grpclimit.New(grpclimit.Options{Limiter: bucket})
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(lim.Unary),
//		grpc.ChainStreamInterceptor(lim.Stream),
//	)
//
// Every call asks a [limiter.Limiter] for permits before its handler runs:
// one by default, or what Options.Cost says. A stream takes its permits
// when it opens and, with Options.PerMessage, each message it receives
// takes permits too. The limiter is one for the whole server
// (Options.Limiter) or one per key (Options.PerKey), where the key names
// what the call counts against: the client's IP address ([PeerAddr], the
// default, which keys an IPv6 client by its /64 and reads x-forwarded-for
// only from the proxies you trust, as httplimit.ClientIP does), the method
// ([Method]), a metadata value such as an API key or a tenant
// ([MetadataKey]), any function of the call's context ([KeyFunc]), or
// several together ([Keys]). Any limiter works: local or shared through
// Redis (package redislimit), keyed, chained, or adaptive; the lease of a
// call is told its outcome ([OutcomeOf]: codes.ResourceExhausted is
// limiter.Throttled) and latency, so that adaptive limiters learn from
// gRPC calls, and is released when the handler returns, so that a
// limiter.Concurrency caps the calls in flight.
//
// A call that is not granted its permits is refused at once, or with
// Options.Wait waits in the limiter's queue; one whose client goes away
// while queued leaves the queue having consumed nothing. A refusal is
// codes.ResourceExhausted with the standard google.rpc.RetryInfo detail:
// the limiter's own retry time, never early (a client that waits exactly
// that long, while nothing else takes the permits, is served). When the
// limiter cannot decide (it is closed, or its store cannot be reached, as
// redislimit under FailClosed) the call fails with codes.Unavailable;
// Options.Code chooses other codes. Calls of a limited method carry the
// quota as metadata, with the syntax of HTTP's RateLimit-Policy and
// RateLimit fields (draft-ietf-httpapi-ratelimit-headers) that httplimit
// sends:
//
//	ratelimit-policy: "default";q=100;w=60
//	ratelimit: "default";r=42;t=17
//
// (a quota of 100 calls per 60 s, of which 42 are left; the quota is whole
// again in 17 s). A served call carries them in its header metadata, a
// refused one in its trailer.
//
// # The client
//
// [NewClient] returns a [Client] whose Unary and Stream methods are the
// client interceptors. It takes a permit from its limiters (one for every
// call, one per method, one per target) before each call; after a refusal
// with RetryInfo it sends nothing to that target before the delay has
// passed; it reads the ratelimit metadata, with httplimit.Transport's own
// code, and keeps to what the server states before it has to refuse:
// no more calls than the responses allow, then calls spread at the pace
// of the server's policy, so that a limit finer than the metadata's whole
// seconds is followed call by call; and it retries refused idempotent
// calls within a budget.
package grpclimit
