package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestPipeBound streams into rategate pipe faster than its rate for 3 s,
// stops for 1.2 s, then writes a lot at once (the case of pv#32, where pv
// let a burst through after an idle spell), and checks on the real clock:
// every byte arrives, in order; in no window of a second do more than the
// rate's bytes arrive; in no shorter window more than the burst plus the
// rate's share; and the first 3 s carry at least 98% of the rate. A token
// bucket alone would let 240 KiB into the second after the idle spell, and
// a window alone the second's 200 KiB into a quarter of it: both are caught.
func TestPipeBound(t *testing.T) {
	t.Parallel()
	const (
		rate  = 200 << 10 // bytes per second
		burst = rate / 5
	)
	first := randomBytes(rate*32/10, 1)
	second := randomBytes(rate*12/10, 2)
	realClock(t, slack, func(c *clock) {
		p := start(t, false, "pipe", "-rate", "200KiB/s", "-burst", "40KiB")
		fed := p.feed([]feedPart{{0, first}, {1200 * time.Millisecond, second}})
		if code := p.wait(t); code != 0 {
			t.Fatalf("exit status %d, stderr:\n%s", code, p.stderr.String())
		}
		if err := <-fed; err != nil {
			t.Fatal(err)
		}
		if want := append(first, second...); !bytes.Equal(p.out, want) {
			t.Fatalf("got %d bytes, not the %d written (or not in order)", len(p.out), len(want))
		}
		as := p.stamps
		for _, w := range []time.Duration{250 * time.Millisecond, time.Second} {
			bound := min(burst+int(rate*w.Seconds()), rate) // B + R·t, and R in any second
			got := maxInWindow(as, w-slack)
			t.Logf("most in a window of %v-%v: %d bytes (bound %d)", w, slack, got, bound)
			if got > bound {
				c.errorf("%d bytes in a window of %v-%v, over the bound of %d", got, w, slack, bound)
			}
		}
		t0 := as[0].at
		got := countIn(as, t0, t0+3*time.Second-slack)
		t.Logf("first 3 s: %d bytes, %.2f%% of the rate", got, float64(got)*100/(3*rate))
		if got*100 < 3*rate*98 {
			c.errorf("%d bytes in the first 3 s, under 98%% of the rate", got)
		}
		idle, ok := firstAfterGap(as, 500*time.Millisecond)
		if !ok {
			t.Fatal("no idle spell in the output")
		}
		got = countIn(as, idle, idle+time.Second-slack)
		t.Logf("the second after the idle spell: %d bytes, %.2f%% of the rate", got, float64(got)*100/rate)
		if got > rate {
			c.errorf("%d bytes in the second after the idle spell, over the rate (%d)", got, rate)
		}
	})
}

// TestPipeFiles copies FILEs in order, "-" standing for stdin.
func TestPipeFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := randomBytes(100<<10, 3), randomBytes(50<<10, 4)
	stdin := "from stdin\n"
	for name, data := range map[string][]byte{"a": a, "b": b} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := runBin(t, stdin, "pipe", "-rate", "64MiB/s", filepath.Join(dir, "a"), "-", filepath.Join(dir, "b"))
	if r.code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", r.code, r.stderr)
	}
	want := string(a) + stdin + string(b)
	if r.stdout != want {
		t.Fatalf("got %d bytes, want the %d of a, stdin, b in order", len(r.stdout), len(want))
	}
	if r.stderr != "" {
		t.Errorf("stderr is not a terminal, yet rategate wrote to it: %q", r.stderr)
	}
}

