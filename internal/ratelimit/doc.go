// Package ratelimit is what package httplimit and module grpclimit share
// of the quota fields of draft-ietf-httpapi-ratelimit-headers: writing a
// limiter's quota as the RateLimit-Policy and RateLimit fields (gRPC's
// ratelimit-policy and ratelimit metadata), reading them and the legacy
// dialects servers still send, with an RFC 9651 structured-field parser,
// and a client's state per host (or per gRPC target): what the host's
// responses allow, the pace of its policy, the Retry-After it asked for,
// and the rate learned from the pushback of a host that states nothing.
package ratelimit
