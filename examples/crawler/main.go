// Command crawler crawls a small local web site, spread over 3 hosts, with a
// bounded parallel pool: 8 workers in all, and at most 5 requests per host in
// any 1 s window, however many links point at a host.
//
// Run it with:
//
//	go run ./examples/crawler
//	go run ./examples/crawler -hosts 5 -pages 20 -workers 4 -per-host 3
//
// (-h lists the flags; it takes no arguments.)
//
// The site is served by 3 httptest servers (each one a "host": a distinct
// 127.0.0.1:port) that generate pages linking to other pages on the same host
// and on the others. The crawler starts from one page and discovers the rest by
// following links. Each fetch is a task on a pool.Pool with 8 workers whose
// per-key limiter (pool.Options.PerKey) is a limiter.Keyed of sliding logs,
// one per host: the crawl loop hands every page it discovers to
// pool.Pool.GoKey, which returns at once, and a host at its limit holds back
// only its own pages. The servers record every request's arrival; at the end the
// program prints, per host, the pages fetched and the most requests that
// arrived in any 1 s window, which never exceeds the limit. It exits with
// status 1 if a bound was broken or a page was missed.
//
// The limiter grants a request a moment before the request reaches the server,
// and that moment varies a little from request to request. So that the bound
// holds exactly where it is measured (at the server), the client's windows are
// Margin (50 ms) longer than the server's 1 s: two grants more than 1 s +
// 50 ms apart cannot arrive less than 1 s apart unless their delivery times
// differ by more than 50 ms.
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
	"sync"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
)

// config sets the site's shape and the crawler's limits.
type config struct {
	Hosts        int           // servers
	PagesPerHost int           // pages on each server
	Workers      int           // the pool's workers: requests in flight at once, in all
	PerHost      int           // most requests per host in any Window
	Window       time.Duration // the window measured at the servers
	Margin       time.Duration // added to Window at the client; see the package comment
	Latency      time.Duration // how long a server takes to answer
}

var defaultConfig = config{
	Hosts:        3,
	PagesPerHost: 30,
	Workers:      8,
	PerHost:      5,
	Window:       time.Second,
	Margin:       50 * time.Millisecond,
	Latency:      20 * time.Millisecond,
}

// hostResult is what one server saw.
type hostResult struct {
	Host        string
	Pages       int             // distinct pages served
	Requests    int             // requests served
	Arrivals    []time.Duration // every request's arrival, from the crawl's start
	MaxInWindow int             // most arrivals in any [t, t+Window)
}

type result struct {
	Hosts       []hostResult
	MaxInFlight int // most requests being served at once, over all hosts
	Fetched     int // pages the crawler fetched
	Elapsed     time.Duration
}

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// cli parses args, runs the crawl, and returns the exit status: 0 when every
// page was fetched within the limits, 1 when not, 2 for bad arguments (0
// for -h, which prints the usage).
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig
	fs := flag.NewFlagSet("crawler", flag.ContinueOnError)
	fs.IntVar(&cfg.Hosts, "hosts", cfg.Hosts, "number of hosts (servers)")
	fs.IntVar(&cfg.PagesPerHost, "pages", cfg.PagesPerHost, "pages on each host")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "the pool's workers: requests in flight at once")
	fs.IntVar(&cfg.PerHost, "per-host", cfg.PerHost, "most requests per host in any window")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "the window measured at the servers")
	usage := "Usage: crawler [flags]\n\n" +
		"Crawls a local site of -hosts httptest servers with a pool of -workers,\n" +
		"at most -per-host requests per host in any -window, and checks the\n" +
		"servers' own records. It takes no arguments.\n\nFlags:\n"
	if code, ok := parseFlags(fs, args, usage, stdout, stderr); !ok {
		return code
	}
	if err := cfg.check(); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	if _, err := run(ctx, stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	return 0
}

// check says which setting is out of range, if one is.
func (c config) check() error {
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"hosts", c.Hosts >= 1}, {"pages", c.PagesPerHost >= 1}, {"workers", c.Workers >= 1},
		{"per-host", c.PerHost >= 1}, {"window", c.Window > 0},
	} {
		if !f.ok {
			return fmt.Errorf("-%s must be positive", f.name)
		}
	}
	return nil
}

// site is the servers and what they recorded.
type site struct {
	cfg     config
	servers []*httptest.Server
	start   time.Time

	mu       sync.Mutex
	arrivals [][]time.Duration // per host
	served   []map[int]int     // per host: page -> requests
	inFlight int
	peak     int
}

func (s *site) pageURL(host, page int) string {
	return fmt.Sprintf("%s/p/%d", s.servers[host].URL, page)
}

// links returns the links of a page: pages on the same host and one on the
// next host. Following them from page 0 of host 0 reaches every page.
func (s *site) links(host, page int) []string {
	n := s.cfg.PagesPerHost
	return []string{
		s.pageURL(host, (page+1)%n),
		s.pageURL(host, (page*3+1)%n),
		s.pageURL(host, (page*7+2)%n),
		s.pageURL((host+1)%s.cfg.Hosts, (page*5)%n),
	}
}

