package httplimit_test

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
)

func mustNew(t *testing.T, o httplimit.Options) *httplimit.Middleware {
	t.Helper()
	m, err := httplimit.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fixedWindow(t *testing.T, n int, w time.Duration, q limiter.QueueOptions) *limiter.FixedWindow {
	t.Helper()
	l, err := limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: n, Window: w, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func wantHeader(t *testing.T, resp *http.Response, name, want string) {
	t.Helper()
	if got := strings.Join(resp.Header.Values(name), ", "); got != want {
		t.Errorf("%s = %q, want %q", name, got, want)
	}
}

// A window of 3 a second serves 3 requests, with the quota left counting
// down in RateLimit, and refuses the 4th with 429, Retry-After and r=0; a
// second later the quota is whole again.
func TestRefusalHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fixedWindow(t, 3, time.Second, limiter.QueueOptions{})
		h := mustNew(t, httplimit.Options{Limiter: lim}).Wrap(ok)
		time.Sleep(400 * time.Millisecond)
		for i, left := range []string{"2", "1", "0"} {
			resp := serve(h, get("192.0.2.1:1000"))
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("request %d: status %d, want 200", i, resp.StatusCode)
			}
			wantHeader(t, resp, "RateLimit-Policy", `"default";q=3;w=1`)
			wantHeader(t, resp, "RateLimit", `"default";r=`+left+`;t=1`)
			wantHeader(t, resp, "Retry-After", "")
		}
		resp := serve(h, get("192.0.2.1:1000"))
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("4th request: status %d, want 429", resp.StatusCode)
		}
		wantHeader(t, resp, "Retry-After", "1") // 600 ms, rounded up
		wantHeader(t, resp, "RateLimit-Policy", `"default";q=3;w=1`)
		wantHeader(t, resp, "RateLimit", `"default";r=0;t=1`)
		wantHeader(t, resp, "Content-Type", "text/plain; charset=utf-8")
		time.Sleep(600 * time.Millisecond)
		resp = serve(h, get("192.0.2.1:1000"))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("after the window: status %d, want 200", resp.StatusCode)
		}
	})
}

// Retry-After is the limiter's wait in whole seconds, rounded up: 2.5 s is 3.
func TestRetryAfterRoundsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(2, 5*time.Second), Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		h := mustNew(t, httplimit.Options{Limiter: lim}).Wrap(ok)
		serve(h, get("192.0.2.1:1"))
		resp := serve(h, get("192.0.2.1:1"))
		wantHeader(t, resp, "Retry-After", "3")
		wantHeader(t, resp, "RateLimit", `"default";r=0;t=3`)
		// A burst of 1 refilled every 2.5 s: the same rate over the fewest
		// whole seconds that make it exact, 2 per 5 s.
		wantHeader(t, resp, "RateLimit-Policy", `"default";q=2;w=5`)
	})
}

