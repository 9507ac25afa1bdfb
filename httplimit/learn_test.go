package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

// modelHost is a server whose capacity nobody states: a token bucket with
// a burst of 100 ms of its rate, that
// can be told to run at another rate, answering 429 with no field at all
// above it, after a latency. It counts what it served and refused in
// slots of 100 ms since it was made.
type modelHost struct {
	bucket  *limiter.TokenBucket
	latency time.Duration
	start   time.Time
	mu      sync.Mutex
	served  []int
	refused []int
	trace   func(ok bool)
}

func newModelHost(t *testing.T, perSecond int, latency time.Duration) *modelHost {
	b, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(perSecond, time.Second), Burst: max(1, perSecond/10)})
	if err != nil {
		t.Fatal(err)
	}
	return &modelHost{bucket: b, latency: latency, start: time.Now()}
}

func (m *modelHost) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	ok := m.bucket.TryAcquire(1).Granted()
	if m.trace != nil {
		m.trace(ok)
	}
	slot := int(time.Since(m.start) / (100 * time.Millisecond))
	m.mu.Lock()
	for len(m.served) <= slot {
		m.served, m.refused = append(m.served, 0), append(m.refused, 0)
	}
	if ok {
		m.served[slot]++
	} else {
		m.refused[slot]++
	}
	m.mu.Unlock()
	time.Sleep(m.latency)
	if !ok {
		w.WriteHeader(http.StatusTooManyRequests)
	}
}

// set changes m's capacity.
func (m *modelHost) set(perSecond int) {
	_ = m.bucket.SetRate(limiter.Per(perSecond, time.Second))
	_ = m.bucket.SetBurst(max(1, perSecond/10))
}

// counts returns what m served and refused over [from, to).
func (m *modelHost) counts(from, to time.Duration) (served, refused int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := int(from / (100 * time.Millisecond)); i < len(m.served) && i < int(to/(100*time.Millisecond)); i++ {
		served += m.served[i]
		refused += m.refused[i]
	}
	return served, refused
}

// crawl sends GETs to url from workers goroutines through c until ctx ends.
func crawl(ctx context.Context, c *http.Client, url string, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
				resp, err := c.Do(req)
				if err != nil {
					// A wait past the deadline fails at once: wait for it
					// rather than spin.
					<-ctx.Done()
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

func perSecond(r limiter.Rate) float64 {
	return float64(r.Events()) / r.Period().Seconds()
}

// A zero Transport against a host that answers 429 above an unstated 20
// requests a second (20 ms per response), with
// 8 workers sending as fast as it lets them: it sends unlimited until the
// first 429, then finds the capacity and follows it. Over the last 20 s
// of a 30 s run it gets at least 90% of the capacity with under 2% of its
// requests throttled (the whole-run bound the adaptive rate limiter
// keeps in its own step scenario: each probe above the capacity costs a
// 429 or two); without the learned rate (Learn.Off) nearly every
// request is refused.
func TestTransportLearnsUnstatedLimit(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("Learn.Off=%v", off), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				host := newModelHost(t, 20, 20*time.Millisecond)
				tr := &httplimit.Transport{Base: memTransport{host}, Learn: httplimit.LearnOptions{Off: off}}
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				crawl(ctx, &http.Client{Transport: tr}, "http://model/", 8)
				first, firstRefused := host.counts(0, 10*time.Second)
				served, refused := host.counts(10*time.Second, 30*time.Second)
				share := float64(served) / (20 * 20)
				throttled := float64(refused) / float64(served+refused)
				lim, _ := tr.Limits("model")
				t.Logf("Learn.Off=%v: first 10 s %d served, %d refused; last 20 s %d served (%.1f%% of capacity), %d refused (%.2f%% of requests); learned %.1f/s",
					off, first, firstRefused, served, 100*share, refused, 100*throttled, perSecond(lim.Learned))
				if off {
					if throttled < 0.9 || !lim.Learned.IsZero() {
						t.Errorf("Learn.Off: %.2f%% throttled, learned %v; want nearly all, none", 100*throttled, lim.Learned)
					}
					return
				}
				if share < 0.9 || throttled >= 0.02 {
					t.Errorf("got %.1f%% of the capacity with %.2f%% of requests throttled; want at least 90%% and under 2%%", 100*share, 100*throttled)
				}
				if r := perSecond(lim.Learned); lim.Stated || r < 16 || r > 24 {
					t.Errorf("Limits: %+v (%.1f/s), want a learned rate near 20/s", lim, r)
				}
			})
		})
	}
}

