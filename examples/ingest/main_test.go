package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
		res, out := mustRun(t, defaultConfig)
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
		contains(t, out,
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

// TestIngestShared runs the shared mode at full size on virtual time:
// another tenant takes 8,000 of the store's 20,000 units a second from 1 s
// on. The fixed-rate client, sending at the 19,000 it had alone, has more
// than a fifth of its requests rejected; the adaptive one under 1%, while
// it takes at least 85% of the 12,000 units a second left to the job from
// the tenant's arrival to its end (the store's one-second window lags
// behind a rise of the rate, so each probe above the capacity left
// overshoots before the store says no, and the rate then falls under it),
// and it finishes no later than the fixed-rate one.
func TestIngestShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		res, err := runShared(t.Context(), &out, defaultConfig)
		t.Log("\n" + out.String())
		if err != nil {
			t.Fatal(err)
		}
		f, a := res.Fixed, res.Adaptive
		if f.Stored != 10_000 || a.Stored != 10_000 || f.Sent != f.Stored+f.Rejected || a.Sent != a.Stored+a.Rejected {
			t.Errorf("fixed %+v, adaptive %+v: want every record stored, each sent once more per rejection", f, a)
		}
		if share := float64(f.Rejected) / float64(f.Sent); share < 0.2 {
			t.Errorf("fixed rate: %.1f%% of its requests rejected, want over 20%%", 100*share)
		}
		if share := float64(a.Rejected) / float64(a.Sent); share >= 0.01 {
			t.Errorf("adaptive: %.2f%% of its requests rejected, want under 1%%", 100*share)
		}
		if res.Left != 12_000 || a.After < 0.85*float64(res.Left) || a.After > float64(res.Left) {
			t.Errorf("adaptive: took %.0f units a second of the %d left, want 85%% to 100%%", a.After, res.Left)
		}
		if a.Time > f.Time {
			t.Errorf("adaptive: took %v, the fixed rate %v", a.Time, f.Time)
		}
		contains(t, out.String(), "another tenant takes 8,000 units a second of it, leaving 12,000.", "  fixed rate  ", "    adaptive  ")
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
	testCLI(t, []cliCase{
		{args: []string{"-h"}, out: "Usage: ingest [flags]"},
		{args: []string{"-help"}, out: "-client-rate int"},
		{args: []string{"-bogus"}, code: 2, err: "flag provided but not defined: -bogus"},
		{args: []string{"extra"}, code: 2, err: `unexpected argument "extra"`},
		{args: []string{"-records", "100", "extra"}, code: 2, err: `unexpected argument "extra"`},
		{args: []string{"-records", "abc"}, code: 2, err: `invalid value "abc" for flag -records`},
		{args: []string{"-records", "0"}, code: 2, err: "-records must be from 1 to 10,000,000, got 0"},
		{args: []string{"-records", "20000000"}, code: 2, err: "-records must be from 1 to 10,000,000"},
		{args: []string{"-units", "0"}, code: 2, err: "-units must be at least 1, got 0"},
		{args: []string{"-store-rate", "5"}, code: 2, err: "-store-rate must be at least a record's -units (10)"},
		{args: []string{"-client-rate", "-1"}, code: 2, err: "-client-rate must be at least 1 unit a second, got -1"},
		{args: []string{"-burst", "9"}, code: 2, err: "-burst must be at least a record's -units (10)"},
		{args: []string{"-retry", "0s"}, code: 2, err: "-retry must be a positive duration"},
		{args: []string{"-retry", "soon"}, code: 2, err: `invalid value "soon" for flag -retry`},
		{args: []string{"-records", "100", "-store-rate", "200", "-client-rate", "200", "-burst", "10"}, out: "rate-limited           100           0       1  4.95 s"},
		{args: []string{"-h"}, out: "-distributed"},
		{args: []string{"-distributed", "-processes", "0"}, code: 2, err: "-processes must be from 1 to 64, got 0"},
		{args: []string{"-distributed", "-partitions", "0"}, code: 2, err: "-partitions must be from 1 to 1024, got 0"},
		{args: []string{"-distributed", "-lease-ttl", "1ms"}, code: 2, err: "-lease-ttl must be at least 30ms, got 1ms"},
		{args: []string{"-distributed", "-burst", "10", "-partitions", "16"}, code: 2, err: "-burst must be at least -partitions (16)"},
		{args: []string{"-processes", "8"}, code: 2, err: "ingest: -processes is for the distributed mode only: add -distributed\n"},
		{args: []string{"-redis", "localhost:6379", "-processes", "2"}, code: 2, err: "ingest: -processes and -redis are for the distributed mode only: add -distributed\n"},
		{args: []string{"-h"}, out: "-shared"},
		{args: []string{"-shared", "-distributed"}, code: 2, err: "-distributed and -shared are two modes: choose one"},
		{args: []string{"-shared", "-processes", "2"}, code: 2, err: "-processes is for the distributed mode only"},
		{args: []string{"-shared", "-records", "2000"}, out: "    adaptive         2,0"},
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
			if tc.code == 2 && (o != "" || !strings.HasSuffix(e, "Run 'ingest -h' for usage.\n")) {
				t.Errorf("%q: stdout %q, stderr %q; want nothing on stdout, and where to find the usage", tc.args, o, e)
			}
		})
	}
}
