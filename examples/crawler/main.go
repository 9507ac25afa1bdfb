// Command crawler crawls three local web servers whose rate limits nobody
// tells it, and finds them.
//
// Run it with (about 8 s):
//
//	go run ./examples/crawler
//	go run ./examples/crawler -duration 20s -workers 4
//	go run ./examples/crawler -per-host 5    # told the limit: a strict one per host
//
// (-h lists the flags; it takes no arguments.)
//
// The site is served by 3 httptest servers on loopback (each one a "host": a
// distinct 127.0.0.1:port) whose pages link to more pages on the same host
// and on the next. Each host serves at most so many requests a second, 4,
// 10 and 25, and answers 429 Too Many Requests to the rest; the third
// halves its limit, to 12.5 a second, halfway through the run. Each limit
// is a token bucket of its rate, with a burst of a fifth of a second's worth
// (at least 1), and no response says what it is.
//
// The crawler fetches each page as a task on a pool.Pool of 8 workers whose
// per-key limiter (pool.Options.PerKey) gives each host an
// adaptive.RateLimiter of its own (adaptive.NewKeyedRateLimiter): the crawl
// loop hands every page it discovers to pool.Pool.GoKey, which returns at
// once, and a host at its rate holds back only its own pages. A fetch that
// draws a 429 returns an error wrapping limiter.ErrThrottled, which the pool
// reports on the task's lease: that host's rate comes down at once, while
// the successes let it climb. The crawl loop fetches such a page again. When
// the time is up, the program prints, per host, its true limit, the rate the
// crawler found (the pages the host served per second over the 2 s before
// its limit changed, and before the end), the pages fetched, and the 429s
// the crawler drew. It exits with status 1 if a fetch failed otherwise or
// more requests were in flight than workers.
//
// With -per-host N the crawler is told the limit instead, and keeps it
// strictly: each host gets a sliding log of N requests in any -window (1 s),
// the servers answer every request, and the crawl ends when every page of
// the -hosts hosts (-pages each) is fetched. The servers record every
// request's arrival; the program prints, per host, the pages fetched and the
// most requests that arrived in any window, and exits with status 1 if that
// ever exceeds N or a page was missed. The limiter grants a request a moment
// before it reaches the server, and that moment varies a little from request
// to request, so the client's windows are 50 ms longer than the servers'
// (two grants more than 1.05 s apart cannot arrive less than 1 s apart unless
// their delivery times differ by more than 50 ms).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
)

// config sets the site's shape and the crawler's settings.
type config struct {
	Workers int           // the pool's workers: requests in flight at once, in all
	Latency time.Duration // how long a server takes to serve a page

	// The adaptive mode (PerHost 0).
	Limits   []int         // each host's limit, requests per second, told to nobody
	Halve    int           // the host whose limit halves at Duration/2; -1 for none
	Duration time.Duration // how long the crawl runs
	Measure  time.Duration // found rates are counted over the Measure before the change and before the end

	// The strict mode (PerHost > 0).
	PerHost      int           // most requests per host in any Window
	Hosts        int           // servers
	PagesPerHost int           // pages on each server
	Window       time.Duration // the window measured at the servers
	Margin       time.Duration // added to Window at the client; see the package comment
}

var defaultConfig = config{
	Workers:      8,
	Latency:      20 * time.Millisecond,
	Limits:       []int{4, 10, 25},
	Halve:        2,
	Duration:     8 * time.Second,
	Measure:      2 * time.Second,
	Hosts:        3,
	PagesPerHost: 30,
	Window:       time.Second,
	Margin:       50 * time.Millisecond,
}

// strict reports whether c is the strict mode.
func (c config) strict() bool { return c.PerHost > 0 }

// hosts returns the number of servers.
func (c config) hosts() int {
	if c.strict() {
		return c.Hosts
	}
	return len(c.Limits)
}

// pages returns the pages on each server: in the adaptive mode, more than
// a crawl of Duration can fetch.
func (c config) pages() int {
	if c.strict() {
		return c.PagesPerHost
	}
	return 1 << 30
}

