package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCrawl crawls a small site on the real clock (httptest servers do real
// network I/O, which a synctest bubble cannot hold) and checks, from the
// servers' own records, that every page was fetched exactly once and that no
// host ever saw more than PerHost requests in any Window: exactly, with no
// tolerance. Only the total time has a (generous) bound.
func TestCrawl(t *testing.T) {
	cfg := config{
		Hosts:        3,
		PagesPerHost: 10,
		Workers:      4,
		PerHost:      3,
		Window:       500 * time.Millisecond,
		// A wide margin: the servers' count is exact only while no request
		// takes Margin longer than another to reach its server, and a
		// loaded CI machine running -race can stall a request for tens of
		// milliseconds.
		Margin:  200 * time.Millisecond,
		Latency: 5 * time.Millisecond,
	}
	res, out := mustRun(t, cfg)
	if len(res.Hosts) != cfg.Hosts {
		t.Fatalf("%d hosts reported, want %d", len(res.Hosts), cfg.Hosts)
	}
	reached := false
	for _, h := range res.Hosts {
		reached = checkHost(t, h, cfg) || reached
	}
	if !reached {
		t.Errorf("no host reached its limit of %d: the crawl is slower than it may be", cfg.PerHost)
	}
	if res.MaxInFlight > cfg.Workers {
		t.Errorf("%d requests in flight, over %d workers", res.MaxInFlight, cfg.Workers)
	}
	if res.Fetched != cfg.Hosts*cfg.PagesPerHost {
		t.Errorf("fetched %d pages, want %d", res.Fetched, cfg.Hosts*cfg.PagesPerHost)
	}
	if res.Elapsed > 20*time.Second {
		t.Errorf("the crawl took %v", res.Elapsed)
	}
	contains(t, out, "most requests in any 500ms window", "(limit 3)", "Fetched 30 pages in")
}

// checkHost checks one server's record: every page fetched once, the most
// arrivals in any Window recounted by brute force, never over PerHost. It
// reports whether the host reached its limit.
func checkHost(t *testing.T, h hostResult, cfg config) (reached bool) {
	t.Helper()
	if h.Pages != cfg.PagesPerHost || h.Requests != cfg.PagesPerHost {
		t.Errorf("host %s: %d pages in %d requests, want each of the %d pages fetched once", h.Host, h.Pages, h.Requests, cfg.PagesPerHost)
	}
	most := 0
	for _, a := range h.Arrivals {
		n := 0
		for _, b := range h.Arrivals {
			if b >= a && b < a+cfg.Window {
				n++
			}
		}
		most = max(most, n)
	}
	if most != h.MaxInWindow {
		t.Errorf("host %s: reported %d in a window, recount %d", h.Host, h.MaxInWindow, most)
	}
	if most > cfg.PerHost {
		t.Errorf("host %s: %d requests arrived within %v (%v), over the limit %d", h.Host, most, cfg.Window, slices.Sorted(slices.Values(h.Arrivals)), cfg.PerHost)
	}
	return most == cfg.PerHost
}

func TestCrawlCancelled(t *testing.T) {
	cfg := defaultConfig
	cfg.PagesPerHost = 50
	ctx, cancel := context.WithCancel(t.Context())
	defer time.AfterFunc(300*time.Millisecond, cancel).Stop()
	var out bytes.Buffer
	res, err := run(ctx, &out, cfg)
	if err == nil {
		t.Fatalf("a crawl cut short at 300ms returned no error; fetched %d", res.Fetched)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want Canceled", err)
	}
	if res.Fetched >= cfg.Hosts*cfg.PagesPerHost {
		t.Errorf("fetched all %d pages before the cancel", res.Fetched)
	}
	if res.Elapsed > 5*time.Second {
		t.Errorf("a cancelled crawl took %v to stop", res.Elapsed)
	}
}

// TestCLI: -h prints the usage and exits 0; an unknown flag, an extra
// argument or a bad value prints why and exits 2 without crawling; good
// flags crawl and exit 0.
func TestCLI(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		say  string // in stderr, or in stdout for -h
	}{
		{[]string{"-h"}, 0, "Usage: crawler [flags]"},
		{[]string{"-help"}, 0, "-per-host int"},
		{[]string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-hosts", "2", "more", "args"}, 2, `unexpected argument "more"`},
		{[]string{"-workers", "many"}, 2, `invalid value "many" for flag -workers`},
		{[]string{"-per-host", "0"}, 2, "-per-host must be positive"},
		{[]string{"-window", "-1s"}, 2, "-window must be positive"},
		{[]string{"-hosts", "2", "-pages", "3", "-per-host", "10", "-window", "200ms"}, 0, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := cli(t.Context(), tc.args, &stdout, &stderr)
		said := stderr.String()
		if slices.Contains(tc.args, "-h") || slices.Contains(tc.args, "-help") {
			said = stdout.String() // the usage asked for goes to stdout
		}
		if code != tc.code || !strings.Contains(said, tc.say) {
			t.Errorf("crawler %q: exit %d, said %q; want exit %d and %q", tc.args, code, said, tc.code, tc.say)
		}
		crawled := strings.Contains(stdout.String(), "Fetched")
		if crawled != (tc.code == 0 && tc.say == "") {
			t.Errorf("crawler %q: crawled %v; stdout %q", tc.args, crawled, stdout.String())
		}
	}
}

// mustRun runs the program's work with cfg, logs what it printed, and stops
// the test if it failed.
func mustRun(t *testing.T, cfg config) (result, string) {
	t.Helper()
	var out bytes.Buffer
	res, err := run(t.Context(), &out, cfg)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res, out.String()
}

// contains reports each of lines that out lacks.
func contains(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q", line)
		}
	}
}