var pagePath = regexp.MustCompile(`^/p/(\d+)$`)

func (s *site) handler(host int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.arrivals[host] = append(s.arrivals[host], time.Since(s.start))
		s.inFlight++
		s.peak = max(s.peak, s.inFlight)
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.inFlight--
			s.mu.Unlock()
		}()
		time.Sleep(s.cfg.Latency)
		m := pagePath.FindStringSubmatch(r.URL.Path)
		var page int
		if m == nil || func() bool { _, err := fmt.Sscan(m[1], &page); return err != nil }() || page >= s.cfg.PagesPerHost {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		s.served[host][page]++
		s.mu.Unlock()
		fmt.Fprintf(w, "<html><body><h1>host %d, page %d</h1>\n", host, page)
		for _, l := range s.links(host, page) {
			fmt.Fprintf(w, "<a href=\"%s\">%s</a>\n", l, l)
		}
		fmt.Fprintln(w, "</body></html>")
	}
}

func newSite(cfg config) *site {
	s := &site{cfg: cfg, arrivals: make([][]time.Duration, cfg.Hosts), served: make([]map[int]int, cfg.Hosts)}
	for h := range cfg.Hosts {
		s.served[h] = map[int]int{}
		s.servers = append(s.servers, httptest.NewServer(s.handler(h)))
	}
	return s
}

func (s *site) close() {
	for _, srv := range s.servers {
		srv.Close()
	}
}

func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	var res result
	if err := cfg.check(); err != nil {
		return res, err
	}
	s := newSite(cfg)
	defer s.close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Workers}}
	defer client.CloseIdleConnections()

	fmt.Fprintf(w, "Crawling %d hosts (%d pages each) from %s with %d workers,\n", cfg.Hosts, cfg.PagesPerHost, s.pageURL(0, 0), cfg.Workers)
	fmt.Fprintf(w, "at most %d requests per host in any %v window (the client's windows are %v).\n\n", cfg.PerHost, cfg.Window, cfg.Window+cfg.Margin)

	s.start = time.Now()
	fetched, err := crawl(ctx, client, s.pageURL(0, 0), cfg)
	res.Elapsed = time.Since(s.start)
	res.Fetched = fetched
	if err != nil {
		return res, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	res.MaxInFlight = s.peak
	fmt.Fprintf(w, "%-16s %6s %9s   %s\n", "host", "pages", "requests", fmt.Sprintf("most requests in any %v window", cfg.Window))
	var problems []error
	for h, srv := range s.servers {
		u, _ := url.Parse(srv.URL)
		hr := hostResult{Host: u.Host, Pages: len(s.served[h]), Requests: len(s.arrivals[h]), Arrivals: slices.Clone(s.arrivals[h])}
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
	links []string
	err   error
}

// crawl fetches root and every page reachable from it, each page once, on a
// pool of cfg.Workers with a sliding log per host. Every page discovered is
// handed to the pool with GoKey, which returns at once: a host at its limit
// holds back only its own pages, in the pool's queue for that host.
func crawl(ctx context.Context, client *http.Client, root string, cfg config) (int, error) {
	hosts, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
		return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: cfg.PerHost, Window: cfg.Window + cfg.Margin})
	}})
	if err != nil {
		return 0, err
	}
	defer hosts.Close()
	p, err := pool.New(pool.Options{Workers: cfg.Workers, PerKey: hosts.For, Context: ctx})
	if err != nil {
		return 0, err
	}
	defer p.Close()

	// Room for a report from every page: a fetch never blocks on it, even
	// after the crawl loop has stopped receiving.
	results := make(chan fetched, cfg.PagesPerHost*cfg.Hosts)
	submit := func(u string) error {
		pu, err := url.Parse(u)
		if err != nil {
			return err
		}
		return p.GoKey(ctx, pu.Host, func(ctx context.Context) error {
			links, err := fetchLinks(ctx, client, u)
			results <- fetched{links, err}
			return nil // err is reported once, by the crawl loop
		})
	}

	seen := map[string]bool{root: true}
	outstanding, pages := 1, 0
	var errs []error
	if err := submit(root); err != nil {
		return 0, err
	}
	for outstanding > 0 && ctx.Err() == nil {
		var f fetched
		select {
		case f = <-results:
		case <-ctx.Done(): // the pages still queued will never report
			continue
		}
		outstanding--
		if f.err != nil {
			errs = append(errs, f.err)
			continue
		}
		pages++
		for _, l := range f.links {
			if seen[l] {
				continue
			}
			seen[l] = true
			outstanding++
			if err := submit(l); err != nil {
				errs = append(errs, err)
				outstanding--
			}
		}
	}
	if err := p.Wait(); err != nil { // the fetches' errors, and those of pages that never started
		errs = append(errs, err)
	}
	return pages, errors.Join(errs...)
}

var hrefRE = regexp.MustCompile(`href="([^"]+)"`)

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
	if resp.StatusCode != http.StatusOK {
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