// hostResult is what one server saw.
type hostResult struct {
	Host      string
	Limit     [2]float64 // the adaptive mode: the limit before the change and after it (the same for the others)
	Found     [2]float64 // the pages served per second over the Measure before the change and before the end
	Pages     int        // distinct pages served
	Requests  int        // requests that arrived
	Throttled int        // of them, those answered 429

	// The strict mode.
	Arrivals    []time.Duration // every request's arrival, from the crawl's start
	MaxInWindow int             // most arrivals in any [t, t+Window)
}

type result struct {
	Hosts       []hostResult
	MaxInFlight int // most requests being served at once, over all hosts
	Fetched     int // pages the crawler fetched
	Throttled   int // 429s the crawler drew
	Elapsed     time.Duration
}

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `Usage: crawler [flags]

Crawls 3 local httptest servers that answer 429 Too Many Requests above
limits the crawler is not told (4, 10 and 25 requests a second; the third
halves its limit halfway through), for -duration, with a pool of -workers
and an adaptive rate limiter per host, and prints per host the rate found
against the true limit and the 429s drawn.

With -per-host N, crawls -hosts servers of -pages pages each with at most N
requests per host in any -window, told, and checks the servers' records.
It takes no arguments.

Flags:
`

// cli parses args, runs the crawl, and returns the exit status: 0 when the
// crawl went as it should, 1 when not, 2 for bad arguments (0 for -h, which
// prints the usage).
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig
	fs := flag.NewFlagSet("crawler", flag.ContinueOnError)
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "the pool's workers: requests in flight at once")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the crawl runs (not with -per-host)")
	fs.IntVar(&cfg.PerHost, "per-host", cfg.PerHost, "tell the crawler the limit: at most this many requests per host in any -window, checked at the servers (0: find the limits)")
	fs.IntVar(&cfg.Hosts, "hosts", cfg.Hosts, "number of hosts (servers), with -per-host")
	fs.IntVar(&cfg.PagesPerHost, "pages", cfg.PagesPerHost, "pages on each host, with -per-host")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "the window measured at the servers, with -per-host")
	if code, ok := parseFlags(fs, args, usageText, stdout, stderr); !ok {
		return code
	}
	if err := cfg.check(fs); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	if _, err := run(ctx, stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	return 0
}

// check says which setting is out of range, or set for the other mode, if
// one is. fs, when not nil, says which flags were set.
func (c config) check(fs *flag.FlagSet) error {
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"workers", c.Workers >= 1}, {"hosts", c.Hosts >= 1}, {"pages", c.PagesPerHost >= 1},
		{"window", c.Window > 0}, {"duration", c.Duration > 0},
	} {
		if !f.ok {
			return fmt.Errorf("-%s must be positive", f.name)
		}
	}
	if c.PerHost < 0 {
		return fmt.Errorf("-per-host must not be negative (0 finds the limits), got %d", c.PerHost)
	}
	if fs == nil {
		return nil
	}
	var wrong []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "hosts", "pages", "window":
			if !c.strict() {
				wrong = append(wrong, "-"+f.Name+" is for the strict mode only: add -per-host")
			}
		case "duration":
			if c.strict() {
				wrong = append(wrong, "-duration is for the adaptive mode only: the strict mode crawls every page")
			}
		}
	})
	if len(wrong) > 0 {
		return errors.New(wrong[0])
	}
	return nil
}

// site is the servers' pages and limits, and what the servers recorded.
type site struct {
	cfg    config
	urls   []string               // each host's base URL
	limits []*limiter.TokenBucket // each host's limit; nil: none
	srvs   []*httptest.Server     // when served on loopback
	start  time.Time

	mu       sync.Mutex
	arrivals [][]arrival   // per host
	served   []map[int]int // per host: page -> requests served
	inFlight int
	peak     int
}

// arrival is one request, as its server saw it.
type arrival struct {
	at        time.Duration // from the crawl's start
	throttled bool          // answered 429
}

// limitOf returns a host's limit: a token bucket of rate with a burst of a
// fifth of a second's worth, at least 1.
func limitOf(rate limiter.Rate) (*limiter.TokenBucket, error) {
	return limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: rate, Burst: burstOf(rate)})
}

