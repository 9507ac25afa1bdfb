package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/httplimit"
)

// windowServer enforces limit requests per window, in windows aligned to
// Unix time (as GitHub's and go-chi/httprate's are), and states its limits
// in one dialect.
type windowServer struct {
	dialect string
	limit   int
	window  time.Duration

	mu      sync.Mutex
	cur     int64
	count   int
	refused int
	served  int
}

var dialects = []string{"draft-11", "draft-07", "draft-06", "draft-06-bare", "x-epoch", "x-delta"}

func (s *windowServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	now := time.Now()
	s.mu.Lock()
	k := now.UnixNano() / int64(s.window)
	if k != s.cur {
		s.cur, s.count = k, 0
	}
	ok := s.count < s.limit
	if ok {
		s.count++
		s.served++
	} else {
		s.refused++
	}
	left := s.limit - s.count
	s.mu.Unlock()
	end := time.Unix(0, (k+1)*int64(s.window))
	delta := strconv.FormatInt(int64((end.Sub(now)+time.Second-1)/time.Second), 10)
	h := w.Header()
	q := strconv.Itoa(s.limit)
	ws := strconv.Itoa(int(s.window / time.Second))
	switch s.dialect {
	case "draft-11":
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%s;w=%s`, q, ws))
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%s`, left, delta))
	case "draft-07":
		h.Set("RateLimit-Policy", q+";w="+ws)
		h.Set("RateLimit", fmt.Sprintf("limit=%s, remaining=%d, reset=%s", q, left, delta))
	case "draft-06":
		h.Set("RateLimit-Limit", q)
		h.Set("RateLimit-Remaining", strconv.Itoa(left))
		h.Set("RateLimit-Reset", delta)
		h.Set("RateLimit-Policy", q+";w="+ws)
	case "draft-06-bare": // as tollbooth and Envoy's ratelimit send them: no policy
		h.Set("RateLimit-Limit", q)
		h.Set("RateLimit-Remaining", strconv.Itoa(left))
		h.Set("RateLimit-Reset", delta)
	case "x-epoch":
		h.Set("X-RateLimit-Limit", q)
		h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(end.Unix(), 10))
	case "x-delta":
		h.Set("X-RateLimit-Limit", q)
		h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
		h.Set("X-RateLimit-Reset", delta)
	}
	if !ok {
		h.Set("Retry-After", delta)
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// hammer sends 5 goroutines × 12 GETs to url through c and returns how many
// did not end in 200.
func hammer(t *testing.T, c *http.Client, url string) int {
	var mu sync.Mutex
	failed := 0
	var wg sync.WaitGroup
	for range 5 {
		wg.Go(func() {
			for range 12 {
				resp, err := do(t, c, "GET", url, "")
				if err != nil || resp.StatusCode != 200 {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// Against a server in each dialect enforcing 10 requests per second, a
// Transport (Base in memory, nothing else set) with 5 goroutines × 12 GETs
// draws at most 2 server-side 429s, in virtual time.
func TestTransportDialects(t *testing.T) {
	for _, d := range dialects {
		t.Run(d, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &windowServer{dialect: d, limit: 10, window: time.Second}
				start := time.Now()
				c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{s}}}
				failed := hammer(t, c, "http://api.test/x")
				elapsed := time.Since(start)
				t.Logf("%s: %d served, %d refused at the server, %d failed at the client, in %v", d, s.served, s.refused, failed, elapsed)
				if s.refused > 2 || failed != 0 || s.served != 60 {
					t.Errorf("%d served, %d refused (at most 2), %d failed", s.served, s.refused, failed)
				}
				if elapsed > 8*time.Second {
					t.Errorf("took %v for 6 windows' worth", elapsed)
				}
			})
		})
	}
}

// The same on the real clock, over loopback, with a zero-value Transport
// (http.DefaultTransport underneath): about 6 s, the dialects at once.
func TestTransportDialectsLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("6 s on the real clock")
	}
	defer http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	var wg sync.WaitGroup
	for _, d := range dialects {
		s := &windowServer{dialect: d, limit: 10, window: time.Second}
		srv := httptest.NewServer(s)
		defer srv.Close()
		wg.Go(func() {
			c := &http.Client{Transport: &httplimit.Transport{}}
			start := time.Now()
			failed := hammer(t, c, srv.URL)
			t.Logf("%s: %d served, %d refused at the server, %d failed at the client, in %v", d, s.served, s.refused, failed, time.Since(start))
			if s.refused > 2 || failed != 0 {
				t.Errorf("%s: %d refused at the server (at most 2), %d failed", d, s.refused, failed)
			}
		})
	}
	wg.Wait()
}
