package bench

import (
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/didip/tollbooth/v7"
	"github.com/go-chi/httprate"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// The HTTP benchmarks put each rate-limiting middleware, keyed by the
// client's address (RemoteAddr), around the same empty handler:
//
//   - rategate-bucket: httplimit with a limiter.KeyedTokenBucket (Options.Keyed);
//   - rategate-LimitByIP: httplimit.LimitByIP (a strict sliding log per
//     address, in a compact httplimit.KeyedLog; an IPv6 client keyed by its
//     /64);
//   - httprate: go-chi/httprate's LimitByIP, as LimitBy with its KeyByIP
//     (a sliding window counter);
//   - tollbooth: didip/tollbooth/v7's LimitHandler (x/time/rate per key);
//   - bare: the handler alone, the floor.
//
// HTTP/allowed and HTTP/refused call ServeHTTP in memory, with one
// ResponseWriter whose header map is emptied per call, so they measure the
// middleware alone (bare costs nothing there); the -v6 modes send from an
// IPv6 address, which rategate and httprate both key by its /64. HTTPLoopback sends real
// requests over loopback with net/http at both ends: bare is then what
// net/http itself costs per request, and the others add to it;
// bare-with-fields is bare setting the two RateLimit fields as constants,
// the floor of a response carrying them (the client parses two more
// header lines).
//
// Besides the wall-clock ns/op they report cpu-ns/op: the CPU time (user +
// system, every goroutine: both ends of a loopback request, and the GC) the
// process spent per request, which other processes' load on the machine
// does not inflate as it inflates wall-clock time.
//
// The middlewares answer refusals differently (each writes its own
// headers and body), as each would in production.

// allowLimits never refuse within a benchmark; refuseLimits refuse every
// request after the first.
const (
	allowN      = math.MaxInt32
	allowWindow = time.Millisecond
	refuseN     = 1
	refuseWin   = time.Hour
)

func nopHandler() http.Handler {
	return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
}

type httpCase struct {
	name string
	wrap func(b *testing.B, n int, w time.Duration, h http.Handler) http.Handler
}

func httpCases() []httpCase {
	return []httpCase{
		{"bare", func(_ *testing.B, _ int, _ time.Duration, h http.Handler) http.Handler { return h }},
		{"rategate-bucket", func(b *testing.B, n int, w time.Duration, h http.Handler) http.Handler {
			keyed, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(n, w), Burst: n})
			if err != nil {
				b.Fatal(err)
			}
			m, err := httplimit.New(httplimit.Options{Keyed: keyed})
			if err != nil {
				b.Fatal(err)
			}
			return m.Wrap(h)
		}},
		{"rategate-LimitByIP", func(b *testing.B, n int, w time.Duration, h http.Handler) http.Handler {
			if n == allowN {
				// A sliding log keeps every grant of its window: allow
				// by a log of 1,000,000 over a window short enough to
				// slide past it.
				n, w = 1_000_000, time.Millisecond
			}
			return httplimit.LimitByIP(n, w)(h)
		}},
		{"httprate", func(_ *testing.B, n int, w time.Duration, h http.Handler) http.Handler {
			// LimitByIP (deprecated in v0.16 only to make callers state
			// where the address comes from), spelled out.
			return httprate.LimitBy(n, w, remoteIP)(h)
		}},
		{"tollbooth", func(_ *testing.B, n int, w time.Duration, h http.Handler) http.Handler {
			lmt := tollbooth.NewLimiter(float64(n)/w.Seconds(), nil)
			lmt.SetBurst(n)
			lmt.SetIPLookups([]string{"RemoteAddr"})
			return tollbooth.LimitHandler(lmt, h)
		}},
	}
}

// remoteIP is httprate's KeyByIP: RemoteAddr's host, canonicalized.
func remoteIP(r *http.Request) (string, error) {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	return httprate.CanonicalizeIP(ip), nil
}

// headerWriter is a ResponseWriter that keeps nothing but its header map.
type headerWriter struct {
	h    http.Header
	code int
}

func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *headerWriter) WriteHeader(code int)        { w.code = code }

// reportCPU reports the process's CPU time per iteration since cpu.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64((pipeCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func BenchmarkHTTP(b *testing.B) {
	for _, mode := range []struct {
		name   string
		n      int
		window time.Duration
		want   int
		remote string
	}{
		{"allowed", allowN, allowWindow, http.StatusOK, "192.0.2.1:1234"},
		{"refused", refuseN, refuseWin, http.StatusTooManyRequests, "192.0.2.1:1234"},
		{"allowed-v6", allowN, allowWindow, http.StatusOK, "[2001:db8:1:2::7]:1234"},
		{"refused-v6", refuseN, refuseWin, http.StatusTooManyRequests, "[2001:db8:1:2::7]:1234"},
	} {
		b.Run(mode.name, func(b *testing.B) {
			for _, c := range httpCases() {
				if c.name == "bare" && mode.want != http.StatusOK {
					continue
				}
				b.Run(c.name, func(b *testing.B) {
					h := c.wrap(b, mode.n, mode.window, nopHandler())
					r := httptest.NewRequest("GET", "/", nil)
					r.RemoteAddr = mode.remote
					w := &headerWriter{h: http.Header{}}
					h.ServeHTTP(w, r) // the first request of a refusing limit is allowed
					cpu := pipeCPU()
					for b.Loop() {
						clear(w.h)
						w.code = http.StatusOK
						h.ServeHTTP(w, r)
					}
					reportCPU(b, cpu)
					if w.code != mode.want {
						b.Fatalf("status %d, want %d", w.code, mode.want)
					}
				})
			}
		})
	}
}

// withFields is the bare handler setting the two RateLimit fields as
// constants: the floor of a response that carries them.
func withFields(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Ratelimit-Policy"] = []string{`"default";q=2147483647;w=1`}
		w.Header()["Ratelimit"] = []string{`"default";r=2147483646;t=1`}
		h.ServeHTTP(w, r)
	})
}

func BenchmarkHTTPLoopback(b *testing.B) {
	cases := httpCases()
	cases = append(cases[:1], append([]httpCase{{"bare-with-fields", func(_ *testing.B, _ int, _ time.Duration, h http.Handler) http.Handler {
		return withFields(h)
	}}}, cases[1:]...)...)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			srv := httptest.NewServer(c.wrap(b, allowN, allowWindow, nopHandler()))
			defer srv.Close()
			client := srv.Client()
			req, err := http.NewRequest("GET", srv.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			cpu := pipeCPU()
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			reportCPU(b, cpu)
		})
	}
}