// A host whose capacity halves, from 40 to 20 requests a second, 15 s into
// the run is followed down within a second: the rate learned is under 20/s
// 1 s after the step, the host is sent at most its capacity (and burst)
// over the second that follows, and over the last 10 s the Transport gets
// at least 90% of the capacity with under 2% throttled.
func TestTransportFollowsCapacityDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		host := newModelHost(t, 40, 20*time.Millisecond)
		tr := &httplimit.Transport{Base: memTransport{host}}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		const step = 15 * time.Second
		var after time.Duration
		var learned limiter.Rate
		var watch sync.WaitGroup
		defer watch.Wait()
		watch.Go(func() {
			time.Sleep(step)
			host.set(20)
			for learned = limiter.Per(1, time.Nanosecond); perSecond(learned) > 20 && after < 5*time.Second; after += 10 * time.Millisecond {
				time.Sleep(10 * time.Millisecond)
				lim, _ := tr.Limits("model")
				learned = lim.Learned
			}
		})
		crawl(ctx, &http.Client{Transport: tr}, "http://model/", 8)
		watch.Wait()
		before, _ := host.counts(step-5*time.Second, step)
		sentServed, sentRefused := host.counts(step+time.Second, step+2*time.Second)
		served, refused := host.counts(20*time.Second, 30*time.Second)
		share := float64(served) / (20 * 10)
		throttled := float64(refused) / float64(served+refused)
		t.Logf("before the step %.1f/s served; learned rate under 20/s %v after the step (%.1f/s); second after: %d sent; last 10 s: %.1f%% of capacity, %.2f%% throttled",
			float64(before)/5, after, perSecond(learned), sentServed+sentRefused, 100*share, 100*throttled)
		if float64(before)/5 < 36 {
			t.Errorf("before the step: %.1f/s served, want at least 90%% of 40/s", float64(before)/5)
		}
		if after > time.Second || sentServed+sentRefused > 20+5 {
			t.Errorf("followed down in %v, then sent %d in a second; want within 1 s, at most 25", after, sentServed+sentRefused)
		}
		if share < 0.9 || throttled >= 0.02 {
			t.Errorf("last 10 s: %.1f%% of the capacity, %.2f%% throttled; want at least 90%% and under 2%%", 100*share, 100*throttled)
		}
	})
}

// A host that states its limit is paced by the statement, and the
// statement wins over pushback: against rategate's middleware on a token
// bucket of 20/s (burst 5), the Transport, whose 8 workers send at once
// before any response has said anything, is refused only in that first
// round (with Retry-After 1), and then sends 20 requests a second; when
// the handler behind the middleware answers 429 above a lower capacity of
// its own (15/s), with the middleware's fields, the Transport still keeps
// to the statement and learns no rate.
func TestTransportPacedByStatedLimit(t *testing.T) {
	for _, inner := range []int{1000, 15} {
		t.Run(fmt.Sprintf("inner %d per second", inner), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bucket, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(20, time.Second), Burst: 5})
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				var mu sync.Mutex
				var refusedAt []time.Duration
				m, err := httplimit.New(httplimit.Options{Limiter: bucket, OnDecision: func(_ *http.Request, d httplimit.Decision) {
					if d.Outcome != httplimit.Served {
						mu.Lock()
						refusedAt = append(refusedAt, time.Since(start))
						mu.Unlock()
					}
				}})
				if err != nil {
					t.Fatal(err)
				}
				host := newModelHost(t, inner, 20*time.Millisecond)
				tr := &httplimit.Transport{Base: memTransport{m.Wrap(host)}}
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				crawl(ctx, &http.Client{Transport: tr}, "http://model/", 8)
				served, refused := host.counts(2*time.Second, 10*time.Second)
				lim, _ := tr.Limits("model")
				t.Logf("%d passed the middleware over [2s, 10s) (stated: 20/s, burst 5), %d of them refused by the handler; the middleware refused at %v; %+v", served+refused, refused, refusedAt, lim)
				if served+refused != 20*8 {
					t.Errorf("%d passed the middleware over 8 s, want 160", served+refused)
				}
				if len(refusedAt) > 8-5 || (len(refusedAt) > 0 && refusedAt[len(refusedAt)-1] > 0) {
					t.Errorf("the middleware refused at %v; want only the first round's 3 at most", refusedAt)
				}
				if !lim.Stated || lim.Pace != 50*time.Millisecond || !lim.Learned.IsZero() {
					t.Errorf("Limits: %+v, want stated at 50 ms apart, nothing learned", lim)
				}
			})
		})
	}
}

// The same over loopback on the real clock, kept short: a zero Transport
// (Base: the test server's client) with 4 workers against a real server
// answering 429 above an unstated 20/s learns a rate near 20/s within the
// first second, and over the 2 s that follow gets at least 70% of the
// capacity with under 15% of its requests refused. (The bounds leave room
// for a loaded machine and for the first cycles of the learned rate:
// 82-95% with 5-8% refused in three runs at a load average of 4; in
// virtual time, over a longer run, over 90% with under 1% refused.)
func TestTransportLearnsLoopback(t *testing.T) {
	host := newModelHost(t, 20, 5*time.Millisecond)
	srv := httptest.NewServer(host)
	defer srv.Close()
	tr := &httplimit.Transport{Base: srv.Client().Transport}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	crawl(ctx, &http.Client{Transport: tr}, srv.URL, 4)
	served, refused := host.counts(time.Second, 3*time.Second)
	lim, _ := tr.Limits(srv.Listener.Addr().String())
	r := perSecond(lim.Learned)
	t.Logf("over [1s, 3s): %d served (%.0f%% of the capacity), %d refused (%.1f%%); learned %.1f/s", served, 100*float64(served)/40, refused, 100*float64(refused)/float64(served+refused), r)
	if served < 28 || refused*100 >= 15*(served+refused) || r < 10 || r > 30 {
		t.Errorf("%d served, %d refused, learned %.1f/s; want at least 28, under 15%% refused, near 20/s", served, refused, r)
	}
}
