// Command apiserver runs a small rate-limited HTTP API on loopback and two
// clients of it, to show package httplimit from both ends:
//
//   - GET /items/{id} allows each client address -limit requests in any
//     -window (a strict sliding log per address); beyond that it answers
//     429 with Retry-After, and every response carries the IETF
//     RateLimit-Policy and RateLimit fields.
//   - POST /reports is queued (the leaky-bucket middleware): requests wait
//     in line, up to -wait, and are served -report-rate a second; one whose
//     turn is further away is refused at once (with -wait 0, every one that
//     cannot be served at once), as httplimit.Options.Wait says.
//
// First a plain net/http client sends -requests requests to /items as fast
// as it can, and is refused most of them. Then, a window later, a client
// whose transport is an httplimit.Transport sends as many from -clients
// goroutines: it reads the RateLimit field and waits when the quota is
// spent, so it receives no 429. Meanwhile -reports reports are posted at
// once and served in turn from the queue. The server's own record checks
// that no client ever had more than -limit requests served in a window.
//
//	go run ./examples/apiserver
//	go run ./examples/apiserver -limit 10 -window 2s -requests 50
//
// (-h lists the flags; it takes no arguments.) It exits with status 1 if
// the httplimit.Transport client was refused, a bound was broken, or a
// report whose turn came within -wait was not served.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

type config struct {
	Limit      int           // requests per client address in any Window, on /items
	Window     time.Duration // the window
	Requests   int           // requests each client sends to /items
	Clients    int           // goroutines of the httplimit.Transport client
	Reports    int           // reports posted at once to /reports
	ReportRate int           // reports served per second
	Wait       time.Duration // longest wait of a queued report
}

var defaultConfig = config{
	Limit:      5,
	Window:     time.Second,
	Requests:   20,
	Clients:    3,
	Reports:    6,
	ReportRate: 4,
	Wait:       2 * time.Second,
}

// result is what run measured.
type result struct {
	PlainSent, PlainRefused int
	Sent, Refused           int
	ReportsServed           int
	ReportsRefused          int // with 429, at once: their turn was more than Wait away
	MaxInWindow             int // most /items requests of one client served in any Window
}

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// cli parses args, runs the demonstration and returns the exit status: 0
// when the limits held and the Transport client was not refused, 1 when
// not, 2 for bad arguments (0 for -h, which prints the usage).
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig
	fs := flag.NewFlagSet("apiserver", flag.ContinueOnError)
	fs.IntVar(&cfg.Limit, "limit", cfg.Limit, "requests per client address in any window on /items")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "the window of -limit")
	fs.IntVar(&cfg.Requests, "requests", cfg.Requests, "requests each client sends to /items")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "goroutines of the httplimit.Transport client")
	fs.IntVar(&cfg.Reports, "reports", cfg.Reports, "reports posted at once to the queued /reports")
	fs.IntVar(&cfg.ReportRate, "report-rate", cfg.ReportRate, "reports served per second")
	fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "longest wait of a queued report (0: refuse at once what cannot be served at once)")
	usage := "Usage: apiserver [flags]\n\n" +
		"Runs a rate-limited API on loopback (GET /items/{id}: -limit requests per\n" +
		"client in any -window; POST /reports: queued, -report-rate a second) and\n" +
		"two clients of it: a plain one, and an httplimit.Transport that keeps to\n" +
		"the limits the server advertises. It takes no arguments.\n\nFlags:\n"
	if code, ok := parseFlags(fs, args, usage, stdout, stderr); !ok {
		return code
	}
	if err := cfg.check(); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	res, err := run(ctx, stdout, cfg)
	if err == nil && (res.Refused > 0 || res.MaxInWindow > cfg.Limit || res.ReportsServed < cfg.reportsDue()) {
		err = fmt.Errorf("the Transport client was refused %d times, a client had %d requests in a window (limit %d), %d reports served of the %d due within -wait",
			res.Refused, res.MaxInWindow, cfg.Limit, res.ReportsServed, cfg.reportsDue())
	}
	if err != nil {
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
		{"limit", c.Limit >= 1}, {"window", c.Window > 0}, {"requests", c.Requests >= 1}, {"clients", c.Clients >= 1},
	} {
		if !f.ok {
			return fmt.Errorf("-%s must be positive", f.name)
		}
	}
	switch {
	case c.Reports < 0 || c.Reports > 1000:
		return fmt.Errorf("-reports must be from 0 to 1000, got %d", c.Reports)
	case c.ReportRate < 1 || c.ReportRate > 1000:
		return fmt.Errorf("-report-rate must be from 1 to 1000, got %d", c.ReportRate)
	case c.Wait < 0:
		return fmt.Errorf("-wait must not be negative (0 refuses at once what cannot be served at once), got %v", c.Wait)
	}
	return nil
}

// reportsDue returns how many of the reports posted at once /reports must
// serve: the first at once, and each whose turn, at ReportRate a second,
// comes within Wait. It refuses the others at once with 429.
func (c config) reportsDue() int {
	n := 0
	for i := range c.Reports {
		if i == 0 || time.Duration(i)*time.Second/time.Duration(c.ReportRate) < c.Wait {
			n++
		}
	}
	return n
}

// server is the API and its record of the /items grants: for each client
// key, when each grant happened (between a before and an after instant).
type server struct {
	keyed  *limiter.Keyed[string]
	mu     sync.Mutex
	grants map[string][]span
}

type span struct{ before, after time.Time }

