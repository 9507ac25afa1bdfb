package httplimit

import (
	"net/http"
	"time"

	"github.com/rategate/rategate/limiter"
)

// LimitByIP returns middleware that lets each client IP address (RemoteAddr)
// make at most n requests in any window of length window, and refuses the
// rest with 429, Retry-After and the RateLimit fields:
//
//	http.ListenAndServe(":8080", httplimit.LimitByIP(100, time.Minute)(mux))
//
// Each address has a strict sliding log (limiter.SlidingLog) in a
// limiter.Keyed, evicted once idle. Its form, func(http.Handler)
// http.Handler, is the one chi's Use and most routers take. It panics with
// an *limiter.OptionError when n or window is not positive, as a pattern
// that does not compile makes regexp.MustCompile panic; use New for
// anything else (a proxy's trusted prefixes, queueing, hooks).
func LimitByIP(n int, window time.Duration) func(http.Handler) http.Handler {
	return LimitByKey(n, window, ClientIP())
}

// LimitByKey is LimitByIP with another key, such as
// HeaderKey("X-API-Key") or ClientIP of trusted proxies.
func LimitByKey(n int, window time.Duration, key KeyFunc) func(http.Handler) http.Handler {
	opts := limiter.SlidingLogOptions{Limit: n, Window: window}
	if _, err := limiter.NewSlidingLog(opts); err != nil {
		panic(err)
	}
	keyed, err := limiter.NewKeyed(limiter.KeyedOptions[string]{
		New: func(string) (limiter.Limiter, error) { return limiter.NewSlidingLog(opts) },
	})
	if err != nil {
		panic(err)
	}
	m, err := New(Options{Keyed: keyed, Key: key})
	if err != nil {
		panic(err)
	}
	return m.Wrap
}