// Per key, each client has its own quota; Keyed and PerKey decide alike.
func TestPerKey(t *testing.T) {
	for _, mode := range []string{"PerKey", "Keyed"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				keyed, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
					return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 2, Window: time.Minute})
				}})
				if err != nil {
					t.Fatal(err)
				}
				o := httplimit.Options{Keyed: keyed}
				if mode == "PerKey" {
					o = httplimit.Options{PerKey: keyed.For}
				}
				var keys []string
				o.OnDecision = func(_ *http.Request, d httplimit.Decision) { keys = append(keys, d.Key) }
				h := mustNew(t, o).Wrap(ok)
				var codes []int
				for _, addr := range []string{"192.0.2.1:1", "192.0.2.1:2", "192.0.2.1:3", "[2001:db8::1]:4", "[2001:db8::1]:5", "[2001:db8::1]:6"} {
					codes = append(codes, serve(h, get(addr)).StatusCode)
				}
				if want := []int{200, 200, 429, 200, 200, 429}; !equal(codes, want) {
					t.Errorf("statuses %v, want %v", codes, want)
				}
				if keys[0] != "192.0.2.1" || keys[3] != "2001:db8::/64" {
					t.Errorf("keys %q", keys)
				}
				resp := serve(h, get("192.0.2.9:1"))
				wantHeader(t, resp, "RateLimit-Policy", `"default";q=2;w=60`)
				wantHeader(t, resp, "RateLimit", `"default";r=1;t=60`)
			})
		})
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// With Wait, requests queue and are served in turn at the limiter's pace;
// one that cannot be served within Wait is refused at once, not after
// waiting.
func TestWaitQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(10, time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var decisions []httplimit.Decision
		h := mustNew(t, httplimit.Options{Limiter: lim, Wait: 250 * time.Millisecond, OnDecision: func(_ *http.Request, d httplimit.Decision) {
			mu.Lock()
			decisions = append(decisions, d)
			mu.Unlock()
		}}).Wrap(ok)
		start := time.Now()
		type result struct {
			code int
			at   time.Duration
		}
		results := make([]result, 5)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				resp := serve(h, get("192.0.2.1:1"))
				results[i] = result{resp.StatusCode, time.Since(start)}
			})
			synctest.Wait() // queued in order
		}
		wg.Wait()
		// Grants at 0, 100, 200 ms; 300 and 400 ms are past the 250 ms
		// wait, so the 4th and 5th are refused at once: the pacer foresees
		// the wait behind its whole queue (limiter.Foreseer).
		want := []result{{200, 0}, {200, 100 * time.Millisecond}, {200, 200 * time.Millisecond}, {429, 0}, {429, 0}}
		if !equal(results, want) {
			t.Errorf("results %v, want %v", results, want)
		}
		var served, limited int
		for _, d := range decisions {
			switch d.Outcome {
			case httplimit.Served:
				served++
			case httplimit.Limited:
				limited++
				if !errors.Is(d.Err, context.DeadlineExceeded) || d.RetryAfter <= 0 {
					t.Errorf("refusal %+v: want DeadlineExceeded and a retry after the wait", d)
				}
			}
		}
		if decisions[0].Key != "192.0.2.1" {
			t.Errorf("one limit: the hook got key %q, want the client's address", decisions[0].Key)
		}
		if served != 3 || limited != 2 {
			t.Errorf("decisions: %d served, %d limited, want 3 and 2", served, limited)
		}
	})
}

// A request the limiter can tell will not be served within Wait is refused
// at once, with the limiter's wait as Retry-After.
func TestWaitRefusesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fixedWindow(t, 1, 3*time.Second, limiter.QueueOptions{})
		h := mustNew(t, httplimit.Options{Limiter: lim, Wait: time.Second}).Wrap(ok)
		serve(h, get("192.0.2.1:1"))
		time.Sleep(500 * time.Millisecond)
		start := time.Now()
		resp := serve(h, get("192.0.2.1:1"))
		if resp.StatusCode != 429 || time.Since(start) != 0 {
			t.Errorf("status %d after %v, want 429 at once", resp.StatusCode, time.Since(start))
		}
		wantHeader(t, resp, "Retry-After", "3") // 2.5 s
	})
}

// A client that goes away while queued leaves the queue, takes nothing and
// gets no response; the next request takes the permit it would have had.
func TestGoneWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fixedWindow(t, 1, time.Second, limiter.QueueOptions{})
		var outcomes []httplimit.Outcome
		h := mustNew(t, httplimit.Options{Limiter: lim, Wait: 5 * time.Second, OnDecision: func(_ *http.Request, d httplimit.Decision) {
			outcomes = append(outcomes, d.Outcome)
		}}).Wrap(ok)
		serve(h, get("192.0.2.1:1")) // takes the window's permit
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *http.Response)
		go func() { done <- serve(h, get("192.0.2.1:2").WithContext(ctx)) }()
		synctest.Wait()
		cancel()
		resp := <-done
		if resp.StatusCode != http.StatusOK || resp.ContentLength > 0 || resp.Header.Get("Retry-After") != "" {
			t.Errorf("gone client: got a response %d %v", resp.StatusCode, resp.Header)
		}
		time.Sleep(time.Second) // the next window: its one permit is still there
		if code := serve(h, get("192.0.2.1:3")).StatusCode; code != http.StatusOK {
			t.Errorf("after a gone client: %d, want 200", code)
		}
		if want := []httplimit.Outcome{httplimit.Served, httplimit.Gone, httplimit.Served}; !equal(outcomes, want) {
			t.Errorf("outcomes %v, want %v", outcomes, want)
		}
	})
}