func burstOf(rate limiter.Rate) int {
	return max(1, int(rate.Events()*int64(time.Second/5)/int64(rate.Period())))
}

// newSite makes the site of cfg, with no server yet: serve starts them on
// loopback, and a site is also an http.RoundTripper that serves requests
// in process (for tests in a synctest bubble).
func newSite(cfg config) (*site, error) {
	n := cfg.hosts()
	s := &site{cfg: cfg, arrivals: make([][]arrival, n), served: make([]map[int]int, n), limits: make([]*limiter.TokenBucket, n)}
	for h := range n {
		s.served[h] = map[int]int{}
		s.urls = append(s.urls, fmt.Sprintf("http://host%d.test", h+1))
		if cfg.strict() {
			continue
		}
		tb, err := limitOf(limiter.Per(cfg.Limits[h], time.Second))
		if err != nil {
			s.close()
			return nil, err
		}
		s.limits[h] = tb
	}
	return s, nil
}

// serve starts the servers on loopback.
func (s *site) serve() {
	for h := range s.urls {
		srv := httptest.NewServer(s.handler(h))
		s.srvs = append(s.srvs, srv)
		s.urls[h] = srv.URL
	}
}

func (s *site) close() {
	for _, srv := range s.srvs {
		srv.Close()
	}
	for _, tb := range s.limits {
		if tb != nil {
			tb.Close()
		}
	}
}

// RoundTrip serves r in process, with the handler of r's host.
func (s *site) RoundTrip(r *http.Request) (*http.Response, error) {
	for h, u := range s.urls {
		if strings.TrimPrefix(u, "http://") == r.URL.Host {
			rec := httptest.NewRecorder()
			s.handler(h).ServeHTTP(rec, r)
			return rec.Result(), nil
		}
	}
	return nil, fmt.Errorf("no host %s", r.URL.Host)
}

func (s *site) pageURL(host, page int) string {
	return fmt.Sprintf("%s/p/%d", s.urls[host], page)
}

// links returns the links of a page: pages on the same host and one on the
// next host. Following them from page 0 of host 0 reaches every page.
func (s *site) links(host, page int) []string {
	n := s.cfg.pages()
	return []string{
		s.pageURL(host, (page+1)%n),
		s.pageURL(host, (page*3+1)%n),
		s.pageURL(host, (page*7+2)%n),
		s.pageURL((host+1)%len(s.urls), (page*5)%n),
	}
}

var pagePath = regexp.MustCompile(`^/p/(\d+)$`)

func (s *site) handler(host int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		throttled := s.limits[host] != nil && !s.limits[host].TryAcquire(1).Granted()
		s.mu.Lock()
		s.arrivals[host] = append(s.arrivals[host], arrival{time.Since(s.start), throttled})
		s.inFlight++
		s.peak = max(s.peak, s.inFlight)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
		}()
		if throttled {
			http.Error(w, "429 Too Many Requests", http.StatusTooManyRequests)
			return
		}
		time.Sleep(s.cfg.Latency)
		m := pagePath.FindStringSubmatch(r.URL.Path)
		var page int
		if m == nil || func() bool { _, err := fmt.Sscan(m[1], &page); return err != nil }() || page >= s.cfg.pages() {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.served[host][page]++
		s.mu.Unlock()
		fmt.Fprintf(w, "<html><body><h1>host %d, page %d</h1>\n", host+1, page)
		for _, l := range s.links(host, page) {
			fmt.Fprintf(w, "<a href=\"%s\">%s</a>\n", l, l)
		}
		fmt.Fprintln(w, "</body></html>")
	}
}

// run crawls a site served on loopback.
func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	if err := cfg.check(nil); err != nil {
		return result{}, err
	}
	s, err := newSite(cfg)
	if err != nil {
		return result{}, err
	}
	defer s.close()
	s.serve()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Workers}}
	defer client.CloseIdleConnections()
	return s.crawl(ctx, w, client)
}