// TryAcquire makes server the KeyedLimiter of /items: its keyed limiter's,
// recorded.
func (s *server) TryAcquire(key string, n int) limiter.Lease {
	before := time.Now()
	l := s.keyed.TryAcquire(key, n)
	if l.Granted() {
		after := time.Now()
		s.mu.Lock()
		s.grants[key] = append(s.grants[key], span{before, after})
		s.mu.Unlock()
	}
	return l
}

// Acquire is not used: /items does not queue (Options.Wait is 0).
func (s *server) Acquire(ctx context.Context, key string, n int) (limiter.Lease, error) {
	return s.keyed.Acquire(ctx, key, n)
}

// Quota gives the RateLimit fields the key's quota.
func (s *server) Quota(key string) limiter.Quota { return s.keyed.Quota(key) }

func newServer(cfg config) (http.Handler, *server, error) {
	perClient, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
		return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: cfg.Limit, Window: cfg.Window})
	}})
	if err != nil {
		return nil, nil, err
	}
	s := &server{keyed: perClient, grants: map[string][]span{}}
	items, err := httplimit.New(httplimit.Options{Keyed: s, Policy: "items"})
	if err != nil {
		return nil, nil, err
	}
	pacer, err := limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(cfg.ReportRate, time.Second)})
	if err != nil {
		return nil, nil, err
	}
	reports, err := httplimit.New(httplimit.Options{Limiter: pacer, Wait: cfg.Wait, Policy: "reports"})
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", items.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"id":%q}`, r.PathValue("id"))
	})))
	mux.Handle("POST /reports", reports.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	})))
	return mux, s, nil
}

// maxInWindow returns the most grants of one client that certainly fell
// within one window of length w: each grant's instant is only known to lie
// in its span, so grants count together only when even their farthest
// instants are less than w apart (their afters less than w minus the
// widest span).
func (s *server) maxInWindow(w time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var eps time.Duration
	var origin time.Time // any instant: the offsets only need one
	for _, g := range s.grants {
		for _, sp := range g {
			eps = max(eps, sp.after.Sub(sp.before))
			origin = sp.after
		}
	}
	most := 0
	for _, g := range s.grants {
		afters := make([]time.Duration, len(g))
		for i, sp := range g {
			afters[i] = sp.after.Sub(origin)
		}
		most = max(most, peak(afters, w-eps))
	}
	return most
}

func run(ctx context.Context, out io.Writer, cfg config) (result, error) {
	var res result
	h, s, err := newServer(cfg)
	if err != nil {
		return res, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: cfg.Clients + cfg.Reports}
	defer base.CloseIdleConnections()
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "API on %s\n  GET  /items/{id}  %d requests per client in any %v, then 429\n  POST /reports     queued up to %v, served %d a second\n\n",
		url, cfg.Limit, cfg.Window, cfg.Wait, cfg.ReportRate)

	start := time.Now()
	plain := &http.Client{Transport: base}
	res.PlainSent, res.PlainRefused, err = fetch(ctx, plain, url, 1, cfg.Requests)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "plain net/http client:       %2d requests sent, %2d refused with 429 (%v)\n",
		res.PlainSent, res.PlainRefused, time.Since(start).Round(10*time.Millisecond))
	// Let the plain client's requests leave the window.
	select {
	case <-time.After(cfg.Window):
	case <-ctx.Done():
		return res, ctx.Err()
	}

	var reportsDone sync.WaitGroup
	var reportsServed, reportsRefused atomic.Int64
	var longest atomic.Int64
	for range cfg.Reports {
		reportsDone.Go(func() {
			t0 := time.Now()
			switch postReport(ctx, plain, url) {
			case http.StatusAccepted:
				reportsServed.Add(1)
			case http.StatusTooManyRequests:
				reportsRefused.Add(1)
			}
			longest.Store(max(longest.Load(), int64(time.Since(t0))))
		})
	}
	start = time.Now()
	client := &http.Client{Transport: &httplimit.Transport{Base: base}}
	res.Sent, res.Refused, err = fetch(ctx, client, url, cfg.Clients, cfg.Requests)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "httplimit.Transport client:  %2d requests sent, %2d refused with 429 (%v, %d goroutines)\n",
		res.Sent, res.Refused, time.Since(start).Round(10*time.Millisecond), cfg.Clients)
	reportsDone.Wait()
	res.ReportsServed, res.ReportsRefused = int(reportsServed.Load()), int(reportsRefused.Load())
	fmt.Fprintf(out, "queued reports:              %2d posted at once, %2d served in turn (longest wait %v)",
		cfg.Reports, res.ReportsServed, time.Duration(longest.Load()).Round(10*time.Millisecond))
	if res.ReportsRefused > 0 {
		fmt.Fprintf(out, ", %d refused at once: their turn was more than -wait (%v) away", res.ReportsRefused, cfg.Wait)
	}
	fmt.Fprintln(out)
	res.MaxInWindow = s.maxInWindow(cfg.Window)
	fmt.Fprintf(out, "\nthe server served at most %d requests of one client in any %v (limit %d)\n", res.MaxInWindow, cfg.Window, cfg.Limit)
	return res, nil
}

// fetch sends n GET /items requests from g goroutines and counts the 429s.
func fetch(ctx context.Context, c *http.Client, url string, g, n int) (sent, refused int, err error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var next atomic.Int64
	for range g {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				code, e := get(ctx, c, fmt.Sprintf("%s/items/%d", url, i))
				mu.Lock()
				sent++
				if code == http.StatusTooManyRequests {
					refused++
				}
				if e != nil && err == nil {
					err = e
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return sent, refused, err
}

func get(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// postReport posts a report and returns the response's status (0 if there
// was none).
func postReport(ctx context.Context, c *http.Client, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/reports", strings.NewReader(`{"ok":true}`))
	if err != nil {
		return 0
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
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