// A full queue is 429, or 503 with QueueFullStatus.
func TestQueueFull(t *testing.T) {
	for _, status := range []int{0, http.StatusServiceUnavailable} {
		synctest.Test(t, func(t *testing.T) {
			lim := fixedWindow(t, 1, time.Second, limiter.QueueOptions{Limit: 1})
			h := mustNew(t, httplimit.Options{Limiter: lim, Wait: 2 * time.Second, QueueFullStatus: status}).Wrap(ok)
			serve(h, get("192.0.2.1:1"))
			var wg sync.WaitGroup
			wg.Go(func() { serve(h, get("192.0.2.1:2")) }) // queued until the next window
			synctest.Wait()
			resp := serve(h, get("192.0.2.1:3"))
			want := status
			if want == 0 {
				want = http.StatusTooManyRequests
			}
			if resp.StatusCode != want {
				t.Errorf("QueueFullStatus %d: got %d, want %d", status, resp.StatusCode, want)
			}
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("queue full: no Retry-After")
			}
			wg.Wait()
		})
	}
}

// Cost: a request takes what Cost says; 0 takes nothing; a negative cost
// is a 500.
func TestCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fixedWindow(t, 10, time.Second, limiter.QueueOptions{})
		h := mustNew(t, httplimit.Options{Limiter: lim, Cost: func(r *http.Request) int {
			switch r.URL.Path {
			case "/free":
				return 0
			case "/bug":
				return -1
			case "/huge":
				return 11
			}
			return 4
		}}).Wrap(ok)
		req := func(path string) *http.Response {
			r := get("192.0.2.1:1")
			r.URL.Path = path
			return serve(h, r)
		}
		for i, want := range []int{200, 200, 429} {
			if code := req("/search").StatusCode; code != want {
				t.Errorf("search %d: %d, want %d", i, code, want)
			}
		}
		if resp := req("/free"); resp.StatusCode != 200 {
			t.Errorf("free: %d", resp.StatusCode)
		}
		if resp := req("/bug"); resp.StatusCode != 500 {
			t.Errorf("negative cost: %d, want 500", resp.StatusCode)
		}
		resp := req("/huge")
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" {
			t.Errorf("never grantable: %d Retry-After %q, want 429 without Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	})
}

// A concurrency limiter's permit is held while the handler runs.
func TestConcurrencyLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		release := make(chan struct{})
		h := mustNew(t, httplimit.Options{Limiter: lim}).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		done := make(chan *http.Response)
		go func() { done <- serve(h, get("192.0.2.1:1")) }()
		synctest.Wait()
		resp := serve(h, get("192.0.2.1:2"))
		if resp.StatusCode != 429 {
			t.Errorf("second in flight: %d, want 429", resp.StatusCode)
		}
		wantHeader(t, resp, "RateLimit-Policy", `"default";q=1;qu="concurrent-requests"`)
		close(release)
		first := <-done
		wantHeader(t, first, "RateLimit", `"default";r=0`)
		if st := lim.Stats(); st.Available != 1 {
			t.Errorf("after the handler returned: %d available, want 1", st.Available)
		}
	})
}

// A limiter that fails (closed) is 503; a key that cannot be found is 400;
// both reach OnRefuse and OnDecision.
func TestFailures(t *testing.T) {
	lim := fixedWindow(t, 1, time.Second, limiter.QueueOptions{})
	_ = lim.Close()
	var got []httplimit.Decision
	o := httplimit.Options{Limiter: lim, OnDecision: func(_ *http.Request, d httplimit.Decision) { got = append(got, d) }}
	if code := serve(mustNew(t, o).Wrap(ok), get("192.0.2.1:1")).StatusCode; code != 503 {
		t.Errorf("closed limiter: %d, want 503", code)
	}
	if len(got) != 1 || got[0].Outcome != httplimit.Failed || !errors.Is(got[0].Err, limiter.ErrClosed) {
		t.Errorf("decision %+v", got)
	}
	var refused httplimit.Decision
	m := mustNew(t, httplimit.Options{
		PerKey: func(string) limiter.Limiter { return nil },
		Key:    httplimit.HeaderKey("X-API-Key"),
		OnRefuse: func(w http.ResponseWriter, _ *http.Request, d httplimit.Decision) {
			refused = d
			w.WriteHeader(http.StatusUnauthorized)
		},
	})
	if code := serve(m.Wrap(ok), get("192.0.2.1:1")).StatusCode; code != 401 {
		t.Errorf("no API key: %d, want the custom 401", code)
	}
	if refused.Status != 400 || !errors.Is(refused.Err, httplimit.ErrNoKey) {
		t.Errorf("refusal %+v, want status 400 and ErrNoKey", refused)
	}
	r := get("192.0.2.1:1")
	r.Header.Set("X-API-Key", "k1")
	if code := serve(m.Wrap(ok), r).StatusCode; code != 200 {
		t.Errorf("nil limiter for the key: %d, want 200 (no limit)", code)
	}
}

