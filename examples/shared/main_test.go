package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rategate/rategate/internal/clitest"
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
	res, out := clitest.MustRun(t, run, cfg)
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
