package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestDistributed runs the distributed mode for real (worker processes are
// this test binary, re-executed; see TestMain) at a fifth of the size: 4
// processes, 2,000 records of 10 units into a store that takes 20,000 units
// a second. None is rejected, every record is sent once and stored, the
// store's own log never saw more than its rate in a second, and its writes
// span close to the ideal (19,500 units after the burst at the shared
// 19,000/s: 1.03 s).
func TestDistributed(t *testing.T) {
	cfg := defaultConfig
	cfg.Records = 2_000
	d := defaultDist
	d.LeaseTTL = 500 * time.Millisecond
	var out bytes.Buffer
	res, err := runDistributed(t.Context(), &out, cfg, d)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Rejected != 0 || res.Sent != cfg.Records || res.Stored != cfg.Records {
		t.Errorf("sent %d, rejected %d, stored %d; want %d sent, 0 rejected, all stored", res.Sent, res.Rejected, res.Stored, cfg.Records)
	}
	if res.Busiest > cfg.StoreRate {
		t.Errorf("the store accepted %d units in one second, over its %d", res.Busiest, cfg.StoreRate)
	}
	if len(res.Workers) != d.Processes {
		t.Fatalf("%d worker reports, want %d", len(res.Workers), d.Processes)
	}
	// From the store's first write to its last: the time the shared rate
	// takes, without the workers' start (slow under the race detector).
	ideal := time.Duration(float64(cfg.Records*cfg.Units-cfg.Burst) / float64(cfg.ClientRate) * float64(time.Second))
	if res.Span > ideal+ideal/2 {
		t.Errorf("the store's writes spanned %v, want close to the ideal %v", res.Span, ideal)
	}
	want := "Redis: a local redis-server"
	if _, err := exec.LookPath("redis-server"); err != nil {
		want = "Redis: redis-server is not installed: an embedded server"
	}
	if !strings.Contains(out.String(), want) {
		t.Errorf("the output does not say which Redis it uses (%q)", want)
	}
}

// TestStartRedis: with no address, startRedis starts a redis-server when one
// is on PATH, else the embedded server, says which, and either answers.
func TestStartRedis(t *testing.T) {
	_, err := exec.LookPath("redis-server")
	installed := err == nil
	for _, path := range []string{"", t.TempDir()} { // as it is; then with no redis-server on PATH
		if path != "" {
			t.Setenv("PATH", path)
		}
		addr, stop, kind, err := startRedis("")
		if err != nil {
			t.Fatal(err)
		}
		want := "an embedded server (miniredis)"
		if path == "" && installed {
			want = "a local redis-server started for this run"
		}
		if !strings.Contains(kind, want) {
			t.Errorf("PATH %q: started %q, want %q", path, kind, want)
		}
		c := redis.NewClient(&redis.Options{Addr: addr})
		if err := c.Ping(t.Context()).Err(); err != nil {
			t.Errorf("%s: PING: %v", kind, err)
		}
		c.Close()
		stop()
	}
}