// A custom refusal keeps Retry-After and the RateLimit fields.
func TestCustomRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fixedWindow(t, 1, time.Minute, limiter.QueueOptions{})
		h := mustNew(t, httplimit.Options{Limiter: lim, Policy: `per "minute"`, LegacyHeaders: true,
			OnRefuse: func(w http.ResponseWriter, _ *http.Request, d httplimit.Decision) {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(d.Status)
				_, _ = w.Write([]byte(`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded"}`))
			}}).Wrap(ok)
		first := serve(h, get("192.0.2.1:1"))
		wantHeader(t, first, "X-RateLimit-Limit", "1")
		wantHeader(t, first, "X-RateLimit-Remaining", "0")
		wantHeader(t, first, "X-RateLimit-Reset", "946684860") // 2000-01-01 00:01:00 UTC, synctest's epoch + 60 s
		time.Sleep(30 * time.Second)
		resp := serve(h, get("192.0.2.1:1"))
		if resp.StatusCode != 429 || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("custom refusal: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		wantHeader(t, resp, "Retry-After", "30")
		wantHeader(t, resp, "RateLimit-Policy", `"per \"minute\"";q=1;w=60`)
		wantHeader(t, resp, "RateLimit", `"per \"minute\"";r=0;t=30`)
	})
}

// NoHeaders leaves the RateLimit fields out, but not Retry-After.
func TestNoHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := fixedWindow(t, 1, time.Minute, limiter.QueueOptions{})
		h := mustNew(t, httplimit.Options{Limiter: lim, NoHeaders: true}).Wrap(ok)
		first := serve(h, get("192.0.2.1:1"))
		second := serve(h, get("192.0.2.1:1"))
		for _, resp := range []*http.Response{first, second} {
			if resp.Header.Get("RateLimit") != "" || resp.Header.Get("RateLimit-Policy") != "" {
				t.Errorf("NoHeaders: %v", resp.Header)
			}
		}
		wantHeader(t, second, "Retry-After", "60")
	})
}

// Bad options are *limiter.OptionError naming the field.
func TestOptionErrors(t *testing.T) {
	lim := fixedWindow(t, 1, time.Second, limiter.QueueOptions{})
	for _, c := range []struct {
		field string
		o     httplimit.Options
	}{
		{"Limiter", httplimit.Options{Limiter: lim, PerKey: func(string) limiter.Limiter { return lim }}},
		{"Wait", httplimit.Options{Wait: -time.Second}},
		{"QueueFullStatus", httplimit.Options{QueueFullStatus: 500}},
		{"Policy", httplimit.Options{Policy: "new\nline"}},
	} {
		_, err := httplimit.New(c.o)
		var oe *limiter.OptionError
		if !errors.As(err, &oe) || oe.Field != c.field {
			t.Errorf("%s: err %v, want an OptionError for it", c.field, err)
		}
	}
	defer func() {
		var oe *limiter.OptionError
		if err, _ := recover().(error); !errors.As(err, &oe) || oe.Field != "Limit" {
			t.Errorf("LimitByIP(0, ...) panicked with %v, want an OptionError for Limit", err)
		}
	}()
	httplimit.LimitByIP(0, time.Second)
}

// Wrap(nil) panics at once, as http.Handle does, not at the first request.
func TestWrapNil(t *testing.T) {
	defer func() {
		if r := recover(); r != "httplimit: nil handler" {
			t.Errorf("Wrap(nil) panicked with %v", r)
		}
	}()
	mustNew(t, httplimit.Options{}).Wrap(nil)
}

// The zero Options limits nothing.
func TestZeroOptions(t *testing.T) {
	h := mustNew(t, httplimit.Options{}).Wrap(ok)
	for range 100 {
		resp := serve(h, get("192.0.2.1:1"))
		if resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" {
			t.Fatalf("zero Options: %d %v", resp.StatusCode, resp.Header)
		}
	}
}

