package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// count returns the offsets in [from, to).
func count(offsets []time.Duration, from, to time.Duration) int {
	n := 0
	for _, o := range offsets {
		if o >= from && o < to {
			n++
		}
	}
	return n
}

// TestProducers runs the example as `go run` does, on synctest's virtual
// clock: the four seconds pass at once and every grant lands on its exact
// instant.
func TestProducers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := defaultConfig
		res, out := mustRun(t, cfg)
		checkRun(t, cfg, res, out)
		// With the fast consumer, the rate is the limit: exactly 100 sends
		// (and receives) in each of the first two seconds.
		for s := range 2 {
			from, to := time.Duration(s)*time.Second, time.Duration(s+1)*time.Second
			if n := count(res.Sent, from, to); n != 100 {
				t.Errorf("second %d: %d sends, want exactly the rate, 100", s, n)
			}
			if n := count(res.Received, from, to); n != 100 {
				t.Errorf("second %d: %d receives, want 100", s, n)
			}
		}
		// With the slow consumer (20 ms an item), the buffer bound holds the
		// producers to its pace: 50 receives a second, the buffer full.
		if n := count(res.Received, 3*time.Second, 4*time.Second); n != 50 {
			t.Errorf("last second: %d receives, want the consumer's 50", n)
		}
		if n := count(res.Sent, 3*time.Second, 4*time.Second); n != 50 {
			t.Errorf("last second: %d sends, want 50: one per receive, the buffer being full", n)
		}
		// The chain serves its waiting senders in arrival order, so equal
		// producers get equal shares (25% ± 5% each).
		total := len(res.Sent)
		for p, n := range res.PerProducer {
			if share := float64(n) / float64(total); share < 0.20 || share > 0.30 {
				t.Errorf("producer %d sent %d of %d (%v): want 25%% ± 5%%", p, n, total, res.PerProducer)
			}
		}
	})
}

// TestProducersScaled runs at another scale, to check that nothing depends
// on the default sizes.
func TestProducersScaled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config{
			Producers: 7,
			Rate:      30,
			Period:    100 * time.Millisecond,
			Buffer:    3,
			Duration:  time.Second,
			FastWork:  time.Millisecond,
			SlowWork:  50 * time.Millisecond,
		}
		res, out := mustRun(t, cfg)
		checkRun(t, cfg, res, out)
	})
}

// TestRealClock runs a small configuration on the real clock, where every
// send is stamped a little after its grant. The run's own checks must pass
// (a count against the rate alone would fail whenever a stamp came late),
// and no more may be sent than the bucket can grant from the start to the
// last stamp, 1 + Rate·t/Period: exact, since a stamp is never early. The
// producers must also keep up: at least half the sends the rate allows
// while the consumer is fast (a loaded machine running -race stalls a
// goroutine for tens of milliseconds, not for half the run). A run that
// falls short is run again, up to three times: lateness is the machine's;
// a send over the rate fails at once.
func TestRealClock(t *testing.T) {
	cfg := config{Producers: 3, Rate: 20, Period: 200 * time.Millisecond, Buffer: 3, Duration: 600 * time.Millisecond, FastWork: time.Millisecond, SlowWork: 20 * time.Millisecond}
	realClock(t, func() (late []string) {
		res, _ := mustRun(t, cfg)
		last := slices.Max(res.Sent)
		if most := 1 + int(int64(cfg.Rate)*int64(last)/int64(cfg.Period)); len(res.Sent) > most {
			t.Fatalf("%d sent by %v, over the %d the rate allows", len(res.Sent), last, most)
		}
		if fast := count(res.Sent, 0, cfg.Duration/2); fast < cfg.Rate*int(cfg.Duration/2/cfg.Period)/2 {
			late = append(late, fmt.Sprintf("%d sent in the first half, want at least half the rate's %d", fast, cfg.Rate*int(cfg.Duration/2/cfg.Period)))
		}
		return late
	})
}

// realClock runs attempt up to three times, until a run finds nothing late.
// Lateness is the machine's, not the limiter's (a stall of the test's
// goroutines); a real violation fails inside attempt, at once.
func realClock(t *testing.T, attempt func() (late []string)) {
	t.Helper()
	for i := 1; i <= 3; i++ {
		late := attempt()
		if len(late) == 0 {
			return
		}
		t.Logf("run %d of 3 found, on this machine: %s", i, strings.Join(late, "; "))
	}
	t.Errorf("every run of 3 was late (see the log)")
}

// TestBoundCheck checks the rate's check: sends granted at the rate, the
// earlier ones stamped up to the slack late, keep the bound, though they
// number more than the rate in one period.
func TestBoundCheck(t *testing.T) {
	cfg := config{Rate: 10, Period: time.Second}
	var sent []time.Duration
	for i := range 12 { // at 0, 100 ms, …, 1.1 s; all but the last two stamped the slack late
		at := time.Duration(i) * cfg.Period / time.Duration(cfg.Rate)
		if i < 10 {
			at += cfg.slack()
		}
		sent = append(sent, at)
	}
	if n := peak(sent, cfg.Period); n <= cfg.Rate || n > cfg.mostInPeriod() {
		t.Errorf("%d stamped in a period: want more than the rate %d (the case the check exists for), and at most the check's %d", n, cfg.Rate, cfg.mostInPeriod())
	}
}

