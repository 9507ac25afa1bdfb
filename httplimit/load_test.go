package httplimit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// span is when a grant happened: after before and before after.
type span struct{ before, after time.Time }

// recordingKeyed is a KeyedLimiter that records when each grant of each
// key happened.
type recordingKeyed struct {
	k interface {
		httplimit.KeyedLimiter
		Quota(key string) limiter.Quota
	}
	mu     sync.Mutex
	grants map[string][]span
}

func (r *recordingKeyed) record(key string, before time.Time, l limiter.Lease) limiter.Lease {
	if l.Granted() {
		after := time.Now()
		r.mu.Lock()
		r.grants[key] = append(r.grants[key], span{before, after})
		r.mu.Unlock()
	}
	return l
}

func (r *recordingKeyed) TryAcquire(key string, n int) limiter.Lease {
	before := time.Now()
	return r.record(key, before, r.k.TryAcquire(key, n))
}

func (r *recordingKeyed) Acquire(ctx context.Context, key string, n int) (limiter.Lease, error) {
	before := time.Now()
	l, err := r.k.Acquire(ctx, key, n)
	return r.record(key, before, l), err
}

func (r *recordingKeyed) Quota(key string) limiter.Quota { return r.k.Quota(key) }

// TestLoad: 50 concurrent clients on loopback, as 200 distinct client
// addresses behind a trusted proxy hop (X-Forwarded-For), for 2 s (10 s with
// -httplimit.load), against the KeyedLog of LimitByIP. Every client's grants at the server keep the bound (at
// most 5 in any 1 s window, checked soundly: each grant's instant is known
// to within the time its TryAcquire took, and a violation is reported only
// if it holds whatever the instants within those spans), no response is a
// 5xx, and the time the middleware adds to a request is reported.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	dur := 2 * time.Second
	if *loadFlag {
		dur = 10 * time.Second
	}
	const (
		clients = 50
		addrs   = 200
		limit   = 5
		window  = time.Second
		maxReqs = 500_000 // a bound on the count, whatever the machine
	)
	keyed, err := httplimit.NewKeyedLog(httplimit.KeyedLogOptions{Limit: limit, Window: window}) // LimitByIP's
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingKeyed{k: keyed, grants: map[string][]span{}}
	key, err := httplimit.IPKey(httplimit.IPKeyOptions{Trusted: loopback, Header: "X-Forwarded-For"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Options{Keyed: rec, Key: key})
	if err != nil {
		t.Fatal(err)
	}

	// added records the middleware's time per request: from entering it to
	// the handler's start (served) or to its return (refused).
	var addedMu sync.Mutex
	var added []time.Duration
	type startKey struct{}
	inner := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*r.Context().Value(startKey{}).(*time.Time) = time.Now()
		_, _ = io.WriteString(w, "ok")
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var handlerStart time.Time
		t0 := time.Now()
		inner.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), startKey{}, &handlerStart)))
		d := time.Since(t0)
		if !handlerStart.IsZero() {
			d = handlerStart.Sub(t0)
		}
		addedMu.Lock()
		added = append(added, d)
		addedMu.Unlock()
	}))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	var counts loadCounts
	firstErr := counts.run(c, srv.URL, clients, addrs, maxReqs, time.Now().Add(dur))
	served, refused, other := &counts.served, &counts.refused, &counts.other
	if other.Load() != 0 {
		t.Errorf("%d responses neither 200 nor 429 (first error: %v)", other.Load(), firstErr)
	}
	if len(rec.grants) != addrs {
		t.Errorf("%d clients seen, want %d", len(rec.grants), addrs)
	}
	checkBound(t, rec.grants, limit, window)
	maxServed := int64(addrs) * limit * int64((dur+window-1)/window+1)
	if served.Load() == 0 || served.Load() > maxServed {
		t.Errorf("%d served, want between 1 and %d", served.Load(), maxServed)
	}
	slices.Sort(added)
	pct := func(p float64) time.Duration { return added[int(p*float64(len(added)-1))] }
	t.Logf("%v, %d clients as %d addresses: %d requests, %d served, %d refused (429), 0 5xx; middleware's added latency p50 %v, p99 %v, max %v",
		dur, clients, addrs, served.Load()+refused.Load(), served.Load(), refused.Load(), pct(0.5), pct(0.99), added[len(added)-1])
}

// loadCounts counts a load test's requests by outcome.
type loadCounts struct{ sent, served, refused, other atomic.Int64 }

// run sends requests from clients goroutines, as addrs client addresses in
// turn, until deadline or maxReqs requests, and returns the first error.
func (lc *loadCounts) run(c *http.Client, url string, clients, addrs int, maxReqs int64, deadline time.Time) error {
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			for i := w; time.Now().Before(deadline) && lc.sent.Add(1) <= maxReqs; i += clients {
				if err := lc.one(c, url, fmt.Sprintf("198.18.%d.%d", i%addrs/100, i%addrs%100+1)); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	wg.Wait()
	err, _ := firstErr.Load().(error)
	return err
}

func (lc *loadCounts) one(c *http.Client, url, client string) error {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-Forwarded-For", client)
	resp, err := c.Do(req)
	if err != nil {
		lc.other.Add(1)
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		lc.served.Add(1)
	case http.StatusTooManyRequests:
		lc.refused.Add(1)
	default:
		lc.other.Add(1)
	}
	return nil
}

// checkBound fails t if some client had more than limit grants within a
// window, as far as the grants' spans prove it: each grant's instant lies
// in its span, so limit+1 grants whose latest ends are less than
// window - eps apart (eps: the longest span) were certainly less than
// window apart.
func checkBound(t *testing.T, grants map[string][]span, limit int, window time.Duration) {
	t.Helper()
	var eps time.Duration
	for _, g := range grants {
		for _, s := range g {
			eps = max(eps, s.after.Sub(s.before))
		}
	}
	for k, g := range grants {
		slices.SortFunc(g, func(a, b span) int { return a.after.Compare(b.after) })
		for i := 0; i+limit < len(g); i++ {
			if d := g[i+limit].after.Sub(g[i].after); d < window-eps {
				t.Errorf("client %s: %d grants within %v (uncertainty %v), over %d per %v", k, limit+1, d, eps, limit, window)
				break
			}
		}
	}
}