// LimitByIP: n per window per address, strictly.
func TestLimitByIP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := httplimit.LimitByIP(3, time.Second)(ok)
		var codes []int
		for i := range 8 {
			addr := "192.0.2.1:1"
			if i%2 == 1 {
				addr = "192.0.2.2:1"
			}
			codes = append(codes, serve(h, get(addr)).StatusCode)
		}
		if want := []int{200, 200, 200, 200, 200, 200, 429, 429}; !equal(codes, want) {
			t.Errorf("statuses %v, want %v", codes, want)
		}
		time.Sleep(time.Second)
		if code := serve(h, get("192.0.2.1:1")).StatusCode; code != 200 {
			t.Errorf("after the window: %d", code)
		}
	})
}

// Per route: the pattern ServeMux matched keys the limit.
func TestRouteKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		keyed, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Minute), Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		m := mustNew(t, httplimit.Options{Keyed: keyed, Key: httplimit.Keys(httplimit.Route, httplimit.ClientIP())})
		mux := http.NewServeMux()
		mux.Handle("GET /items/{id}", m.Wrap(ok))
		mux.Handle("GET /users/{id}", m.Wrap(ok))
		req := func(path, addr string) int {
			r := get(addr)
			r.URL.Path = path
			return serve(mux, r).StatusCode
		}
		got := []int{req("/items/1", "192.0.2.1:1"), req("/items/2", "192.0.2.1:1"), req("/users/1", "192.0.2.1:1"), req("/items/1", "192.0.2.2:1")}
		if want := []int{200, 429, 200, 200}; !equal(got, want) {
			t.Errorf("statuses %v, want %v", got, want)
		}
		// Outside a mux there is no pattern: 400, not a shared key.
		if code := serve(m.Wrap(ok), get("192.0.2.1:1")).StatusCode; code != 400 {
			t.Errorf("no pattern: %d, want 400", code)
		}
	})
}

// The served path makes one allocation (the RateLimit fields' values);
// with no headers, none.
func TestAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	keyed, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(1_000_000, time.Millisecond), Burst: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	w := &discardWriter{h: http.Header{}}
	r := get("192.0.2.1:1234")
	for _, c := range []struct {
		name string
		o    httplimit.Options
		max  float64
	}{
		{"Keyed", httplimit.Options{Keyed: keyed}, 1},
		{"Keyed/NoHeaders", httplimit.Options{Keyed: keyed, NoHeaders: true}, 0},
	} {
		h := mustNew(t, c.o).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		n := testing.AllocsPerRun(1000, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
		if n > c.max {
			t.Errorf("%s: %v allocations per request, want at most %v", c.name, n, c.max)
		}
	}
}

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// The look-ahead over the queue works per key too: with a token bucket of
// 1/s (burst 1) per key and Wait 1.5 s, the 1st request of a key is served
// at once, the 2nd after 1 s, and the 3rd, which would wait 2 s, is refused
// at once, whether the key's bucket comes from a Keyed, a
// KeyedTokenBucket, or either's For through PerKey.
func TestWaitRefusesAtOnceKeyed(t *testing.T) {
	opts := limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 1}
	for _, c := range []struct {
		name string
		o    func(t *testing.T) httplimit.Options
	}{
		{"Keyed", func(t *testing.T) httplimit.Options {
			k, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) { return limiter.NewTokenBucket(opts) }})
			if err != nil {
				t.Fatal(err)
			}
			return httplimit.Options{Keyed: k}
		}},
		{"Keyed.For", func(t *testing.T) httplimit.Options {
			k, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) { return limiter.NewTokenBucket(opts) }})
			if err != nil {
				t.Fatal(err)
			}
			return httplimit.Options{PerKey: k.For}
		}},
		{"KeyedTokenBucket", func(t *testing.T) httplimit.Options {
			k, err := limiter.NewKeyedTokenBucket[string](opts)
			if err != nil {
				t.Fatal(err)
			}
			return httplimit.Options{Keyed: k}
		}},
		{"KeyedTokenBucket.For", func(t *testing.T) httplimit.Options {
			k, err := limiter.NewKeyedTokenBucket[string](opts)
			if err != nil {
				t.Fatal(err)
			}
			return httplimit.Options{PerKey: k.For}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := c.o(t)
				o.Wait = 1500 * time.Millisecond
				h := mustNew(t, o).Wrap(ok)
				start := time.Now()
				type result struct {
					code int
					at   time.Duration
				}
				results := make([]result, 3)
				var wg sync.WaitGroup
				for i := range results {
					wg.Go(func() {
						resp := serve(h, get("192.0.2.1:1"))
						results[i] = result{resp.StatusCode, time.Since(start)}
					})
					synctest.Wait()
				}
				wg.Wait()
				want := []result{{200, 0}, {200, time.Second}, {429, 0}}
				if !equal(results, want) {
					t.Errorf("results %v, want %v", results, want)
				}
			})
		})
	}
}

