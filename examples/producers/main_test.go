package main

import (
	"bytes"
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
		var out bytes.Buffer
		res, err := run(t.Context(), &out, cfg)
		t.Log("\n" + out.String())
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		checkRun(t, cfg, res, out.String())
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
		var out bytes.Buffer
		res, err := run(t.Context(), &out, cfg)
		if err != nil {
			t.Log("\n" + out.String())
			t.Fatalf("run: %v", err)
		}
		checkRun(t, cfg, res, out.String())
	})
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
	for _, line := range []string{"Permits still held: 0.", "buffer (peak)"} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q", line)
		}
	}
}

// TestCLI runs the command line as a user would type it: -h answers with the
// usage and status 0; unknown flags, bad values and arguments fail with
// status 2 and a message that names what was wrong; a good command line
// runs (on a virtual clock) and succeeds.
func TestCLI(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{[]string{"-h"}, 0, "Usage: producers [flags]", ""},
		{[]string{"-help"}, 0, "-buffer int", ""},
		{[]string{"-bogus"}, 2, "", "flag provided but not defined: -bogus"},
		{[]string{"extra"}, 2, "", `unexpected argument "extra": it takes only flags`},
		{[]string{"-producers", "0"}, 2, "", "-producers must be from 1 to 1000, got 0"},
		{[]string{"-producers", "x"}, 2, "", `invalid value "x" for flag -producers`},
		{[]string{"-buffer", "0"}, 2, "", "-buffer must be from 1 to 100000, got 0"},
		{[]string{"-rate", "100"}, 2, "", `bad -rate: limiter: parse rate "100": want N/unit or N/duration, as in 100/s`},
		{[]string{"-rate", "0/s"}, 2, "", `count "0" is not a positive integer`},
		{[]string{"-rate", "200000/s"}, 2, "", "-rate must allow from 1 to 100000 items per period, got 100001"},
		{[]string{"-rate", "5/ms"}, 2, "", "-rate's period must be at least 10ms (it is also the report interval), got 1ms"},
		{[]string{"-rate", "5/10ms", "-duration", "1h"}, 2, "", "-duration must be at most 1000 periods of -rate (10ms), got 1h0m0s"},
		{[]string{"-duration", "0s"}, 2, "", "-duration must be a positive duration such as 100ms, got 0s"},
		{[]string{"-fast", "-1ms"}, 2, "", "-fast and -slow must not be negative, got -1ms and 20ms"},
		{[]string{"-producers", "2", "-rate", "10/s", "-buffer", "3", "-duration", "2s", "-slow", "500ms"}, 0, "Most sends in any 1s: 10 (limit 10). Peak buffer: 3 (limit 3). Permits still held: 0.", ""},
	} {
		synctest.Test(t, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli(t.Context(), tc.args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.err) {
				t.Errorf("producers %q: status %d, stdout %q, stderr %q; want status %d, %q in stdout, %q in stderr",
					tc.args, code, stdout.String(), stderr.String(), tc.code, tc.out, tc.err)
			}
			if tc.code == 2 && (stdout.Len() > 0 || !strings.HasSuffix(stderr.String(), "Run 'producers -h' for usage.\n")) {
				t.Errorf("producers %q: stdout %q, stderr %q; want nothing on stdout and a pointer to -h", tc.args, stdout.String(), stderr.String())
			}
		})
	}
}