func TestProducersInvalidConfig(t *testing.T) {
	cfg := defaultConfig
	cfg.Producers = 0
	if _, err := run(t.Context(), &bytes.Buffer{}, cfg); err == nil {
		t.Fatal("run with no producers did not fail")
	}
}

func checkRun(t *testing.T, cfg config, res result, out string) {
	t.Helper()
	if res.MaxInPeriod != cfg.Rate {
		t.Errorf("most sends in a period: %d, want exactly the rate %d", res.MaxInPeriod, cfg.Rate)
	}
	if res.PeakBuffer != cfg.Buffer {
		t.Errorf("peak buffer %d, want exactly the bound %d", res.PeakBuffer, cfg.Buffer)
	}
	total := 0
	for p, n := range res.PerProducer {
		if n == 0 {
			t.Errorf("producer %d sent nothing", p)
		}
		total += n
	}
	if total != len(res.Sent) || len(res.Received) != len(res.Sent) || res.Drained != 0 {
		t.Errorf("sent %d (per producer %d), received %d, drained %d: every item sent must be received once",
			len(res.Sent), total, len(res.Received), res.Drained)
	}
	contains(t, out, "Permits still held: 0.", "buffer (peak)")
}

// TestCLI runs the command line as a user would type it: -h answers with the
// usage and status 0; unknown flags, bad values and arguments fail with
// status 2 and a message that names what was wrong; a good command line
// runs (on a virtual clock) and succeeds.
func TestCLI(t *testing.T) {
	testCLI(t, []cliCase{
		{args: []string{"-h"}, out: "Usage: producers [flags]"},
		{args: []string{"-help"}, out: "-buffer int"},
		{args: []string{"-bogus"}, code: 2, err: "flag provided but not defined: -bogus"},
		{args: []string{"extra"}, code: 2, err: `unexpected argument "extra": it takes only flags`},
		{args: []string{"-producers", "0"}, code: 2, err: "-producers must be from 1 to 1000, got 0"},
		{args: []string{"-producers", "x"}, code: 2, err: `invalid value "x" for flag -producers`},
		{args: []string{"-buffer", "0"}, code: 2, err: "-buffer must be from 1 to 100000, got 0"},
		{args: []string{"-rate", "100"}, code: 2, err: `bad -rate: limiter: parse rate "100": want N/unit or N/duration, as in 100/s`},
		{args: []string{"-rate", "0/s"}, code: 2, err: `count "0" is not a positive integer`},
		{args: []string{"-rate", "200000/s"}, code: 2, err: "-rate must allow from 1 to 100000 items per period, got 200000\n"},
		{args: []string{"-rate", "1000000000/s"}, code: 2, err: "-rate must allow from 1 to 100000 items per period, got 1000000000\n"},
		{args: []string{"-rate", "5/ms"}, code: 2, err: "-rate's period must be at least 10ms (it is also the report interval), got 1ms"},
		{args: []string{"-rate", "5/10ms", "-duration", "1h"}, code: 2, err: "-duration must be at most 1000 periods of -rate (10ms), got 1h0m0s"},
		{args: []string{"-duration", "0s"}, code: 2, err: "-duration must be a positive duration such as 100ms, got 0s"},
		{args: []string{"-fast", "-1ms"}, code: 2, err: "-fast and -slow must not be negative, got -1ms and 20ms"},
		{args: []string{"-producers", "2", "-rate", "10/s", "-buffer", "3", "-duration", "2s", "-slow", "500ms"}, out: "Most sends in any 1s: 10 (limit 10). Peak buffer: 3 (limit 3). Permits still held: 0."},
	})
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

// cliCase is a command line and what it must do: its exit status, and text
// its stdout and stderr must contain ("" for anything).
type cliCase struct {
	args     []string
	code     int
	out, err string
}

// testCLI runs each case through cli in a synctest bubble. A case with
// status 2 must also print nothing on stdout, and end stderr with where to
// find the usage.
func testCLI(t *testing.T, cases []cliCase) {
	t.Helper()
	for _, tc := range cases {
		synctest.Test(t, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli(t.Context(), tc.args, &stdout, &stderr)
			o, e := stdout.String(), stderr.String()
			if code != tc.code || !strings.Contains(o, tc.out) || !strings.Contains(e, tc.err) {
				t.Errorf("%q: status %d, stdout %q, stderr %q; want status %d, %q in stdout, %q in stderr", tc.args, code, o, e, tc.code, tc.out, tc.err)
			}
			if tc.code == 2 && (o != "" || !strings.HasSuffix(e, "Run 'producers -h' for usage.\n")) {
				t.Errorf("%q: stdout %q, stderr %q; want nothing on stdout, and where to find the usage", tc.args, o, e)
			}
		})
	}
}