// crawl crawls s with client, prints what the servers saw, and returns it.
func (s *site) crawl(ctx context.Context, w io.Writer, client *http.Client) (result, error) {
	cfg := s.cfg
	var seeds []string
	for h := range s.urls {
		seeds = append(seeds, s.pageURL(h, 0))
	}
	var (
		perKey   func(string) limiter.Limiter
		crawlCtx = ctx
	)
	if cfg.strict() {
		fmt.Fprintf(w, "Crawling %d hosts (%d pages each) with %d workers, at most %d requests per host\n", cfg.Hosts, cfg.PagesPerHost, cfg.Workers, cfg.PerHost)
		fmt.Fprintf(w, "in any %v window (the client's windows are %v).\n\n", cfg.Window, cfg.Window+cfg.Margin)
		hosts, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
			return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: cfg.PerHost, Window: cfg.Window + cfg.Margin})
		}})
		if err != nil {
			return result{}, err
		}
		defer hosts.Close()
		perKey = hosts.For
	} else {
		s.intro(w)
		// Each host gets a rate limiter of its own, which starts at
		// 1 request a second and finds the host's limit from the 429s.
		hosts, err := adaptive.NewKeyedRateLimiter[string](adaptive.KeyedRateOptions{RateOptions: adaptive.RateOptions{
			Floor:   limiter.Per(1, time.Second),
			Ceiling: limiter.Per(1000, time.Second),
		}})
		if err != nil {
			return result{}, err
		}
		defer hosts.Close()
		perKey = hosts.For
		var cancel context.CancelFunc
		crawlCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
		if h := cfg.Halve; h >= 0 && h < len(s.limits) {
			halve := time.AfterFunc(cfg.Duration/2, func() {
				half := limiter.Per(cfg.Limits[h], 2*time.Second)
				_ = s.limits[h].SetRate(half)
				_ = s.limits[h].SetBurst(burstOf(half))
			})
			defer halve.Stop()
		}
	}

	s.start = time.Now()
	st, err := crawlPages(crawlCtx, client, seeds, cfg.Workers, perKey)
	res := result{Elapsed: time.Since(s.start), Fetched: st.fetched, Throttled: st.throttled}
	for _, srv := range s.srvs {
		srv.Close() // waits for the requests the end of the crawl cut short
	}
	if err == nil {
		err = ctx.Err() // the caller's context ended: the crawl was cut short
	}
	if err != nil {
		return res, err
	}
	if cfg.strict() {
		return s.reportStrict(w, res)
	}
	return s.report(w, res)
}

// intro says what the adaptive crawl does.
func (s *site) intro(w io.Writer) {
	cfg := s.cfg
	fmt.Fprintf(w, "Crawling %d local web servers for %v with a pool of %d workers. Each answers\n", len(s.urls), cfg.Duration, cfg.Workers)
	fmt.Fprintf(w, "429 Too Many Requests above a limit of its own, which nobody tells the crawler.\n")
	fmt.Fprintf(w, "Each host gets an adaptive.RateLimiter (pool.Options.PerKey from\n")
	fmt.Fprintf(w, "adaptive.NewKeyedRateLimiter): down at once on a 429, up while requests\n")
	fmt.Fprintf(w, "succeed. A page that draws a 429 is fetched again later.\n\n")
}

// limitAt returns host h's limit in requests per second, before (phase 0)
// or after (phase 1) the change.
func (s *site) limitAt(h, phase int) float64 {
	l := float64(s.cfg.Limits[h])
	if phase == 1 && h == s.cfg.Halve {
		return l / 2
	}
	return l
}

