package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if v := os.Getenv(workerEnv); v != "" { // re-executed as a worker
		os.Exit(worker(context.Background(), v, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// TestShared runs three worker processes (this test binary, re-executed)
// against a server the program starts: together they are granted the limit
// of every window of the run, never more.
func TestShared(t *testing.T) {
	cfg := defaultConfig
	cfg.Limit, cfg.Window, cfg.Duration = 5, 300*time.Millisecond, 900*time.Millisecond
	var out bytes.Buffer
	res, err := run(t.Context(), &out, cfg)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !res.kept() {
		t.Fatalf("%d grants, the limit allows %d", res.Total, res.Most)
	}
	if res.Total < res.Most*2/3 {
		t.Fatalf("%d grants of the %d the limit allows: the processes did not saturate it", res.Total, res.Most)
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
	if !strings.Contains(out.String(), "Redis: ") {
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
