package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sample returns the value of the one sample of name whose labels include
// every one of labels (`name="value"`), failing if there is not exactly one.
func sample(t *testing.T, lines []string, name string, labels ...string) float64 {
	t.Helper()
	var found []string
	for _, l := range lines {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		ok := true
		for _, lb := range labels {
			ok = ok && strings.Contains(l, lb)
		}
		if ok {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s %v: %d samples: %q", name, labels, len(found), found)
	}
	v, err := strconv.ParseFloat(found[0][strings.LastIndexByte(found[0], ' ')+1:], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestScrape sends requests to the API on a real loopback server and checks
// the counts that GET /metrics reports, exactly.
func TestScrape(t *testing.T) {
	cfg := config{Burst: 4, Requests: 7, Reports: 3, Work: 20 * time.Millisecond}
	s, err := newServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ts := httptest.NewServer(s)
	defer ts.Close()
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()

	got, err := demo(client, ts.URL, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got["/hello 200"] != 4 || got["/hello 429"] != 3 || got["/reports 200"] != 3 {
		t.Fatalf("statuses %v, want 4 × 200 and 3 × 429 on /hello, 3 × 200 on /reports", got)
	}
	lines, err := scrape(client, ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	hello, reports := `rategate_rate_limiting_policy="hello"`, `rategate_rate_limiting_policy="reports"`
	granted, limited := `rategate_rate_limiting_result="granted"`, `rategate_rate_limiting_result="limited"`
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"rategate_rate_limiting_requests_total", []string{hello, granted}, 4},
		{"rategate_rate_limiting_requests_total", []string{hello, limited}, 3},
		{"rategate_rate_limiting_requests_total", []string{reports, granted}, 3},
		// Every report waited in the queue (the middleware queues) and held
		// the one worker once.
		{"rategate_rate_limiting_request_time_in_queue_seconds_count", []string{reports, granted}, 3},
		{"rategate_rate_limiting_request_lease_duration_seconds_count", []string{reports}, 3},
		{"rategate_rate_limiting_active_request_leases", []string{reports}, 0},
		{"rategate_rate_limiting_queued_requests", []string{reports}, 0},
		{"rategate_rate_limiting_queued_requests", []string{hello}, 0},
		{"rategate_rate_limiting_limit", []string{reports}, 1},
	} {
		if v := sample(t, lines, c.name, c.labels...); v != c.want {
			t.Errorf("%s %v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	// The reports ran one at a time: each held the worker for at least
	// Work, so together at least 3 × Work.
	if v := sample(t, lines, "rategate_rate_limiting_request_lease_duration_seconds_sum", reports); v < 3*cfg.Work.Seconds() {
		t.Errorf("leases held %vs in all, want at least %v", v, 3*cfg.Work.Seconds())
	}
	// No client address or URL is a label.
	for _, l := range lines {
		if strings.Contains(l, "127.0.0.1") || strings.Contains(l, "/hello") {
			t.Errorf("a client address or URL in %q", l)
		}
	}
}

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, config{Burst: 2, Requests: 3, Reports: 1, Work: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"GET /hello: 2 served, 1 refused; POST /reports: 1 served",
		`rategate_rate_limiting_requests_total{rategate_rate_limiting_policy="hello",rategate_rate_limiting_result="limited"} 1`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
