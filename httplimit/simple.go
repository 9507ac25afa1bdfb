package httplimit

import (
	"net/http"
	"time"
)

// LimitByIP returns middleware that lets each client IP address (RemoteAddr;
// an IPv6 client's /64) make at most n requests in any window of length
// window, and refuses the rest with 429, Retry-After and the RateLimit
// fields:
//
//	http.ListenAndServe(":8080", httplimit.LimitByIP(100, time.Minute)(mux))
//
// The clients' logs are a KeyedLog: 32 to 48 bytes per client whose
// newest request is within the window (and 8 more per request of the
// window beyond the first), at most DefaultMaxKeys clients; a client whose
// requests have all left the window is as if new, and is dropped when
// room is needed. Its form, func(http.Handler) http.Handler, is the one
// chi's Use and most routers take. It panics with an *limiter.OptionError
// when n or window is not positive, as a pattern that does not compile
// makes regexp.MustCompile panic. For anything else (a proxy's trusted
// prefixes, another IPv6 prefix length or cap on the clients held, a
// handle on the logs to Prune them), build the same with New:
//
//	logs, _ := httplimit.NewKeyedLog(httplimit.KeyedLogOptions{Limit: 100, Window: time.Minute, MaxKeys: 100_000})
//	key, _ := httplimit.IPKey(httplimit.IPKeyOptions{Trusted: proxies, IPv6Prefix: 56})
//	m, _ := httplimit.New(httplimit.Options{Keyed: logs, Key: key})
func LimitByIP(n int, window time.Duration) func(http.Handler) http.Handler {
	return LimitByKey(n, window, ClientIP())
}

// LimitByKey is LimitByIP with another key, such as
// HeaderKey("X-API-Key") or ClientIP of trusted proxies.
func LimitByKey(n int, window time.Duration, key KeyFunc) func(http.Handler) http.Handler {
	logs, err := NewKeyedLog(KeyedLogOptions{Limit: n, Window: window})
	if err != nil {
		panic(err)
	}
	m, err := New(Options{Keyed: logs, Key: key})
	if err != nil {
		panic(err)
	}
	return m.Wrap
}
