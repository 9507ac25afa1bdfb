package clitest

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// prog is a program for the tests: it sleeps a second (virtual, in Run's
// bubble), says hello, and refuses "bad" as a usage error and "fail" as a
// failure.
func prog(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch strings.Join(args, " ") {
	case "bad":
		fmt.Fprint(stderr, "prog: bad\nRun 'prog -h' for usage.\n")
		return 2
	case "fail":
		fmt.Fprintln(stderr, "prog: it failed")
		return 1
	}
	start := time.Now()
	time.Sleep(time.Second)
	fmt.Fprintf(stdout, "hello after %v\n", time.Since(start))
	return 0
}

func TestRun(t *testing.T) {
	start := time.Now()
	Run(t, "prog", prog, []Case{
		{Args: nil, Code: 0, Out: "hello after 1s\n"}, // the bubble's clock
		{Args: []string{"bad"}, Code: 2, Err: "prog: bad"},
		{Args: []string{"fail"}, Code: 1, Err: "it failed"},
	})
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Run took %v of real time: not in a bubble", d)
	}
}

// TestCheck: what Run reports for each way a case can go wrong.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		c                    Case
		code                 int
		stdout, stderr, want string
	}{
		{Case{Code: 0, Out: "hello"}, 0, "hello\n", "", ""},
		{Case{Code: 0, Out: "hello"}, 1, "hello\n", "", "status 1"},
		{Case{Code: 0, Out: "bye"}, 0, "hello\n", "", `want status 0, "bye" in stdout`},
		{Case{Code: 1, Err: "failed"}, 1, "", "it broke", `"failed" in stderr`},
		{Case{Code: 2, Err: "bad"}, 2, "", "prog: bad\nRun 'prog -h' for usage.\n", ""},
		{Case{Code: 2, Err: "bad"}, 2, "", "prog: bad\n", "a pointer to -h"},
		{Case{Code: 2, Err: "bad"}, 2, "ran anyway", "prog: bad\nRun 'prog -h' for usage.\n", "nothing on stdout"},
	} {
		got := check("prog", tc.c, tc.code, tc.stdout, tc.stderr)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("check(%+v, %d, %q, %q) = %q, want %q", tc.c, tc.code, tc.stdout, tc.stderr, got, tc.want)
		}
	}
}

func TestMustRun(t *testing.T) {
	res, out := MustRun(t, func(ctx context.Context, w io.Writer, n int) (int, error) {
		fmt.Fprintf(w, "doubling %d", n)
		return 2 * n, ctx.Err()
	}, 21)
	if res != 42 || out != "doubling 21" {
		t.Errorf("MustRun = %d, %q; want 42, \"doubling 21\"", res, out)
	}
}
