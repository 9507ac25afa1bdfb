package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if v := os.Getenv(workerEnv); v != "" { // re-executed as a worker
		os.Exit(worker(context.Background(), v, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// TestShared runs three worker processes (this test binary, re-executed)
// against a server the program starts: together they reach the limit and
// never exceed it.
func TestShared(t *testing.T) {
	cfg := defaultConfig
	cfg.Limit, cfg.Window, cfg.Duration = 5, 300*time.Millisecond, 900*time.Millisecond
	res, out := mustRun(t, cfg)
	if !res.kept(cfg.Limit) {
		t.Fatalf("%d grants in a window of %v, over the limit %d", res.MaxInWindow, res.Measured, cfg.Limit)
	}
	if res.MaxInWindow != cfg.Limit || res.Total < 2*cfg.Limit {
		t.Fatalf("%d grants, at most %d in a window: the processes did not reach the limit %d", res.Total, res.MaxInWindow, cfg.Limit)
	}
	busy := 0
	for _, n := range res.PerProc {
		if n > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Fatalf("grants per process %v: the limit was not shared", res.PerProc)
	}
	if !strings.Contains(out, "Redis: ") {
		t.Fatal("the output does not say which server it used")
	}
}

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-h"}, 0, "Usage: shared"},
		{[]string{"-nope"}, 2, "flag provided but not defined"},
		{[]string{"extra"}, 2, "unexpected argument"},
		{[]string{"-procs", "0"}, 2, "-procs must be"},
	} {
		var stdout, stderr bytes.Buffer
		code := cli(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
			t.Errorf("shared %v: exit %d, output %q; want exit %d and %q", tc.args, code, stdout.String()+stderr.String(), tc.code, tc.want)
		}
	}
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

// TestStartRedis: startRedis starts a redis-server when one is on PATH,
// else the embedded server, says which, and either answers.
func TestStartRedis(t *testing.T) {
	_, err := exec.LookPath("redis-server")
	installed := err == nil
	for _, path := range []string{"", t.TempDir()} { // as it is; then with no redis-server on PATH
		if path != "" {
			t.Setenv("PATH", path)
		}
		addr, stop, which, err := startRedis()
		if err != nil {
			t.Fatal(err)
		}
		want := "the embedded Go server (redis-server is not installed)"
		if path == "" && installed {
			want = "a local redis-server"
		}
		if which != want {
			t.Errorf("PATH %q: started %q, want %q", path, which, want)
		}
		c := redis.NewClient(&redis.Options{Addr: addr})
		if err := c.Ping(t.Context()).Err(); err != nil {
			t.Errorf("%s: PING: %v", which, err)
		}
		c.Close()
		stop()
	}
}
