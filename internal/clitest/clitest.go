package clitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
)

// Case is one command line and what it must do.
type Case struct {
	Args []string
	Code int    // the exit status
	Out  string // in stdout ("" for anything)
	Err  string // in stderr ("" for anything)
}

// CLI is a program's main without the process around it: it runs the
// program with the arguments args (without the program's name) and returns
// its exit status.
type CLI func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Run runs each case through cli, named name in its messages, in a
// synctest bubble, and reports a case whose status or output is not as it
// says; a case with status 2 must also print nothing on stdout and end
// stderr with "Run 'name -h' for usage.".
func Run(t *testing.T, name string, cli CLI, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		synctest.Test(t, func(t *testing.T) {
			t.Helper()
			var stdout, stderr bytes.Buffer
			code := cli(t.Context(), tc.Args, &stdout, &stderr)
			if problem := check(name, tc, code, stdout.String(), stderr.String()); problem != "" {
				t.Error(problem)
			}
		})
	}
}

// check returns what is wrong with a run of tc, or "".
func check(name string, tc Case, code int, stdout, stderr string) string {
	if code != tc.Code || !strings.Contains(stdout, tc.Out) || !strings.Contains(stderr, tc.Err) {
		return fmt.Sprintf("%s %q: status %d, stdout %q, stderr %q; want status %d, %q in stdout, %q in stderr",
			name, tc.Args, code, stdout, stderr, tc.Code, tc.Out, tc.Err)
	}
	if pointer := fmt.Sprintf("Run '%s -h' for usage.\n", name); tc.Code == 2 && (stdout != "" || !strings.HasSuffix(stderr, pointer)) {
		return fmt.Sprintf("%s %q: stdout %q, stderr %q; want nothing on stdout and a pointer to -h", name, tc.Args, stdout, stderr)
	}
	return ""
}

// Contains reports each of lines that out does not contain.
func Contains(t *testing.T, out string, lines ...string) {
	t.Helper()
	for _, line := range lines {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q", line)
		}
	}
}

// MustRun runs a program's work, run(t.Context(), w, cfg), with w a buffer,
// logs what it printed, and stops the test if it failed. It returns run's
// result and what it printed.
func MustRun[C, R any](t *testing.T, run func(ctx context.Context, w io.Writer, cfg C) (R, error), cfg C) (R, string) {
	t.Helper()
	var out bytes.Buffer
	res, err := run(t.Context(), &out, cfg)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res, out.String()
}
