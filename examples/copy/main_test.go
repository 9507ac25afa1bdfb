package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestCopy copies 256 KiB at 64 KiB/s with a 16 KiB burst on synctest's
// clock: it takes exactly (256 - 16) / 64 s, every byte arrives, and every
// progress line stays within the bound and near it.
func TestCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			size  = 256 << 10
			rate  = 64 << 10
			burst = 16 << 10
		)
		in := make([]byte, size)
		for i := range in {
			in[i] = byte(i * 31 / 7)
		}
		var out, progress bytes.Buffer
		cfg := config{In: bytes.NewReader(in), Size: size, Out: &out, Rate: limiter.Per(rate, time.Second), Burst: burst, Every: 500 * time.Millisecond}
		res, err := run(t.Context(), &progress, cfg)
		t.Log("\n" + progress.String())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), in) || res.Bytes != size {
			t.Fatalf("copied %d bytes (%d out), want the %d in", res.Bytes, out.Len(), size)
		}
		if want := 3750 * time.Millisecond; res.Elapsed != want {
			t.Errorf("the copy took %v, want %v", res.Elapsed, want)
		}
		// A line every 500 ms, 0.5 s to 3.5 s, and one at the end.
		if len(res.Lines) != 8 {
			t.Fatalf("%d progress lines, want 8", len(res.Lines))
		}
		// The copy moves in pieces of 100 ms of rate: a line may be one
		// piece short of the bound, never over it.
		for _, p := range res.Lines {
			allowed := min(size, burst+int64(rate*p.Elapsed.Seconds()))
			if p.Bytes > allowed || p.Bytes < allowed-rate/10 {
				t.Errorf("at %v: %d bytes, want at most %d and at most 100 ms of rate fewer", p.Elapsed, p.Bytes, allowed)
			}
			if p.Elapsed >= 2*time.Second && !p.Done() && (p.Rate < 0.95*rate || p.Rate > 1.05*rate) {
				t.Errorf("at %v: current rate %.0f B/s, want about %d", p.Elapsed, p.Rate, rate)
			}
		}
		last := strings.TrimSpace(progress.String()[strings.LastIndex(strings.TrimSpace(progress.String()), "\n")+1:])
		if !strings.HasPrefix(last, "256.0 KiB / 256.0 KiB (100%)") || !strings.Contains(last, "done in 3.75s") {
			t.Errorf("last line %q", last)
		}
	})
}

// TestCopyCancel: ending the context stops a copy that is waiting.
func TestCopyCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		var progress bytes.Buffer
		cfg := config{In: bytes.NewReader(make([]byte, 1<<20)), Out: &bytes.Buffer{}, Rate: limiter.Per(1<<10, time.Second), Burst: 1 << 10, Every: time.Second}
		res, err := run(ctx, &progress, cfg)
		if !errors.Is(err, context.DeadlineExceeded) || res.Elapsed != 2*time.Second {
			t.Fatalf("run = %v after %v; want context.DeadlineExceeded after 2s", err, res.Elapsed)
		}
	})
}

func TestRunBadConfig(t *testing.T) {
	if _, err := run(t.Context(), &bytes.Buffer{}, config{}); err == nil {
		t.Error("run with a zero config succeeded")
	}
}

