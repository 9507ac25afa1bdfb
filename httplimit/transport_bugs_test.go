package httplimit_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// A Retry-After learned while requests wait on the Transport's own Limiter
// holds them too: 5 goroutines × 6 GETs through a token bucket of 10/s,
// burst 1; the server refuses its 3rd request with Retry-After: 2, and no
// request reaches it in the 2 s after the refusal.
func TestTransportRetryAfterLearnedWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(fine, fine, refuse("2"), fine)
		lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{s}, Limiter: lim, Retries: -1}}
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				for range 6 {
					_, _ = do(t, c, "GET", "http://api.test/x", "")
				}
			})
		}
		wg.Wait()
		at := s.times()
		if len(at) != 30 {
			t.Fatalf("%d requests reached the server, want 30", len(at))
		}
		refusedAt := at[2]
		for i, a := range at[3:] {
			if a < refusedAt+2*time.Second {
				t.Errorf("request %d sent %v after the 429 with Retry-After: 2", i+4, a-refusedAt)
			}
		}
	})
}

// A Retry-After too large for int64 (RFC 9110 allows any number of digits)
// saturates: the host gets no request for a very long time, and a request
// that would wait longer than MaxRetryWait fails at once.
func TestTransportRetryAfterSaturates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(refuse("100000000000000000000"), fine)
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{s}, Retries: -1}}
		if resp, _ := do(t, c, "GET", "http://api.test/x", ""); resp == nil || resp.StatusCode != 429 {
			t.Fatalf("first: %v, want the 429", resp)
		}
		start := time.Now()
		_, err := do(t, c, "GET", "http://api.test/x", "")
		if !errors.Is(err, httplimit.ErrBlocked) || time.Since(start) != 0 {
			t.Errorf("second request: err %v after %v, want ErrBlocked at once", err, time.Since(start))
		}
		if n := len(s.times()); n != 1 {
			t.Errorf("%d requests reached the server, want 1", n)
		}
	})
}

// A RateLimit reset too large for a time.Duration in nanoseconds
// (t >= 9223372037) saturates rather than wrapping negative: after r=0 the
// next request does not go out.
func TestTransportRateLimitResetSaturates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(func(w http.ResponseWriter) {
			w.Header().Set("RateLimit", `"default";r=0;t=9223372037`)
			fine(w)
		})
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{s}, Retries: -1}}
		if _, err := do(t, c, "GET", "http://api.test/x", ""); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := do(t, c, "GET", "http://api.test/x", "")
		if !errors.Is(err, httplimit.ErrBlocked) || time.Since(start) != 0 {
			t.Errorf("second request: err %v after %v, want ErrBlocked at once", err, time.Since(start))
		}
		if n := len(s.times()); n != 1 {
			t.Errorf("%d requests reached the server, want 1", n)
		}
	})
}

// delayTransport sends requests to a handler in memory, delaying a
// request's arrival and its response by what its path says, so that
// responses come back in another order than the requests reached the
// server.
type delayTransport struct {
	h               http.Handler
	arrive, respond map[string]time.Duration
}

func (d delayTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	time.Sleep(d.arrive[r.URL.Path])
	resp, err := memTransport{d.h}.RoundTrip(r)
	time.Sleep(d.respond[r.URL.Path])
	return resp, err
}

// Only what responses received before a request was sent allow is
// trusted: a request that reaches the server late but whose response comes
// back first is counted. A server allows 3 requests per 10 s; /a is sent
// first and reaches it second, /b is sent second, reaches it first and is
// answered last, with more quota left than /a's answer says. The client's
// next two requests, sent at once, must not draw a 429.
func TestTransportOutOfOrderResponses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var statuses []int
		m := mustNew(t, httplimit.Options{Limiter: fixedWindow(t, 3, 10*time.Second, limiter.QueueOptions{}), OnDecision: func(_ *http.Request, d httplimit.Decision) {
			mu.Lock()
			statuses = append(statuses, d.Status)
			mu.Unlock()
		}})
		base := delayTransport{h: m.Wrap(ok),
			arrive:  map[string]time.Duration{"/a": 50 * time.Millisecond},
			respond: map[string]time.Duration{"/b": 100 * time.Millisecond, "/c": 10 * time.Millisecond}}
		c := &http.Client{Transport: &httplimit.Transport{Base: base, Retries: -1}}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = do(t, c, "GET", "http://api.test/a", "") })
		time.Sleep(10 * time.Millisecond)
		wg.Go(func() { _, _ = do(t, c, "GET", "http://api.test/b", "") })
		wg.Wait()
		for range 2 {
			wg.Go(func() {
				if resp, err := do(t, c, "GET", "http://api.test/c", ""); err != nil || resp.StatusCode != 200 {
					t.Errorf("GET /c: %v %v", resp, err)
				}
			})
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for i, st := range statuses {
			if st == http.StatusTooManyRequests {
				t.Errorf("request %d drew a 429 at the server (statuses %v)", i+1, statuses)
			}
		}
	})
}
