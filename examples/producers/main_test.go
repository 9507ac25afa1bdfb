package main

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/internal/clitest"
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
		res, out := clitest.MustRun(t, run, cfg)
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
		res, out := clitest.MustRun(t, run, cfg)
		checkRun(t, cfg, res, out)
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
	clitest.Contains(t, out, "Permits still held: 0.", "buffer (peak)")
}

// TestCLI runs the command line as a user would type it: -h answers with the
// usage and status 0; unknown flags, bad values and arguments fail with
// status 2 and a message that names what was wrong; a good command line
// runs (on a virtual clock) and succeeds.
func TestCLI(t *testing.T) {
	clitest.Run(t, "producers", cli, []clitest.Case{
		{Args: []string{"-h"}, Out: "Usage: producers [flags]"},
		{Args: []string{"-help"}, Out: "-buffer int"},
		{Args: []string{"-bogus"}, Code: 2, Err: "flag provided but not defined: -bogus"},
		{Args: []string{"extra"}, Code: 2, Err: `unexpected argument "extra": it takes only flags`},
		{Args: []string{"-producers", "0"}, Code: 2, Err: "-producers must be from 1 to 1000, got 0"},
		{Args: []string{"-producers", "x"}, Code: 2, Err: `invalid value "x" for flag -producers`},
		{Args: []string{"-buffer", "0"}, Code: 2, Err: "-buffer must be from 1 to 100000, got 0"},
		{Args: []string{"-rate", "100"}, Code: 2, Err: `bad -rate: limiter: parse rate "100": want N/unit or N/duration, as in 100/s`},
		{Args: []string{"-rate", "0/s"}, Code: 2, Err: `count "0" is not a positive integer`},
		{Args: []string{"-rate", "200000/s"}, Code: 2, Err: "-rate must allow from 1 to 100000 items per period, got 100001"},
		{Args: []string{"-rate", "5/ms"}, Code: 2, Err: "-rate's period must be at least 10ms (it is also the report interval), got 1ms"},
		{Args: []string{"-rate", "5/10ms", "-duration", "1h"}, Code: 2, Err: "-duration must be at most 1000 periods of -rate (10ms), got 1h0m0s"},
		{Args: []string{"-duration", "0s"}, Code: 2, Err: "-duration must be a positive duration such as 100ms, got 0s"},
		{Args: []string{"-fast", "-1ms"}, Code: 2, Err: "-fast and -slow must not be negative, got -1ms and 20ms"},
		{Args: []string{"-producers", "2", "-rate", "10/s", "-buffer", "3", "-duration", "2s", "-slow", "500ms"}, Out: "Most sends in any 1s: 10 (limit 10). Peak buffer: 3 (limit 3). Permits still held: 0."},
	})
}