// TestCLI runs command lines as a user would type them. Bad ones fail with
// status 2 and a message that says what was wrong, before any file is
// opened or created; a failed copy has status 1; and no case writes over a
// file the user named except with the input's bytes.
func TestCLI(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.log")
	data := bytes.Repeat([]byte("a line of the log\n"), 5000) // 90,000 bytes
	keep := filepath.Join(dir, "keep.log")
	const precious = "precious: must survive every refused command line"
	for name, content := range map[string][]byte{in: data, keep: []byte(precious)} {
		if err := os.WriteFile(name, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	piped := "from a pipe\n"
	for _, tc := range []struct {
		args     []string
		terminal bool   // stdin is a terminal; else it holds piped
		code     int    // exit status
		out, err string // in stdout, in stderr
	}{
		{args: []string{"-h"}, out: "Usage: copy [flags] [input]"},
		{args: []string{"-help"}, out: "-demo\n"},
		{args: []string{"-bogus"}, code: 2, err: "flag provided but not defined: -bogus"},
		{args: []string{"-o", keep, "a", "b"}, code: 2, err: `2 arguments ["a" "b"]: copy takes one input; name the output with -o`},
		{args: []string{"-rate", "5/min", "-o", keep}, code: 2, err: `bad -rate: pipe: parse byte rate "5/min": "5" has no unit: write 5B for bytes`},
		{args: []string{"-rate", "5/fortnight"}, code: 2, err: `"5" has no unit`},
		{args: []string{"-rate", "5KB/fortnight"}, code: 2, err: `unknown unit of time "fortnight": want s, ms, min, h, d or a duration such as 500ms`},
		{args: []string{"-rate", "-1"}, code: 2, err: "a size must be positive"},
		{args: []string{"-rate", "0"}, code: 2, err: "a size must be positive"},
		{args: []string{"-rate", "2MiB"}, code: 2, err: "no unit of time: want a size per unit of time, such as 2MiB/s"},
		{args: []string{"-burst", "0"}, code: 2, err: `bad -burst: pipe: parse size "0": a size must be positive`},
		{args: []string{"-burst", "64K"}, code: 2, err: `ambiguous unit "K": write kB (powers of 1000) or KiB (powers of 1024)`},
		{args: []string{"-every", "0s"}, code: 2, err: "-every must be a positive duration such as 250ms, got 0s"},
		{args: []string{"-every", "often"}, code: 2, err: `invalid value "often" for flag -every`},
		{args: []string{"-o", keep}, terminal: true, code: 2, err: "no input: name a file to copy (- for stdin), or pipe data in"},
		{args: []string{"-demo", "-o", keep}, code: 2, err: "-demo copies generated data and discards it: it takes no input and no -o"},
		{args: []string{"-demo", in}, code: 2, err: "it takes no input and no -o"},
		{args: []string{"-o", keep, filepath.Join(dir, "missing")}, code: 1, err: "no such file or directory"},
		{args: []string{"-o", keep, dir}, code: 1, err: dir + " is a directory: copy copies one file"},
		{args: []string{"-o", keep, keep}, code: 1, err: "-o " + keep + " is the input file: copying a file onto itself would destroy it"},
		// What works: stdin when it is piped (with or without "-"), "-"
		// even from a terminal, any case of unit, a file to stdout.
		{args: []string{"-rate", "1mib/s", "-o", "-"}, out: piped, err: "12 B, "},
		{args: []string{"-o", "-", "-"}, terminal: true, out: piped},
		{args: []string{"-rate", "64KiB/s", "-o", "-", in}, out: string(data), err: "87.9 KiB / 87.9 KiB (100%)"},
		{args: []string{"-demo", "-rate", "4MiB/s"}, err: "3.0 MiB / 3.0 MiB (100%), 4.1 MiB/s (avg 4.1 MiB/s), done in 734ms"},
	} {
		synctest.Test(t, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			e := env{Stdin: strings.NewReader(piped), StdinTerminal: tc.terminal, Stdout: &stdout, Stderr: &stderr}
			code := cli(t.Context(), tc.args, e)
			if code != tc.code || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.err) {
				t.Errorf("copy %q: status %d, stdout %.100q, stderr %q; want status %d, %q in stdout, %q in stderr",
					tc.args, code, stdout.String(), stderr.String(), tc.code, tc.out, tc.err)
			}
			if tc.code == 2 && (stdout.Len() > 0 || !strings.HasSuffix(stderr.String(), "Run 'copy -h' for usage.\n")) {
				t.Errorf("copy %q: stdout %q, stderr %q; want nothing on stdout and a pointer to -h", tc.args, stdout.String(), stderr.String())
			}
			if tc.code != 0 && strings.Contains(stderr.String(), "(avg ") {
				t.Errorf("copy %q: stderr %q: a progress line before the error", tc.args, stderr.String())
			}
		})
		if got, err := os.ReadFile(keep); err != nil || string(got) != precious {
			t.Fatalf("after copy %q, %s holds %.40q (%v); want it untouched", tc.args, keep, got, err)
		}
	}
}

// TestCLIStdinToFile is issue 18's data loss, run literally:
// `cat big.log | copy -rate 2MB/s -o copy.log` copies stdin into copy.log.
func TestCLIStdinToFile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "copy.log")
	if err := os.WriteFile(out, []byte("an old copy, to be replaced"), 0o644); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	synctest.Test(t, func(t *testing.T) {
		var stderr bytes.Buffer
		e := env{Stdin: bytes.NewReader(big), Stdout: &bytes.Buffer{}, Stderr: &stderr}
		if code := cli(t.Context(), []string{"-rate", "2MB/s", "-o", out}, e); code != 0 {
			t.Fatalf("status %d, stderr %q", code, stderr.String())
		}
		// 1 MiB at 2 MB/s after a 64 KiB burst: (1,048,576 - 65,536) / 2,000,000
		// = 0.49 s, so a line at 250 ms and one at the end, on average
		// 1,048,576 B / 0.49 s = 2.0 MiB/s.
		// The closing line says so, though the size of stdin is not known.
		if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "1.0 MiB, ") || !strings.HasSuffix(lines[1], "(avg 2.0 MiB/s), done in 492ms") {
			t.Errorf("progress %q; want a line at 250 ms and a closing one of 1.0 MiB at 2.0 MiB/s on average, done in 492ms", stderr.String())
		}
	})
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("copy.log holds %d bytes (%v); want the 1 MiB piped in", len(got), err)
	}
}

// TestIsTerminal: copy reads, without "-", a piped stdin or a file, but not
// a terminal or another device such as /dev/null.
func TestIsTerminal(t *testing.T) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	file, err := os.Open(filepath.Join(t.TempDir(), ".."))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if !isTerminal(null) || isTerminal(file) || isTerminal(r) {
		t.Errorf("isTerminal: %s %v, a directory %v, a pipe %v; want true, false, false", os.DevNull, isTerminal(null), isTerminal(file), isTerminal(r))
	}
}

// TestCLIStdinIsOutput: `copy -o x.log < x.log` would truncate x.log before
// reading it; copy refuses, with or without "-".
func TestCLIStdinIsOutput(t *testing.T) {
	name := filepath.Join(t.TempDir(), "x.log")
	if err := os.WriteFile(name, []byte("the only copy"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"-o", name}, {"-o", name, "-"}} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		code := cli(t.Context(), args, env{Stdin: f, Stdout: &bytes.Buffer{}, Stderr: &stderr})
		f.Close()
		if want := "-o " + name + " is the input file"; code != 1 || !strings.Contains(stderr.String(), want) {
			t.Errorf("copy %q < %s: status %d, stderr %q; want 1 and %q", args, name, code, stderr.String(), want)
		}
		if got, err := os.ReadFile(name); err != nil || string(got) != "the only copy" {
			t.Fatalf("after copy %q < %s, it holds %q (%v)", args, name, got, err)
		}
	}
}
