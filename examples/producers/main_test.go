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
