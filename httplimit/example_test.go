package httplimit_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// The one-liner: at most 2 requests per client address in any minute.
func ExampleLimitByIP() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello\n") })
	srv := httptest.NewServer(httplimit.LimitByIP(2, time.Minute)(mux))
	defer srv.Close()

	for range 3 {
		resp, err := srv.Client().Get(srv.URL + "/hello")
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
		// RateLimit (quota left, seconds to the window's end) and
		// Retry-After depend on the clock; the policy does not.
		fmt.Printf("%s | RateLimit-Policy: %s | Retry-After set: %v\n",
			resp.Status, resp.Header.Get("RateLimit-Policy"), resp.Header.Get("Retry-After") != "")
	}
	// Output:
	// 200 OK | RateLimit-Policy: "default";q=2;w=60 | Retry-After set: false
	// 200 OK | RateLimit-Policy: "default";q=2;w=60 | Retry-After set: false
	// 429 Too Many Requests | RateLimit-Policy: "default";q=2;w=60 | Retry-After set: true
}

// A limit per client behind a reverse proxy, with a hook that counts the
// decisions, and a costlier route.
func ExampleNew() {
	// 10 permits per client, refilled at 10 a minute; a search costs 5.
	buckets, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Minute), Burst: 10})
	if err != nil {
		log.Fatal(err)
	}
	count := map[httplimit.Outcome]int{}
	m, err := httplimit.New(httplimit.Options{
		Keyed: buckets,
		// The proxy at 10.0.0.0/8 appends the client to X-Forwarded-For.
		Key: httplimit.ClientIP(netip.MustParsePrefix("10.0.0.0/8")),
		Cost: func(r *http.Request) int {
			if r.URL.Path == "/search" {
				return 5
			}
			return 1
		},
		OnDecision: func(_ *http.Request, d httplimit.Decision) { count[d.Outcome]++ },
	})
	if err != nil {
		log.Fatal(err)
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }))

	for _, path := range []string{"/search", "/search", "/item"} {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = "10.0.0.1:4321" // the proxy
		r.Header.Set("X-Forwarded-For", "198.51.100.7")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(path, w.Code, w.Header().Get("RateLimit-Policy"))
	}
	fmt.Println(count[httplimit.Served], "served,", count[httplimit.Limited], "limited")
	// Output:
	// /search 200 "default";q=10;w=60;burst=10
	// /search 200 "default";q=10;w=60;burst=10
	// /item 429 "default";q=10;w=60;burst=10
	// 2 served, 1 limited
}

// A client that keeps to the quota a server advertises: the server allows
// 3 requests per client per second, the client sends 6 and is refused none,
// as it waits for the next window when the RateLimit field says r=0.
func ExampleTransport() {
	srv := httptest.NewServer(httplimit.LimitByIP(3, time.Second)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	})))
	defer srv.Close()

	client := &http.Client{Transport: &httplimit.Transport{Base: srv.Client().Transport}}
	refused := 0
	for range 6 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			log.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			refused++
		}
	}
	fmt.Println("sent 6, refused", refused)
	// Output: sent 6, refused 0
}

// LimitByIP built by hand, to hold the clients' logs: a cap on the clients
// held, another IPv6 prefix length, and Prune to give memory back at once.
func ExampleKeyedLog() {
	logs, err := httplimit.NewKeyedLog(httplimit.KeyedLogOptions{Limit: 2, Window: time.Minute, MaxKeys: 100_000})
	if err != nil {
		log.Fatal(err)
	}
	key, err := httplimit.IPKey(httplimit.IPKeyOptions{IPv6Prefix: 56})
	if err != nil {
		log.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Options{Keyed: logs, Key: key})
	if err != nil {
		log.Fatal(err)
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for _, addr := range []string{"[2001:db8:0:1::1]:443", "[2001:db8:0:2::1]:443", "[2001:db8:0:3::1]:443"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr // three /64s of one /56
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(addr, w.Code)
	}
	fmt.Println("clients held:", logs.Len(), "dropped by Prune:", logs.Prune())
	// Output:
	// [2001:db8:0:1::1]:443 200
	// [2001:db8:0:2::1]:443 200
	// [2001:db8:0:3::1]:443 429
	// clients held: 1 dropped by Prune: 0
}

// A crawler's client: a zero Transport sends as fast as it is asked until a
// host pushes back, then keeps to a rate it learns from the host's answers.
// Here the host answers 429, and states nothing, above 50 requests a
// second; Limits says what the Transport found.
func ExampleTransport_Limits() {
	bucket, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(50, time.Second), Burst: 5})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !bucket.TryAcquire(1).Granted() {
			w.WriteHeader(http.StatusTooManyRequests) // no Retry-After, no RateLimit field
		}
	}))
	defer srv.Close()

	tr := &httplimit.Transport{Base: srv.Client().Transport}
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
				resp, err := client.Do(req)
				if err != nil {
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	lim, _ := tr.Limits(srv.Listener.Addr().String())
	fmt.Println("stated:", lim.Stated, "learned a rate:", !lim.Learned.IsZero())
	// Output: stated: false learned a rate: true
}

// Shedding load: an adaptive.ConcurrencyLimiter as Shed keeps the requests
// in flight near what the handler serves without queueing (here it may
// not go above 1); a request past it is answered 503 with Retry-After.
func ExampleNew_shed() {
	shed, _ := adaptive.NewConcurrencyLimiter(adaptive.ConcurrencyOptions{Floor: 1, Ceiling: 1})
	m, _ := httplimit.New(httplimit.Options{Shed: shed})
	busy, done := make(chan struct{}), make(chan struct{})
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(busy)
		<-done
	}))
	var wg sync.WaitGroup
	wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) })
	<-busy
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	close(done)
	wg.Wait()
	fmt.Println(w.Code, "Retry-After:", w.Header().Get("Retry-After"))
	// Output: 503 Retry-After: 1
}
