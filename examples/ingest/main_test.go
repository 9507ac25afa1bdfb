package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/internal/clitest"
	"github.com/rategate/rategate/limiter"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(workerEnv); spec != "" {
		// A worker process of TestDistributed: this binary, re-executed.
		if err := workerMain(spec, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "ingest worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestIngest runs the program at full size on a virtual clock: the rows the
// README shows come out of the simulation.
func TestIngest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, out := clitest.MustRun(t, run, defaultConfig)
		// Naive: each pass stores 2,000 records (a second of the store's
		// units) and a second later the next pass retries the rest:
		// 10,000 + 8,000 + 6,000 + 4,000 + 2,000 sent.
		want := row{Client: "naive", Sent: 30_000, Rejected: 20_000, Stored: 10_000, Passes: 5, Time: 4 * time.Second}
		if res.Naive != want {
			t.Errorf("naive: %+v, want %+v", res.Naive, want)
		}
		// Rate-limited: a burst of 500 units (50 records) at once, then one
		// record every 10/19,000 s: the last of 10,000 at 9,950 * 10/19,000 s
		// (rounded up to the nanosecond).
		want = row{Client: "rate-limited", Sent: 10_000, Rejected: 0, Stored: 10_000, Passes: 1, Time: (9950*10*time.Second + 18_999) / 19_000}
		if res.Limited != want {
			t.Errorf("rate-limited: %+v, want %+v", res.Limited, want)
		}
		clitest.Contains(t, out,
			"      naive        30,000      20,000       5  4.00 s\n",
			"rate-limited        10,000           0       1  5.24 s\n",
		)
	})
}

// TestIngestScaled: the same shape at a hundredth of the size.
func TestIngestScaled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config{Records: 100, Units: 10, StoreRate: 200, ClientRate: 200, Burst: 10, Retry: time.Second}
		res, err := run(t.Context(), &bytes.Buffer{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if n := res.Naive; n.Sent != 300 || n.Rejected != 200 || n.Passes != 5 || n.Stored != 100 {
			t.Errorf("naive: %+v", n)
		}
		// 990 units at 200 a second after a burst of 10: 4.95 s. On the
		// virtual clock the client may run at the store's very rate.
		if l := res.Limited; l.Sent != 100 || l.Rejected != 0 || l.Passes != 1 || l.Stored != 100 || l.Time != 4950*time.Millisecond {
			t.Errorf("rate-limited: %+v", l)
		}
	})
}

// TestIngestTooFast: a client limiter above the store's rate is rejected
// too: the store keeps its own account.
func TestIngestTooFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config{Records: 1000, Units: 10, StoreRate: 2000, ClientRate: 4000, Burst: 10, Retry: time.Second}
		lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(cfg.ClientRate, time.Second), Burst: cfg.Burst})
		if err != nil {
			t.Fatal(err)
		}
		r, err := ingest(t.Context(), "too fast", makeRecords(0, cfg.Records, cfg.Units), cfg, lim)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rejected == 0 || r.Stored != cfg.Records || r.Sent != cfg.Records+r.Rejected {
			t.Errorf("a client at twice the store's rate: %+v, want rejections and every record stored", r)
		}
	})
}

// TestStore: the simulated store accepts at most its rate in any one-second
// window (t-1s, t], and rejects what goes over.
func TestStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStore(100) // 100 units in any second
		accepted := func(n, units int) (ok int) {
			for i := range n {
				if st.write(record{ID: i, Units: units}) == nil {
					ok++
				}
			}
			return ok
		}
		if got := accepted(7, 10); got != 7 {
			t.Errorf("at 0: %d of 7 records of 10 units accepted, want 7", got)
		}
		time.Sleep(400 * time.Millisecond)
		if got := accepted(5, 10); got != 3 {
			t.Errorf("at 400 ms: %d of 5 records of 10 units accepted, want 3 (70 in the window)", got)
		}
		if err := st.write(record{Units: 1}); !errors.Is(err, errThrottled) {
			t.Errorf("a write over the budget: %v, want errThrottled", err)
		}
		time.Sleep(600*time.Millisecond - 1) // at 1s-1ns the writes at 0 still count
		if got := accepted(1, 1); got != 0 {
			t.Error("at 1s-1ns: a write accepted with 100 units in (-1ns, 1s-1ns]")
		}
		time.Sleep(time.Nanosecond) // at 1 s, those at 0 are out of (0, 1s]
		if got := accepted(10, 10); got != 7 {
			t.Errorf("at 1 s: %d of 10 records of 10 units accepted, want 7", got)
		}
		time.Sleep(10 * time.Second)
		if got := accepted(1, 101); got != 0 {
			t.Error("a record of more than the store's rate was accepted")
		}
		if got := st.stored(); got != 7 {
			t.Errorf("stored %d distinct records, want 7 (IDs 0..6)", got)
		}
	})
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 30000: "30,000", 1234567: "1,234,567", -20000: "-20,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestCLI runs the command line as a user would type it: -h answers with the
// usage and status 0; unknown flags, bad values and arguments fail with
// status 2 and a message that names what was wrong; a good command line
// runs (on a virtual clock) and succeeds.
func TestCLI(t *testing.T) {
	clitest.Run(t, "ingest", cli, []clitest.Case{
		{Args: []string{"-h"}, Out: "Usage: ingest [flags]"},
		{Args: []string{"-help"}, Out: "-client-rate int"},
		{Args: []string{"-bogus"}, Code: 2, Err: "flag provided but not defined: -bogus"},
		{Args: []string{"extra"}, Code: 2, Err: `unexpected argument "extra"`},
		{Args: []string{"-records", "100", "extra"}, Code: 2, Err: `unexpected argument "extra"`},
		{Args: []string{"-records", "abc"}, Code: 2, Err: `invalid value "abc" for flag -records`},
		{Args: []string{"-records", "0"}, Code: 2, Err: "-records must be from 1 to 10,000,000, got 0"},
		{Args: []string{"-records", "20000000"}, Code: 2, Err: "-records must be from 1 to 10,000,000"},
		{Args: []string{"-units", "0"}, Code: 2, Err: "-units must be at least 1, got 0"},
		{Args: []string{"-store-rate", "5"}, Code: 2, Err: "-store-rate must be at least a record's -units (10)"},
		{Args: []string{"-client-rate", "-1"}, Code: 2, Err: "-client-rate must be at least 1 unit a second, got -1"},
		{Args: []string{"-burst", "9"}, Code: 2, Err: "-burst must be at least a record's -units (10)"},
		{Args: []string{"-retry", "0s"}, Code: 2, Err: "-retry must be a positive duration"},
		{Args: []string{"-retry", "soon"}, Code: 2, Err: `invalid value "soon" for flag -retry`},
		{Args: []string{"-records", "100", "-store-rate", "200", "-client-rate", "200", "-burst", "10"}, Out: "rate-limited           100           0       1  4.95 s"},
		{Args: []string{"-h"}, Out: "-distributed"},
		{Args: []string{"-distributed", "-processes", "0"}, Code: 2, Err: "-processes must be from 1 to 64, got 0"},
		{Args: []string{"-distributed", "-partitions", "0"}, Code: 2, Err: "-partitions must be from 1 to 1024, got 0"},
		{Args: []string{"-distributed", "-lease-ttl", "1ms"}, Code: 2, Err: "-lease-ttl must be at least 30ms, got 1ms"},
		{Args: []string{"-distributed", "-burst", "10", "-partitions", "16"}, Code: 2, Err: "-burst must be at least -partitions (16)"},
	})
}
