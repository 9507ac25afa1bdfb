package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var small = config{Rate: 10, Burst: 3, Calls: 8, Clients: 2, Messages: 4, UploadRate: 40, Wait: time.Second}

// The plain client is refused what is over the quota; the grpclimit client
// makes as many calls and is refused none; the upload is paced and counted
// whole; the server served no tenant more than its bucket allows.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	start := time.Now()
	res, err := run(t.Context(), &out, small)
	if err != nil {
		t.Fatal(err)
	}
	// 8 calls at once against a burst of 3 at 10 a second: about 5
	// refused (fewer only if the machine stalled the client).
	if res.EagerServed+res.EagerRefused != 8 || res.EagerRefused < 1 {
		t.Errorf("eager client: %d served, %d refused", res.EagerServed, res.EagerRefused)
	}
	if res.PoliteServed != 8 || res.PoliteRefused != 0 || res.PoliteLost != 0 {
		t.Errorf("polite client: %d served, %d refused, %d lost; want 8, 0, 0", res.PoliteServed, res.PoliteRefused, res.PoliteLost)
	}
	if res.Refused["polite"] != 0 {
		t.Errorf("the server refused the polite client %d times", res.Refused["polite"])
	}
	for _, tenant := range []string{"eager", "polite"} {
		if res.Served[tenant] > res.MaxServed {
			t.Errorf("tenant %s served %d calls, over the bound %d", tenant, res.Served[tenant], res.MaxServed)
		}
	}
	if res.Uploaded != 4 {
		t.Errorf("the server counted %d uploaded messages, want 4", res.Uploaded)
	}
	// The opening and 4 messages take 5 grants of a 40/s pacer: 100 ms.
	if elapsed := time.Since(start); elapsed < 100*time.Millisecond {
		t.Errorf("the run took %v, under the upload's pacing", elapsed)
	}
	for _, want := range []string{"eager client (plain gRPC): 8 calls", "RetryInfo", `ratelimit: "default";r=0;t=`,
		"polite client (grpclimit.Client, 2 goroutines): 8 calls, 8 served, 0 refused", "the server counted 4", "tenant polite 8 served, 0 refused"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
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
		{[]string{"-h"}, 0, "Usage: grpc [flags]"},
		{[]string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-rate", "many"}, 2, `invalid value "many" for flag -rate`},
		{[]string{"-rate", "0"}, 2, "-rate must be positive"},
		{[]string{"-wait", "-1s"}, 2, "-wait must be positive"},
	} {
		var stdout, stderr bytes.Buffer
		code := cli(t.Context(), tc.args, &stdout, &stderr)
		said := stderr.String()
		if tc.code == 0 {
			said = stdout.String()
		}
		if code != tc.code || !strings.Contains(said, tc.say) {
			t.Errorf("grpc %q: exit %d, said %q; want exit %d and %q", tc.args, code, said, tc.code, tc.say)
		}
		if strings.Contains(stdout.String(), "served") {
			t.Errorf("grpc %q ran: %q", tc.args, stdout.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := cli(t.Context(), []string{"-calls", "4", "-messages", "2"}, &stdout, &stderr); code != 0 {
		t.Errorf("a run exited %d: %s", code, stderr.String())
	}
}