// report prints, per host, the true limit, the rate found, the pages
// fetched and the 429s, and returns res with the hosts' results.
func (s *site) report(w io.Writer, res result) (result, error) {
	cfg := s.cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	res.MaxInFlight = s.peak
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "host\tlimit (not told)\tfound\tpages\t429s")
	ends := [2]time.Duration{cfg.Duration / 2, cfg.Duration}
	for h := range s.urls {
		hr := hostResult{Host: hostOf(s.urls[h]), Pages: len(s.served[h]), Requests: len(s.arrivals[h])}
		for phase, end := range ends {
			hr.Limit[phase] = s.limitAt(h, phase)
			ok := 0
			for _, a := range s.arrivals[h] {
				if !a.throttled && a.at >= end-cfg.Measure && a.at < end {
					ok++
				}
			}
			hr.Found[phase] = float64(ok) / cfg.Measure.Seconds()
		}
		for _, a := range s.arrivals[h] {
			if a.throttled {
				hr.Throttled++
			}
		}
		res.Hosts = append(res.Hosts, hr)
		limit, found := perSecond(hr.Limit[1]), perSecond(hr.Found[1])
		if h == cfg.Halve {
			limit = fmt.Sprintf("%s → %s at %v", perSecond(hr.Limit[0]), limit, ends[0])
			found = fmt.Sprintf("%s → %s", perSecond(hr.Found[0]), found)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d of %d (%.1f%%)\n", hr.Host, limit, found, hr.Pages, hr.Throttled, hr.Requests,
			100*float64(hr.Throttled)/float64(max(hr.Requests, 1)))
	}
	if err := tw.Flush(); err != nil {
		return res, err
	}
	fmt.Fprintf(w, "\nfound: the pages the host served per second over the %v before its limit\n", cfg.Measure)
	fmt.Fprintf(w, "changed, and over the %v before the end.\n", cfg.Measure)
	fmt.Fprintf(w, "Fetched %d pages in %.1fs; %d requests drew a 429, and their pages were fetched again.\n", res.Fetched, res.Elapsed.Seconds(), res.Throttled)
	fmt.Fprintf(w, "Most requests in flight at once: %d (workers %d).\n", res.MaxInFlight, cfg.Workers)
	if res.MaxInFlight > cfg.Workers {
		return res, fmt.Errorf("%d requests in flight, over %d workers", res.MaxInFlight, cfg.Workers)
	}
	return res, nil
}

// perSecond formats a rate: "4/s", "12.5/s".
func perSecond(r float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", r), "0"), ".") + "/s"
}

func hostOf(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		return u
	}
	return pu.Host
}

// reportStrict prints, per host, the pages fetched and the most requests
// that arrived in any window, and returns an error if that is ever over
// the limit or a page was missed.
func (s *site) reportStrict(w io.Writer, res result) (result, error) {
	cfg := s.cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	res.MaxInFlight = s.peak
	fmt.Fprintf(w, "%-16s %6s %9s   %s\n", "host", "pages", "requests", fmt.Sprintf("most requests in any %v window", cfg.Window))
	var problems []error
	for h := range s.urls {
		hr := hostResult{Host: hostOf(s.urls[h]), Pages: len(s.served[h]), Requests: len(s.arrivals[h])}
		for _, a := range s.arrivals[h] {
			hr.Arrivals = append(hr.Arrivals, a.at)
		}
		hr.MaxInWindow = peak(hr.Arrivals, cfg.Window)
		res.Hosts = append(res.Hosts, hr)
		fmt.Fprintf(w, "%-16s %6d %9d   %d (limit %d)\n", hr.Host, hr.Pages, hr.Requests, hr.MaxInWindow, cfg.PerHost)
		if hr.MaxInWindow > cfg.PerHost {
			problems = append(problems, fmt.Errorf("host %s saw %d requests in one %v window, over the limit of %d", hr.Host, hr.MaxInWindow, cfg.Window, cfg.PerHost))
		}
		if hr.Pages != cfg.PagesPerHost {
			problems = append(problems, fmt.Errorf("host %s: %d of %d pages fetched", hr.Host, hr.Pages, cfg.PagesPerHost))
		}
	}
	fmt.Fprintf(w, "\nMost requests in flight at once: %d (workers %d).\n", res.MaxInFlight, cfg.Workers)
	fmt.Fprintf(w, "Fetched %d pages in %.2fs.\n", res.Fetched, res.Elapsed.Seconds())
	if res.MaxInFlight > cfg.Workers {
		problems = append(problems, fmt.Errorf("%d requests in flight, over %d workers", res.MaxInFlight, cfg.Workers))
	}
	return res, errors.Join(problems...)
}

// fetched is what one fetch task reports to the crawl loop.
type fetched struct {
	url   string
	links []string
	err   error
}

// crawlStats is what crawlPages did.
type crawlStats struct {
	fetched   int // pages fetched
	throttled int // fetches that drew a 429, each fetched again
}

