package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// job is one line of run's input and the command it runs.
type job struct {
	seq  int // the line's number, from 1
	line string
	argv []string
}

// runner runs the jobs of one rategate run and keeps their account.
type runner struct {
	cfg *runConfig
	log io.WriteCloser // the joblog, or nil

	// stop ends on an interrupt or an error: no job starts after it.
	stop   context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	queued    map[int]*job        // submitted, not started
	running   map[int]*os.Process // started, not ended
	signal    syscall.Signal      // the first interrupt, if any
	err       error               // the first error other than a failed job
	succeeded int
	failed    int

	outMu sync.Mutex // held while one job's output is written
}

func newRunner(cfg *runConfig, log io.WriteCloser) *runner {
	r := &runner{cfg: cfg, log: log, queued: map[int]*job{}, running: map[int]*os.Process{}}
	r.stop, r.cancel = context.WithCancel(context.Background())
	return r
}

func (r *runner) closeLog() {
	if r.log != nil {
		r.log.Close()
	}
	r.cancel()
}

// queue records the job of line seq as waiting to start.
func (r *runner) queue(seq int, line string) *job {
	j := &job{seq: seq, line: line, argv: expand(r.cfg.argv, line)}
	r.mu.Lock()
	r.queued[seq] = j
	r.mu.Unlock()
	return j
}

// expand replaces each "{}" in argv by line, or appends line when there is none.
func expand(argv []string, line string) []string {
	out := make([]string, len(argv), len(argv)+1)
	found := false
	for i, a := range argv {
		if strings.Contains(a, "{}") {
			found = true
			a = strings.ReplaceAll(a, "{}", line)
		}
		out[i] = a
	}
	if !found {
		out = append(out, line)
	}
	return out
}

// fail records err as the run's error and stops starting jobs.
func (r *runner) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.mu.Unlock()
	r.cancel()
}

func (r *runner) fatal() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// runJob runs j's command and waits for it to end.
func (r *runner) runJob(j *job) {
	r.mu.Lock()
	delete(r.queued, j.seq)
	r.mu.Unlock()

	var out, errOut bytes.Buffer
	stdout := &countWriter{w: &out}
	cmd := exec.Command(j.argv[0], j.argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, &errOut
	if r.cfg.ungroup {
		stdout.w, cmd.Stderr = os.Stdout, os.Stderr
	}
	ownProcessGroup(cmd)
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		r.mu.Lock()
		r.running[j.seq] = cmd.Process
		r.mu.Unlock()
		err = cmd.Wait()
		r.mu.Lock()
		delete(r.running, j.seq)
		r.mu.Unlock()
	}
	took := time.Since(start)
	exitval, sig := outcome(err)
	r.outMu.Lock()
	os.Stdout.Write(out.Bytes())
	os.Stderr.Write(errOut.Bytes())
	if exitval == 127 || exitval == 126 {
		if _, ok := err.(*exec.ExitError); !ok {
			fmt.Fprintf(os.Stderr, "rategate run: line %d: %v\n", j.seq, err)
		}
	}
	r.outMu.Unlock()
	r.finished(j, start, took, stdout.n, exitval, sig)
}

// outcome returns a job's exit value and the signal that killed it, as
// GNU parallel's joblog gives them: 127 and 126 when the command could not
// be found or run, -1 with the signal when a signal killed it.
func outcome(err error) (exitval, sig int) {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -1, int(ws.Signal())
		}
		return ee.ExitCode(), 0
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return 127, 0
	}
	return 126, 0
}

func (r *runner) finished(j *job, start time.Time, took time.Duration, received int64, exitval, sig int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if exitval == 0 && sig == 0 {
		r.succeeded++
	} else {
		r.failed++
	}
	if r.log == nil {
		return
	}
	cmd := make([]string, len(j.argv))
	for i, a := range j.argv {
		cmd[i] = shellQuote(a)
	}
	_, err := fmt.Fprintf(r.log, "%d\t:\t%.3f\t%.3f\t0\t%d\t%d\t%d\t%s\n", j.seq,
		float64(start.UnixMilli())/1e3, took.Seconds(), received, exitval, sig, strings.Join(cmd, " "))
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("-joblog: %w", err)
	}
}

// signalJobs sends s to every running job's process group.
func (r *runner) signalJobs(s syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.running {
		signalGroup(p, s)
	}
}

// report writes the summary and returns run's exit status.
func (r *runner) report(read readResult, waitErr error) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if waitErr != nil && r.signal == 0 && r.err == nil {
		r.err = waitErr // a keyed job that could not start: its limiter failed
	}
	notRun := slices.Sorted(mapKeys(r.queued))
	if r.failed > 0 || len(notRun) > 0 || r.signal != 0 || r.err != nil {
		fmt.Fprintf(os.Stderr, "rategate run: %d jobs: %d succeeded, %d failed, %d did not run\n",
			read.lines, r.succeeded, r.failed, len(notRun))
	}
	for _, seq := range notRun {
		fmt.Fprintf(os.Stderr, "rategate run: did not run: line %d: %s\n", seq, r.queued[seq].line)
	}
	if !read.all {
		fmt.Fprintf(os.Stderr, "rategate run: stdin was not read after line %d: no later line ran\n", read.lines)
	}
	switch {
	case r.signal != 0:
		return 128 + int(r.signal)
	case r.err != nil:
		fmt.Fprintf(os.Stderr, "rategate run: %v\n", r.err)
		return exitOther
	case r.failed > 100:
		return 101
	}
	return r.failed
}

func mapKeys(m map[int]*job) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// keyFunc returns the key of a line, for -per-key.
type keyFunc func(line string) string

func parseKeyFunc(s string) (keyFunc, error) {
	if s == "host" {
		return urlHost, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return nil, usagef("-per-key %s: want a field number (1 is the first field) or host", s)
	}
	return func(line string) string {
		if f := strings.Fields(line); n <= len(f) {
			return f[n-1]
		}
		return ""
	}, nil
}

// urlHost returns the host name of the first field of line that is a URL
// with a host, in lower case, or "".
func urlHost(line string) string {
	for _, f := range strings.Fields(line) {
		if !strings.Contains(f, "://") {
			continue
		}
		if u, err := url.Parse(f); err == nil && u.Host != "" {
			return strings.ToLower(u.Hostname())
		}
	}
	return ""
}