// chained is a limiter of several policies (a chain of its members) that
// says so with AppendQuotas, as limiter.Chain and redislimit.Chain do.
type chained struct {
	limiter.Limiter
	members []limiter.Limiter
}

func (c chained) AppendQuotas(dst []limiter.Quota) []limiter.Quota {
	for _, m := range c.members {
		q, _ := limiter.QuotaOf(m)
		dst = append(dst, q)
	}
	return dst
}

// A limiter of several policies: RateLimit-Policy lists each member as a
// policy of its own, and RateLimit states the most constrained; the
// Transport keeps to both.
func TestSeveralPolicies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		burst, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 5})
		if err != nil {
			t.Fatal(err)
		}
		minute := fixedWindow(t, 8, time.Minute, limiter.QueueOptions{})
		lim := chained{limiter.Chain(burst, minute), []limiter.Limiter{burst, minute}}
		var decisions []httplimit.Decision
		h := mustNew(t, httplimit.Options{Limiter: lim, OnDecision: func(_ *http.Request, d httplimit.Decision) {
			decisions = append(decisions, d)
		}}).Wrap(ok)
		resp := serve(h, get("192.0.2.1:1"))
		wantHeader(t, resp, "RateLimit-Policy", `"default-1";q=10;w=1, "default-2";q=8;w=60`)
		wantHeader(t, resp, "RateLimit", `"default-1";r=4;t=1`) // 4 of the bucket's 5 left, 7 of the minute's 8
		for range 4 {
			serve(h, get("192.0.2.1:1"))
		}
		time.Sleep(time.Second) // the bucket is full again; the minute has 3 left
		resp = serve(h, get("192.0.2.1:1"))
		wantHeader(t, resp, "RateLimit", `"default-2";r=2;t=59`)
		if q := decisions[len(decisions)-1].Quota; q.Limit != 8 || q.Remaining != 2 {
			t.Errorf("Decision.Quota %+v, want the minute's", q)
		}
		for range 2 {
			serve(h, get("192.0.2.1:1"))
		}
		resp = serve(h, get("192.0.2.1:1"))
		if resp.StatusCode != 429 {
			t.Fatalf("9th request: %d, want 429", resp.StatusCode)
		}
		wantHeader(t, resp, "RateLimit", `"default-2";r=0;t=59`)
		wantHeader(t, resp, "Retry-After", "59")

		// A Transport keeps to both: 8 served at once or soon, none refused,
		// the 9th once the minute has passed.
		burst2, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 5})
		if err != nil {
			t.Fatal(err)
		}
		minute2 := fixedWindow(t, 8, time.Minute, limiter.QueueOptions{})
		refused := 0
		m := mustNew(t, httplimit.Options{Limiter: chained{limiter.Chain(burst2, minute2), []limiter.Limiter{burst2, minute2}}, OnDecision: func(_ *http.Request, d httplimit.Decision) {
			if d.Outcome != httplimit.Served {
				refused++
			}
		}})
		s := newScript(func(w http.ResponseWriter) {})
		c := &http.Client{Transport: &httplimit.Transport{Base: memTransport{m.Wrap(s)}, Retries: -1, MaxRetryWait: 2 * time.Minute}}
		for range 9 {
			if resp, err := do(t, c, "GET", "http://api.test/x", ""); err != nil || resp.StatusCode != 200 {
				t.Fatalf("GET: %v %v", resp, err)
			}
		}
		at := s.times()
		if refused != 0 || at[7] > 2*time.Second || at[8] < time.Minute {
			t.Errorf("%d refused, requests at %v: want none refused, 8 within 2 s and the 9th after the minute", refused, at)
		}
	})
}

