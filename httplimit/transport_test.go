package httplimit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// memTransport sends requests to a handler in memory, so that a Transport
// can be tested inside a synctest bubble.
type memTransport struct{ h http.Handler }

func (m memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		defer r.Body.Close()
	} else {
		r = r.Clone(r.Context())
		r.Body = http.NoBody
	}
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// script is a server that answers its requests from a list of responses
// (the last one repeated) and records when each came and its body.
type script struct {
	mu      sync.Mutex
	start   time.Time
	answers []func(w http.ResponseWriter)
	at      []time.Duration
	bodies  []string
}

func newScript(answers ...func(w http.ResponseWriter)) *script {
	return &script{start: time.Now(), answers: answers}
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	i := min(len(s.at), len(s.answers)-1)
	s.at = append(s.at, time.Since(s.start))
	s.bodies = append(s.bodies, string(body))
	s.mu.Unlock()
	s.answers[i](w)
}

func (s *script) times() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.at...)
}

func refuse(retryAfter string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", retryAfter)
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

func fine(w http.ResponseWriter) { _, _ = io.WriteString(w, "ok") }

func do(t *testing.T, c *http.Client, method, url, body string) (*http.Response, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	return resp, err
}

// After a 429 with Retry-After, the request is retried once the time has
// passed, not before.
func TestTransportRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(refuse("2"), fine)
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{s}}}
		resp, err := do(t, c, "GET", "http://api.test/x", "")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET: %v %v", resp, err)
		}
		if got, want := s.times(), []time.Duration{0, 2 * time.Second}; !equal(got, want) {
			t.Errorf("requests at %v, want %v", got, want)
		}
	})
}

// Retry-After as an HTTP date.
func TestTransportRetryAfterDate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(refuse(time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat)), fine)
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{s}}}
		if resp, err := do(t, c, "GET", "http://api.test/x", ""); err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET: %v %v", resp, err)
		}
		if got, want := s.times(), []time.Duration{0, 3 * time.Second}; !equal(got, want) {
			t.Errorf("requests at %v, want %v", got, want)
		}
	})
}

// Retries are budgeted: after Retries retries the refusal is returned.
func TestTransportRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(refuse("1"))
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{s}, Retries: 3}}
		resp, err := do(t, c, "GET", "http://api.test/x", "")
		if err != nil || resp.StatusCode != 429 {
			t.Fatalf("GET: %v %v, want the 429", resp, err)
		}
		if got, want := s.times(), []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}; !equal(got, want) {
			t.Errorf("requests at %v, want %v", got, want)
		}
	})
}

// A POST without GetBody is not retried, but the next request to the host
// still waits out the Retry-After; a POST with GetBody is retried with its
// body.
func TestTransportReplay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(refuse("5"), fine)
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{s}}}
		req, _ := http.NewRequest("POST", "http://api.test/x", io.NopCloser(strings.NewReader("once")))
		resp, err := c.Do(req)
		if err != nil || resp.StatusCode != 429 {
			t.Fatalf("POST without GetBody: %v %v, want the 429", resp, err)
		}
		resp.Body.Close()
		if resp, err := do(t, c, "POST", "http://api.test/y", "twice"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST with GetBody: %v %v", resp, err)
		}
		if got, want := s.times(), []time.Duration{0, 5 * time.Second}; !equal(got, want) {
			t.Errorf("requests at %v, want %v", got, want)
		}
		if s.bodies[1] != "twice" {
			t.Errorf("bodies %q", s.bodies)
		}
	})
}

// A request whose wait would outlast its deadline fails at once.
func TestTransportDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(refuse("60"), fine)
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{s}, Retries: -1}}
		if resp, _ := do(t, c, "GET", "http://api.test/x", ""); resp.StatusCode != 429 {
			t.Fatalf("first: %d", resp.StatusCode)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/x", nil)
		start := time.Now()
		_, err := c.Do(req)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 0 {
			t.Errorf("err %v after %v, want DeadlineExceeded at once", err, time.Since(start))
		}
		// Another host is not held back.
		if resp, err := do(t, c, "GET", "http://other.test/x", ""); err != nil || resp.StatusCode != 200 {
			t.Errorf("other host: %v %v", resp, err)
		}
	})
}

// The Transport's own limiters: a Concurrency permit is held until the
// body is closed.
func TestTransportLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conc, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		hosts, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
			return limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(1, time.Second)})
		}})
		if err != nil {
			t.Fatal(err)
		}
		s := newScript(fine)
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{s}, Limiter: conc, PerHost: hosts.For}}
		resp, err := c.Get("http://api.test/a")
		if err != nil {
			t.Fatal(err)
		}
		if conc.Stats().Available != 0 {
			t.Errorf("permit released before the body was closed")
		}
		resp.Body.Close()
		if conc.Stats().Available != 1 {
			t.Errorf("permit not released when the body was closed")
		}
		for range 2 {
			if _, err := do(t, c, "GET", "http://api.test/b", ""); err != nil {
				t.Fatal(err)
			}
		}
		// One a second per host.
		if got, want := s.times(), []time.Duration{0, time.Second, 2 * time.Second}; !equal(got, want) {
			t.Errorf("requests at %v, want %v", got, want)
		}
	})
}

// A client that reads the RateLimit field keeps to the server's limit:
// 40 requests from 4 goroutines to a server allowing 5 a second get no 429,
// and the server never serves more than 5 in a window.
func TestTransportKeepsToRateLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fixedWindow(t, 5, time.Second, limiter.QueueOptions{})
		var mu sync.Mutex
		perWindow := map[int64]int{}
		start := time.Now()
		m := mustNew(t, httplimit.Options{Limiter: lim, OnDecision: func(_ *http.Request, d httplimit.Decision) {
			if d.Outcome == httplimit.Served {
				mu.Lock()
				perWindow[int64(time.Since(start)/time.Second)]++
				mu.Unlock()
			}
		}})
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{m.Wrap(ok)}, Retries: -1}}
		var wg sync.WaitGroup
		var refused, sent int
		for range 4 {
			wg.Go(func() {
				for range 10 {
					resp, err := do(t, c, "GET", "http://api.test/x", "")
					mu.Lock()
					sent++
					if err != nil || resp.StatusCode != 200 {
						refused++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if sent != 40 || refused != 0 {
			t.Errorf("%d sent, %d refused; want 40 and 0", sent, refused)
		}
		for w, n := range perWindow {
			if n > 5 {
				t.Errorf("window %d served %d, over 5", w, n)
			}
		}
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("took %v: slower than needed (8 windows)", elapsed)
		}
	})
}

// Against a real server on loopback (net/http both ends): a 429 with
// Retry-After: 1 is retried no sooner than a second later.
func TestTransportRealServer(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		n := len(at)
		mu.Unlock()
		if n == 1 {
			refuse("1")(w)
			return
		}
		fine(w)
	}))
	defer srv.Close()
	c := &http.Client{Transport: &httplimit.Transport{Base: srv.Client().Transport}}
	resp, err := do(t, c, "GET", srv.URL, "")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	if len(at) != 2 || at[1].Sub(at[0]) < time.Second {
		t.Errorf("requests at %v: want the retry a second after the refusal", at)
	}
}
