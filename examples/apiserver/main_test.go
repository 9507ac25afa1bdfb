package main

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var small = config{Limit: 3, Window: time.Second, Requests: 6, Clients: 2, Reports: 3, ReportRate: 10, Wait: time.Second}

// The plain client is refused what is over the limit; the Transport client
// sends as many and is refused none; the queued reports are all served;
// the server never served more than the limit in a window.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	res, err := run(t.Context(), &out, small)
	if err != nil {
		t.Fatal(err)
	}
	// 6 requests at once against 3 a second: 3 refused (fewer only if the
	// machine stalled the client for a second).
	if res.PlainSent != 6 || res.PlainRefused < 1 || res.PlainRefused > 3 {
		t.Errorf("plain client: %d sent, %d refused; want 6 and 3", res.PlainSent, res.PlainRefused)
	}
	if res.Sent != 6 || res.Refused != 0 {
		t.Errorf("Transport client: %d sent, %d refused; want 6 and 0", res.Sent, res.Refused)
	}
	if res.ReportsServed != 3 {
		t.Errorf("%d reports served, want 3", res.ReportsServed)
	}
	if res.MaxInWindow > 3 || res.MaxInWindow < 1 {
		t.Errorf("max in a window %d, want 1 to 3", res.MaxInWindow)
	}
	for _, want := range []string{"6 requests sent,  0 refused with 429", "3 served in turn"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestWaitZero: -wait 0 is what httplimit.Options.Wait 0 is, no queue: of
// the reports posted at once, the first is served and the others refused at
// once, and the run succeeds (it did exit 1, as if -wait 0 were wrong).
func TestWaitZero(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := cli(t.Context(), []string{"-wait", "0", "-limit", "3", "-window", "300ms", "-requests", "6", "-clients", "2", "-reports", "3", "-report-rate", "10"}, &stdout, &stderr)
	t.Log("\n" + stdout.String() + stderr.String())
	if code != 0 {
		t.Fatalf("apiserver -wait 0: exit %d, want 0", code)
	}
	// The longest wait is a round trip on the real clock (0s on a quiet
	// machine, tens of milliseconds on a busy one): only the counts are
	// checked.
	want := regexp.MustCompile(` 3 posted at once,  1 served in turn \(longest wait [0-9.a-zµ]+\), 2 refused at once: their turn was more than -wait \(0s\) away\n`)
	if !want.MatchString(stdout.String()) {
		t.Errorf("output does not match %q", want)
	}
}

// TestReportsDue: the reports /reports must serve are those whose turn
// comes within Wait, and the first, served at once.
func TestReportsDue(t *testing.T) {
	for _, tc := range []struct {
		reports, rate int
		wait          time.Duration
		want          int
	}{
		{6, 4, 2 * time.Second, 6}, // turns at 0, 0.25, …, 1.25 s
		{6, 4, time.Second, 4},     // the turn at 1 s is not within 1 s
		{6, 4, 0, 1},
		{0, 4, time.Second, 0},
		{3, 3, time.Second, 3}, // turns at 0, 333333333 ns, 666666666 ns
	} {
		cfg := config{Reports: tc.reports, ReportRate: tc.rate, Wait: tc.wait}
		if got := cfg.reportsDue(); got != tc.want {
			t.Errorf("%d reports at %d/s, wait %v: %d due, want %d", tc.reports, tc.rate, tc.wait, got, tc.want)
		}
	}
}

// TestCLI: -h prints the usage and exits 0; an unknown flag, an extra
// argument or a bad value prints why and exits 2 without running.
func TestCLI(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"-h"}, 0, "Usage: apiserver [flags]"},
		{[]string{"-help"}, 0, "-report-rate int"},
		{[]string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-limit", "many"}, 2, `invalid value "many" for flag -limit`},
		{[]string{"-limit", "0"}, 2, "-limit must be positive"},
		{[]string{"-window", "-1s"}, 2, "-window must be positive"},
		{[]string{"-wait", "-1s"}, 2, "-wait must not be negative (0 refuses at once what cannot be served at once), got -1s"},
		{[]string{"-reports", "-1"}, 2, "-reports must be from 0 to 1000, got -1"},
	} {
		var stdout, stderr bytes.Buffer
		code := cli(t.Context(), tc.args, &stdout, &stderr)
		said := stderr.String()
		help := slices.Contains(tc.args, "-h") || slices.Contains(tc.args, "-help")
		if help {
			said = stdout.String() // the usage asked for goes to stdout
		}
		if code != tc.code || !strings.Contains(said, tc.say) {
			t.Errorf("apiserver %q: exit %d, said %q; want exit %d and %q", tc.args, code, said, tc.code, tc.say)
		}
		if !help && stdout.Len() != 0 || help && strings.Contains(stdout.String(), "sent") {
			t.Errorf("apiserver %q ran: %q", tc.args, stdout.String())
		}
	}
}
