package otellimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
)

// TestMiddleware scripts a middleware that queues for up to a second in
// front of a concurrency limit of 1: a request served for 2s, one that
// waits its whole second in vain, one whose client goes away.
func TestMiddleware(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t, otellimit.Options{})
		var mu sync.Mutex
		var hooked []httplimit.Outcome
		cl := must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1}))
		mw := must(httplimit.New(m.Middleware(httplimit.Options{
			Limiter: cl,
			Wait:    time.Second,
			Policy:  "http",
			OnDecision: func(_ *http.Request, d httplimit.Decision) {
				mu.Lock()
				hooked = append(hooked, d.Outcome)
				mu.Unlock()
			},
		}, nil)))
		h := mw.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			time.Sleep(2 * time.Second)
		}))
		status := func(ctx context.Context) int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
			return rec.Code
		}

		var wg sync.WaitGroup
		wg.Go(func() {
			if s := status(context.Background()); s != http.StatusOK {
				t.Errorf("first request: %d", s)
			}
		})
		synctest.Wait()
		c := collect(t, r)
		c.want(t, "active_request_leases", "policy=http 1")
		c.want(t, "limit", "policy=http 1")

		wg.Go(func() {
			if s := status(context.Background()); s != http.StatusTooManyRequests {
				t.Errorf("request that waited in vain: %d", s)
			}
		})
		gone, leave := context.WithCancel(context.Background())
		wg.Go(func() { status(gone) })
		synctest.Wait()
		c = collect(t, r)
		c.want(t, "queued_requests", "policy=http 2")
		time.Sleep(500 * time.Millisecond)
		leave()
		wg.Wait()

		c = collect(t, r)
		c.want(t, "requests",
			"policy=http,result=granted 1",
			"policy=http,result=deadline_exceeded 1",
			"policy=http,result=canceled 1",
		)
		c.want(t, "request.time_in_queue",
			"policy=http,result=granted n=1 sum=0 le0.005:1",
			"policy=http,result=deadline_exceeded n=1 sum=1 le1:1",
			"policy=http,result=canceled n=1 sum=0.5 le0.5:1",
		)
		c.want(t, "request_lease.duration", "policy=http n=1 sum=2 le2.5:1")
		c.want(t, "active_request_leases", "policy=http 0")
		c.want(t, "queued_requests", "policy=http 0")
		if len(hooked) != 3 {
			t.Errorf("the user's OnDecision saw %v, want 3 decisions", hooked)
		}
	})
}

// TestMiddlewareKeyed checks a keyed middleware: decisions by key plan,
// a request with no key, and the RateLimit fields still sent (the wrapped
// set passes Quota through).
func TestMiddlewareKeyed(t *testing.T) {
	m, r := newMetrics(t, otellimit.Options{})
	set := must(limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 1}))
	defer set.Close()
	errNoKey := errors.New("no X-Key")
	mw := must(httplimit.New(m.Middleware(httplimit.Options{
		Keyed: set,
		Key: func(r *http.Request) (string, error) {
			if k := r.Header.Get("X-Key"); k != "" {
				return k, nil
			}
			return "", errNoKey
		},
	}, func(key string) string {
		if key == "" {
			return "none"
		}
		return tier(key)
	})))
	h := mw.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	send := func(key string) *http.Response {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if key != "" {
			req.Header.Set("X-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Result()
	}
	for _, k := range []string{"gold-acme", "free-bob"} {
		if resp := send(k); resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit-Policy") == "" {
			t.Fatalf("%s: %d, RateLimit-Policy %q", k, resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
		}
	}
	if resp := send("gold-acme"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("RateLimit") == "" {
		t.Fatalf("second gold-acme: %d, RateLimit %q", resp.StatusCode, resp.Header.Get("RateLimit"))
	}
	if resp := send(""); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("no key: %d", resp.StatusCode)
	}
	c := collect(t, r)
	c.want(t, "requests",
		"key=gold,policy=default,result=granted 1",
		"key=gold,policy=default,result=limited 1",
		"key=free,policy=default,result=granted 1",
		"key=none,policy=default,result=error 1",
	)
	c.want(t, "queued_requests", "policy=default 0")
}

// TestTransport checks a client Transport whose limiters are wrapped: a
// concurrency limit held until each response body is closed, and a
// per-host rate limit, against a real loopback server.
func TestTransport(t *testing.T) {
	m, r := newMetrics(t, otellimit.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	inFlight := must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 2}))
	hosts := must(limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 2}))
	defer hosts.Close()
	tr := &httplimit.Transport{
		Limiter: m.Wrap(inFlight, "upstream"),
		PerHost: m.WrapPerKey(hosts.For, "upstream-host", nil),
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	for i := range 3 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if i < 2 {
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close() // releases the in-flight permit
			continue
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("third request: %v, want the host's limit past the deadline", err)
		}
	}
	c := collect(t, r)
	c.want(t, "requests",
		"policy=upstream,result=granted 3",
		"policy=upstream-host,result=granted 2",
		"policy=upstream-host,result=deadline_exceeded 1",
	)
	c.want(t, "active_request_leases", "policy=upstream 0")
	if got := c["request_lease.duration"]; len(got) != 1 || !strings.HasPrefix(got[0], "policy=upstream n=3 ") {
		t.Errorf("request_lease.duration %q, want 3 leases of upstream", got)
	}
}
