package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// A client that gets what a server allows: rategate's Transport, sending
// one request at a time for 2.5 s on the real clock, against rategate's
// middleware with each of the six local limiters (and LimitByIP), is
// served at least 90% of what the limiter would grant a client that knew
// its algorithm, and is refused at most once at the server. The runs go
// at once (each sleeps most of the time).
func TestTransportGetsWhatServerAllows(t *testing.T) {
	if testing.Short() {
		t.Skip("2.5 s on the real clock")
	}
	const run = 2500 * time.Millisecond
	must := func(l limiter.Limiter, err error) limiter.Limiter {
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	per := limiter.Per(10, time.Second)
	cases := []struct {
		name    string
		handler func(h http.Handler, onDecision func(*http.Request, httplimit.Decision)) http.Handler
		allowed int // what the limiter grants in [0, run) to a client that knows its algorithm
	}{
		{"TokenBucket 10/s burst 1", limited(must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: per, Burst: 1}))), 1 + 24},
		{"TokenBucket 10/s burst 5", limited(must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: per, Burst: 5}))), 5 + 24},
		{"LeakyBucket 10/s", limited(must(limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: per}))), 25},
		{"FixedWindow 5/500ms", limited(must(limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 5, Window: 500 * time.Millisecond}))), 5 * 5},
		{"FixedWindow 3/1.5s", limited(must(limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 3, Window: 1500 * time.Millisecond}))), 3 * 2},
		{"SlidingWindow 5/500ms", limited(must(limiter.NewSlidingWindow(limiter.SlidingWindowOptions{Limit: 5, Window: 500 * time.Millisecond, Segments: 5}))), 5 * 5},
		{"SlidingLog 5/500ms", limited(must(limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 5, Window: 500 * time.Millisecond}))), 5 * 5},
		{"Concurrency 2", limited(must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 2}))), 0},
		{"LimitByIP(5, 300ms)", func(h http.Handler, on func(*http.Request, httplimit.Decision)) http.Handler {
			return observe(httplimit.LimitByIP(5, 300*time.Millisecond)(h), on)
		}, 5 * 9},
	}
	var wg sync.WaitGroup
	for _, c := range cases {
		var served, refused, sent atomic.Int64
		h := http.Handler(ok)
		if c.allowed == 0 {
			h = work // a client of a concurrency limit is never held back: let its requests take time
		}
		srv := httptest.NewServer(c.handler(h, func(_ *http.Request, d httplimit.Decision) {
			if d.Outcome == httplimit.Limited {
				refused.Add(1)
			}
		}))
		defer srv.Close()
		wg.Go(func() {
			client := &http.Client{Transport: &httplimit.Transport{Base: srv.Client().Transport}}
			for end := time.Now().Add(run); time.Now().Before(end); {
				sent.Add(1)
				resp, err := do(t, client, "GET", srv.URL, "")
				if err == nil && resp.StatusCode == 200 && time.Now().Before(end) {
					served.Add(1) // served within the run
				}
			}
			allowed := int64(c.allowed)
			if allowed == 0 {
				allowed = sent.Load()
			}
			t.Logf("%-24s served %2d of %2d allowed (%3.0f%%), %d refused at the server", c.name, served.Load(), allowed, 100*float64(served.Load())/float64(allowed), refused.Load())
			if served.Load()*10 < allowed*9 || refused.Load() > 1 {
				t.Errorf("%s: served %d of %d allowed, %d refused at the server; want at least 90%% and at most 1", c.name, served.Load(), allowed, refused.Load())
			}
		})
	}
	wg.Wait()
}

// work is a handler that takes a millisecond.
var work = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	time.Sleep(time.Millisecond)
	ok(w, r)
})

// limited returns a handler factory for a middleware on lim that reports
// its decisions.
func limited(lim limiter.Limiter) func(http.Handler, func(*http.Request, httplimit.Decision)) http.Handler {
	return func(h http.Handler, on func(*http.Request, httplimit.Decision)) http.Handler {
		m, err := httplimit.New(httplimit.Options{Limiter: lim, OnDecision: on})
		if err != nil {
			panic(err)
		}
		return m.Wrap(h)
	}
}

// observe reports h's 429s to on, as Limited decisions, for a middleware
// that takes no hook (LimitByIP).
func observe(h http.Handler, on func(*http.Request, httplimit.Decision)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&statusWriter{ResponseWriter: w, r: r, on: on}, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	r  *http.Request
	on func(*http.Request, httplimit.Decision)
}

func (w *statusWriter) WriteHeader(code int) {
	if code == http.StatusTooManyRequests {
		w.on(w.r, httplimit.Decision{Outcome: httplimit.Limited, Status: code})
	}
	w.ResponseWriter.WriteHeader(code)
}