// What the fields say for each limiter, as Options documents: q/w the
// sustained rate over whole seconds (exact when it can be), burst for a
// token bucket, r what can be served now, t the seconds until the quota
// is whole again.
func TestFieldsPerLimiter(t *testing.T) {
	must := func(l limiter.Limiter, err error) limiter.Limiter {
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	per := limiter.Per(10, time.Second)
	for _, c := range []struct {
		name         string
		lim          func() limiter.Limiter
		policy, left string
	}{
		{"TokenBucket burst 5", func() limiter.Limiter {
			return must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: per, Burst: 5}))
		}, `"default";q=10;w=1;burst=5`, `"default";r=4;t=1`},
		{"TokenBucket burst 1", func() limiter.Limiter {
			return must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: per, Burst: 1}))
		}, `"default";q=10;w=1`, `"default";r=0;t=1`},
		{"LeakyBucket", func() limiter.Limiter { return must(limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: per})) }, `"default";q=10;w=1`, `"default";r=0;t=1`},
		{"FixedWindow 5/500ms", func() limiter.Limiter {
			return must(limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 5, Window: 500 * time.Millisecond}))
		}, `"default";q=10;w=1`, `"default";r=4;t=1`},
		{"FixedWindow 100/min", func() limiter.Limiter {
			return must(limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 100, Window: time.Minute}))
		}, `"default";q=100;w=60`, `"default";r=99;t=60`},
		{"SlidingWindow 3/1.5s", func() limiter.Limiter {
			return must(limiter.NewSlidingWindow(limiter.SlidingWindowOptions{Limit: 3, Window: 1500 * time.Millisecond, Segments: 3}))
		}, `"default";q=2;w=1`, `"default";r=2;t=2`},
		{"SlidingLog 5/300ms", func() limiter.Limiter {
			return must(limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 5, Window: 300 * time.Millisecond}))
		}, `"default";q=50;w=3`, `"default";r=4;t=1`},
		{"Concurrency 8", func() limiter.Limiter { return must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 8})) }, `"default";q=8;qu="concurrent-requests"`, `"default";r=7`},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				resp := serve(mustNew(t, httplimit.Options{Limiter: c.lim()}).Wrap(ok), get("192.0.2.1:1"))
				wantHeader(t, resp, "RateLimit-Policy", c.policy)
				wantHeader(t, resp, "RateLimit", c.left)
			})
		})
	}
	t.Run("KeyedTokenBucket", func(t *testing.T) {
		k, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: per, Burst: 5})
		if err != nil {
			t.Fatal(err)
		}
		resp := serve(mustNew(t, httplimit.Options{Keyed: k}).Wrap(ok), get("192.0.2.1:1"))
		wantHeader(t, resp, "RateLimit-Policy", `"default";q=10;w=1;burst=5`)
	})
	t.Run("LimitByIP", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			resp := serve(httplimit.LimitByIP(5, 300*time.Millisecond)(ok), get("192.0.2.1:1"))
			wantHeader(t, resp, "RateLimit-Policy", `"default";q=50;w=3`)
			wantHeader(t, resp, "RateLimit", `"default";r=4;t=1`)
		})
	})
}

// However short Options.Wait is, a request its limiter can grant at once is
// served: Wait's deadline may pass before Acquire looks, and a request that
// needs no wait does not depend on it. (Found by FuzzNew: a Wait of 98 ns
// refused the first request to a fresh keyed bucket.)
func TestShortWaitServesWhatNeedsNone(t *testing.T) {
	bucket := func() limiter.Limiter {
		b, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	conc := func() limiter.Limiter {
		c, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, wait := range []time.Duration{1, 98, time.Microsecond, 10 * time.Microsecond} {
		for name, lim := range map[string]func() limiter.Limiter{"TokenBucket": bucket, "Concurrency": conc} {
			for i := range 20 {
				m, err := httplimit.New(httplimit.Options{Limiter: lim(), Wait: wait})
				if err != nil {
					t.Fatal(err)
				}
				rec := httptest.NewRecorder()
				m.Wrap(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
				if rec.Code != http.StatusOK {
					t.Fatalf("%s, Wait %v, run %d: the first request got %d, want 200", name, wait, i, rec.Code)
				}
			}
		}
	}
}