// TestPipeBadInput: bad input is exit status 2 with a message naming what
// is wrong, before anything is written.
func TestPipeBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pipe"}, "-rate is required"},
		{[]string{"pipe", "-rate", "10/s"}, "no unit"},
		{[]string{"pipe", "-rate", "fast"}, "-rate fast"},
		{[]string{"pipe", "-rate", "1KiB/s", "-burst", "2KiB"}, "-burst 2KiB is more than"},
		{[]string{"pipe", "-rate", "1KiB/s", "-burst", "0"}, "-burst 0"},
		{[]string{"pipe", "-rate", "1KiB/s", "-nope"}, "-nope"},
		{[]string{"pipe", "-rate", "1KiB/s", file, filepath.Join(dir, "missing")}, "missing"},
		{[]string{"pipe", "-rate", "1KiB/s", dir}, "is a directory"},
		{[]string{"pipe", "-rate", "1KiB/s", "-key", "k"}, "-key k needs -redis"},
		{[]string{"pipe", "-rate", "1KiB/s", "-redis", "127.0.0.1:1"}, "needs -key"},
		{[]string{"pipe", "-rate", "1KiB/s", "-redis", "redis://[bad", "-key", "k"}, "-redis redis://[bad"},
		{[]string{"nope"}, "unknown command"},
		{nil, "Usage"},
	} {
		r := runBin(t, "stdin\n", c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("rategate %q: exit status %d, stdout %q, stderr %q; want 2, nothing, and %q",
				c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// TestPipeInputIsOutput: a FILE that is also stdout is refused, so it is
// not written over (nor grown forever).
func TestPipeInputIsOutput(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	for _, args := range [][]string{{file}, {"-"}} {
		in, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		cmd := execBin(append([]string{"pipe", "-rate", "1MiB/s"}, args...)...)
		cmd.Stdin, cmd.Stdout = in, out
		var errOut strings.Builder
		cmd.Stderr = &errOut
		cmd.Run()
		in.Close()
		if code := cmd.ProcessState.ExitCode(); code != 2 || !strings.Contains(errOut.String(), "input file is output file") {
			t.Errorf("pipe %q into itself: exit status %d, stderr %q", args, code, errOut.String())
		}
	}
	if got, _ := os.ReadFile(file); string(got) != "data\n" {
		t.Errorf("the file now holds %q", got)
	}
}

// TestHelp: -h prints the usage on stdout and exits 0.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, c := range [][]string{{"-h"}, {"pipe", "-h"}, {"lines", "-h"}, {"run", "-h"}} {
		r := runBin(t, "", c...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage") || r.stderr != "" {
			t.Errorf("rategate %q: exit status %d, stdout %q, stderr %q", c, r.code, r.stdout, r.stderr)
		}
	}
}

// TestRedisUnreachable: a Redis that does not answer is an error (exit
// status 1, 255 for run) that names it, and nothing passes.
func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	redis := []string{"-redis", "127.0.0.1:1", "-key", "k"}
	for _, c := range []struct {
		args []string
		code int
	}{
		{append([]string{"pipe", "-rate", "1KiB/s"}, redis...), 1},
		{append([]string{"lines", "-rate", "1/s"}, redis...), 1},
		{append(append([]string{"run", "-rate", "1/s"}, redis...), "--", "echo"), 255},
	} {
		t.Run(c.args[0], func(t *testing.T) {
			t.Parallel()
			r := runBin(t, "x\n", c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, "127.0.0.1:1") || r.stdout != "" {
				t.Errorf("rategate %q: exit status %d, stdout %q, stderr %q; want %d", c.args, r.code, r.stdout, r.stderr, c.code)
			}
		})
	}
}

// TestPipeProgress runs rategate pipe with stderr on a terminal (script(1)
// gives it one) and checks the progress line: rewritten in place, with the
// size, and ended by a newline when the copy is done; -q turns it off.
func TestPipeProgress(t *testing.T) {
	t.Parallel()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) is not on PATH: no terminal to show the progress line on")
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	data := randomBytes(300<<10, 5)
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, quiet := range []bool{false, true} {
		q := ""
		if quiet {
			q = "-q "
		}
		line := fmt.Sprintf("%s pipe %s-rate 300KiB/s %s > %s", bin, q, in, out)
		term, err := exec.Command(script, "-qec", line, "/dev/null").Output()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes out of %d", line, len(got), len(data))
		}
		shown := string(term)
		switch {
		case quiet && shown != "":
			t.Errorf("with -q, the terminal shows %q", shown)
		case !quiet && (!strings.HasPrefix(shown, "\r") || !strings.Contains(shown, "300.0 KiB / 300.0 KiB (100%)") || !strings.HasSuffix(strings.TrimRight(shown, "\r\n"), "\x1b[K")):
			t.Errorf("the terminal shows %q, want progress lines rewritten in place ending at 300.0 KiB (100%%)", shown)
		}
	}
}
