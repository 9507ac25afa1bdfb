package bench

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/httprate"

	"github.com/rategate/rategate/httplimit"
)

var httpClientFlag = flag.Bool("httpclient", false, "run TestTransportAgainstHTTPRate and TestHTTPClientMemory (about 25 s)")

// statusCounter counts the statuses a handler writes.
type statusCounter struct {
	mu      sync.Mutex
	served  int
	refused int
	wrapped http.Handler
}

func (c *statusCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	c.wrapped.ServeHTTP(sw, r)
	c.mu.Lock()
	if sw.code == http.StatusTooManyRequests {
		c.refused++
	} else {
		c.served++
	}
	c.mu.Unlock()
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// TestTransportAgainstHTTPRate sends 60 GETs to a real go-chi/httprate
// server (LimitByIP(10, time.Second): X-RateLimit-* with a Unix-time
// reset, a sliding window counter) over loopback, sequentially and from 5
// goroutines × 12, through a zero-value httplimit.Transport and through a
// plain http.Client, and reports the 429s the server wrote. Run with
// go test -run TestTransportAgainstHTTPRate -httpclient -v .
func TestTransportAgainstHTTPRate(t *testing.T) {
	if !*httpClientFlag {
		t.Skip("run with -httpclient")
	}
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	for _, client := range []string{"plain http.Client", "httplimit.Transport"} {
		for _, goroutines := range []int{1, 5} {
			sc := &statusCounter{wrapped: httprate.LimitBy(10, time.Second, remoteIP)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))}
			srv := httptest.NewServer(sc)
			c := &http.Client{}
			if client == "httplimit.Transport" {
				c.Transport = &httplimit.Transport{}
			}
			start := time.Now()
			var wg sync.WaitGroup
			var mu sync.Mutex
			ok := 0
			for range goroutines {
				wg.Go(func() {
					for range 60 / goroutines {
						resp, err := c.Get(srv.URL)
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							mu.Lock()
							ok++
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			srv.Close()
			t.Logf("%-20s %d goroutine(s): %2d of 60 GETs got 200 in %5.2fs; the server wrote %2d 429s", client, goroutines, ok, time.Since(start).Seconds(), sc.refused)
		}
	}
}

// TestHTTPClientMemory reports the heap each middleware keeps per client
// after 200,000 distinct IPv4 clients made one request each (well within
// their limit of 100 a minute), the key strings excluded.
func TestHTTPClientMemory(t *testing.T) {
	if !*httpClientFlag {
		t.Skip("run with -httpclient")
	}
	const clients = 200_000
	addrs := make([]string, clients)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.%d.%d.%d:1234", i>>16, (i>>8)&0xff, i&0xff)
	}
	for _, c := range []struct {
		name string
		mw   func() http.Handler
	}{
		{"rategate LimitByIP", func() http.Handler { return httplimit.LimitByIP(100, time.Minute)(nopHandler()) }},
		{"httprate LimitByIP", func() http.Handler { return httprate.LimitBy(100, time.Minute, remoteIP)(nopHandler()) }},
	} {
		w := &headerWriter{h: http.Header{}}
		r := httptest.NewRequest("GET", "/", nil)
		before := heapAlloc()
		h := c.mw()
		for _, a := range addrs {
			clear(w.h)
			r.RemoteAddr = a
			h.ServeHTTP(w, r)
		}
		after := heapAlloc()
		runtime.KeepAlive(h)
		t.Logf("%-20s %5.1f B per client (%d clients)", c.name, float64(int64(after)-int64(before))/clients, clients)
	}
	runtime.KeepAlive(addrs)
}