// crawlPages fetches the seeds and every page reachable from them, each
// page once, on a pool of workers whose per-host limiters perKey gives,
// until every page is fetched or ctx ends. Every page discovered is handed
// to the pool with GoKey, which returns at once: a host at its limit holds
// back only its own pages, in the pool's queue for that host. A fetch that
// draws a 429 returns an error that wraps limiter.ErrThrottled, which the
// pool reports to the host's limiter, and the page is fetched again. The
// error is that of the fetches that failed otherwise, if any.
func crawlPages(ctx context.Context, client *http.Client, seeds []string, workers int, perKey func(string) limiter.Limiter) (crawlStats, error) {
	var st crawlStats
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, err := pool.New(pool.Options{Workers: workers, PerKey: perKey, Context: ctx})
	if err != nil {
		return st, err
	}
	results := make(chan fetched)
	submit := func(u string) error {
		pu, err := url.Parse(u)
		if err != nil {
			return err
		}
		return p.GoKey(ctx, pu.Host, func(ctx context.Context) error {
			links, err := fetchLinks(ctx, client, u)
			select {
			case results <- fetched{u, links, err}:
			case <-ctx.Done(): // the crawl is over
			}
			return err // a 429 reaches the host's limiter
		})
	}

	seen := map[string]bool{}
	outstanding := 0 // pages submitted and not yet fetched or failed
	var errs []error
	fetch := func(u string) {
		if err := submit(u); err != nil {
			errs = append(errs, err)
			outstanding--
		}
	}
	for _, u := range seeds {
		seen[u] = true
		outstanding++
		fetch(u)
	}
	for outstanding > 0 {
		var f fetched
		select {
		case f = <-results:
		case <-ctx.Done(): // the time is up, or the caller gave up
		}
		if ctx.Err() != nil {
			break
		}
		switch {
		case errors.Is(f.err, limiter.ErrThrottled):
			st.throttled++
			fetch(f.url) // again
			continue
		case f.err != nil:
			errs = append(errs, f.err)
		default:
			st.fetched++
		}
		outstanding--
		for _, l := range f.links {
			if !seen[l] {
				seen[l] = true
				outstanding++
				fetch(l)
			}
		}
	}
	cancel()
	// Wait's error repeats what the loop heard (the 429s, the failures),
	// and adds the fetches the end of the crawl cut short.
	_ = p.Wait()
	return st, errors.Join(errs...)
}

var hrefRE = regexp.MustCompile(`href="([^"]+)"`)

// fetchLinks gets u and returns the links on the page; a 429 is an error
// that wraps limiter.ErrThrottled.
func fetchLinks(ctx context.Context, client *http.Client, u string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusTooManyRequests:
		return nil, fmt.Errorf("%s: %s: %w", u, resp.Status, limiter.ErrThrottled)
	default:
		return nil, fmt.Errorf("%s: %s", u, resp.Status)
	}
	var links []string
	for _, m := range hrefRE.FindAllSubmatch(body, -1) {
		links = append(links, string(m[1]))
	}
	return links, nil
}

// peak returns the most instants that fall in any one window [t, t+width):
// the largest group less than width apart from first to last.
func peak(instants []time.Duration, width time.Duration) int {
	ts := slices.Sorted(slices.Values(instants))
	most, j := 0, 0
	for i := range ts {
		for j < len(ts) && ts[j] < ts[i]+width { // ts[i:j] lie in [ts[i], ts[i]+width)
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// parseFlags parses args with fs, for a program that takes only flags. With
// ok false the program stops with exit status code: 0 after -h (the usage
// goes to stdout), 2 after an unknown flag, a bad value or an argument.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr) // the flag package says there what is wrong
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0, false
	case err != nil:
		return usageError(stderr, fs.Name(), nil), false
	case fs.NArg() > 0:
		return usageError(stderr, fs.Name(), fmt.Errorf("unexpected argument %q: it takes only flags", fs.Arg(0))), false
	}
	return 0, true
}

// usageError prints err (if not nil) and where to find the usage, and
// returns exit status 2.
func usageError(stderr io.Writer, name string, err error) int {
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	fmt.Fprintf(stderr, "Run '%s -h' for usage.\n", name)
	return 2
}
