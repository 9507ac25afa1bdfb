package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A job's start is stamped by the job itself, after rategate has forked and
// executed it (the test binary, tens of megabytes under -race): a few
// milliseconds after its permit, up to tens more when the machine is busy.
// The real-clock checks of run allow this much for it (see slack).
const jobSlack = 100 * time.Millisecond

func jobLines(prefix string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s%d\n", prefix, i)
	}
	return b.String()
}

// runJobs runs rategate run with args, the test binary as the job (sleeping
// d), on input; it returns the result and the jobs' log.
func runJobs(t *testing.T, input string, d time.Duration, args ...string) (runResult, []jobEvent) {
	t.Helper()
	return startJobs(t, input, d, args...).wait(t)
}

// jobsRun is a rategate run started by startJobs.
type jobsRun struct {
	cmd         *exec.Cmd
	log         string
	out, errOut bytes.Buffer
}

func startJobs(t *testing.T, input string, d time.Duration, args ...string) *jobsRun {
	t.Helper()
	r := &jobsRun{log: filepath.Join(t.TempDir(), "jobs")}
	env, argv := jobCommand(t, r.log, d)
	r.cmd = execBin(append(append([]string{"run"}, args...), argv...)...)
	r.cmd.Env = env
	r.cmd.Stdin = strings.NewReader(input)
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errOut
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *jobsRun) wait(t *testing.T) (runResult, []jobEvent) {
	t.Helper()
	r.cmd.Wait()
	return runResult{r.cmd.ProcessState.ExitCode(), r.out.String(), r.errOut.String()}, readJobLog(t, r.log)
}

// starts returns the jobs' start instants relative to the first, as
// arrivals, in order.
func starts(evs []jobEvent, keep func(line string) bool) []arrival {
	var as []arrival
	var t0 time.Time
	for _, e := range evs {
		if !e.start || !keep(e.line) {
			continue
		}
		if t0.IsZero() {
			t0 = e.at
		}
		as = append(as, arrival{e.at.Sub(t0), 1})
	}
	return as
}

// mostRunning returns the most jobs running at once in the log.
func mostRunning(evs []jobEvent) int {
	most, n := 0, 0
	for _, e := range evs {
		if e.start {
			n++
		} else {
			n--
		}
		most = max(most, n)
	}
	return most
}

func all(string) bool { return true }

// checkRan checks that every line of input ran exactly once, each job's
// output arriving whole.
func checkRan(t *testing.T, r runResult, evs []jobEvent, input string) {
	t.Helper()
	var want, got, out []string
	want = append(want, strings.Split(strings.TrimSuffix(input, "\n"), "\n")...)
	for _, e := range evs {
		if e.start {
			got = append(got, e.line)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		out = append(out, strings.TrimPrefix(l, "out "))
	}
	slices.Sort(want)
	slices.Sort(got)
	slices.Sort(out)
	if !slices.Equal(got, want) || !slices.Equal(out, want) {
		t.Errorf("jobs started %q and wrote %q; want each of %q once", got, out, want)
	}
}

// TestRunJobs: at most -j jobs run at once, and -j of them do.
func TestRunJobs(t *testing.T) {
	t.Parallel()
	input := jobLines("job ", 8)
	r, evs := runJobs(t, input, 300*time.Millisecond, "-j", "2", "-rate", "100/s")
	if r.code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", r.code, r.stderr)
	}
	checkRan(t, r, evs, input)
	if got := mostRunning(evs); got != 2 {
		t.Errorf("at most %d jobs ran at once, want -j 2", got)
	}
}

// TestRunRate: job starts keep the rate, on the real clock, and reach it.
func TestRunRate(t *testing.T) {
	t.Parallel()
	const rate = 20
	input := jobLines("job ", rate*3)
	realClock(t, jobSlack, func(c *clock) {
		r, evs := runJobs(t, input, 50*time.Millisecond, "-j", "4", "-rate", fmt.Sprintf("%d/s", rate))
		if r.code != 0 {
			t.Fatalf("exit status %d, stderr:\n%s", r.code, r.stderr)
		}
		checkRan(t, r, evs, input)
		as := starts(evs, all)
		for _, w := range []time.Duration{250 * time.Millisecond, time.Second} {
			bound := min(rate, 2+int(rate*w.Seconds())) // the default burst is 2
			got := maxInWindow(as, w-jobSlack)
			t.Logf("most starts in a window of %v-%v: %d (bound %d)", w, jobSlack, got, bound)
			if got > bound {
				c.errorf("%d starts in a window of %v-%v, over the bound of %d", got, w, jobSlack, bound)
			}
		}
		got := countIn(as, 0, 3*time.Second)
		t.Logf("first 3 s: %d starts, %.1f%% of the rate", got, float64(got)*100/(3*rate))
		if got*100 < 3*rate*98 {
			c.errorf("%d starts in the first 3 s, under 98%% of the rate", got)
		}
	})
}

// TestRunPerKey: with -per-key each key keeps its own rate, and a key at
// its rate does not hold up the others.
func TestRunPerKey(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "a %d\nb %d\nc %d\n", i, i, i)
	}
	input := b.String()
	realClock(t, jobSlack, func(c *clock) {
		r, evs := runJobs(t, input, 20*time.Millisecond, "-j", "8", "-rate", "5/s", "-per-key", "1")
		if r.code != 0 {
			t.Fatalf("exit status %d, stderr:\n%s", r.code, r.stderr)
		}
		checkRan(t, r, evs, input)
		for _, key := range []string{"a", "b", "c"} {
			as := starts(evs, func(l string) bool { return strings.HasPrefix(l, key+" ") })
			if got := maxInWindow(as, time.Second-jobSlack); got > 5 {
				c.errorf("key %s: %d starts in a window of 1s-%v, over 5", key, got, jobSlack)
			}
		}
		if got := countIn(starts(evs, all), 0, time.Second-jobSlack); got < 15 {
			c.errorf("%d starts in the first second, want the 3 keys' 5 each", got)
		}
	})
}

// TestRunExitStatus: the exit status counts the failed jobs, as GNU
// parallel's does; the joblog has a line per job.
func TestRunExitStatus(t *testing.T) {
	t.Parallel()
	joblog := filepath.Join(t.TempDir(), "joblog")
	input := "ok 1\nfail 2\nok 3\nfail 4\nfail 5\n"
	r, _ := runJobs(t, input, 0, "-j", "3", "-joblog", joblog)
	if r.code != 3 || !strings.Contains(r.stderr, "5 jobs: 2 succeeded, 3 failed, 0 did not run") {
		t.Errorf("exit status %d, stderr %q; want 3 and the summary", r.code, r.stderr)
	}
	log, err := os.ReadFile(joblog)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(log), "\n"), "\n")
	if len(lines) != 6 || lines[0] != "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand" {
		t.Fatalf("joblog:\n%s", log)
	}
	exits := map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		if len(f) != 9 || f[1] != ":" || f[5] != fmt.Sprint(len("out ok 1\n")) && f[5] != fmt.Sprint(len("out fail 2\n")) {
			t.Fatalf("joblog line %q", l)
		}
		exits[f[0]] = f[6]
	}
	if want := map[string]string{"1": "0", "2": "3", "3": "0", "4": "3", "5": "3"}; fmt.Sprint(exits) != fmt.Sprint(want) {
		t.Errorf("joblog exit values %v, want %v", exits, want)
	}

	// An existing joblog is not written over, and nothing runs.
	r, evs := runJobs(t, input, 0, "-joblog", joblog)
	if r.code != 2 || !strings.Contains(r.stderr, "exists") || len(evs) != 0 {
		t.Errorf("with an existing -joblog: exit status %d, stderr %q, %d job events", r.code, r.stderr, len(evs))
	}
	if again, _ := os.ReadFile(joblog); !bytes.Equal(again, log) {
		t.Errorf("the existing joblog was changed")
	}
}

// TestRunManyFailures runs 102 jobs at once: not beside the real-clock
// tests, which it would slow down.
func TestRunManyFailures(t *testing.T) {
	r := runBin(t, jobLines("", 102), "run", "-j", "8", "--", "false")
	if r.code != 101 {
		t.Errorf("102 failed jobs: exit status %d, want 101", r.code)
	}
	r = runBin(t, "a\nb\n", "run", "--", "/nonexistent/command", "{}")
	if r.code != 2 || !strings.Contains(r.stderr, "/nonexistent/command") {
		t.Errorf("a command that does not exist: exit status %d, stderr %q; want 2 (two failed jobs) and why", r.code, r.stderr)
	}
}

func TestRunBadInput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "no COMMAND"},
		{[]string{"run", "-j", "0", "--", "true"}, "-j 0"},
		{[]string{"run", "-rate", "fast", "--", "true"}, "-rate fast"},
		{[]string{"run", "-per-key", "1", "--", "true"}, "-per-key needs -rate"},
		{[]string{"run", "-rate", "1/s", "-per-key", "0", "--", "true"}, "-per-key 0"},
		{[]string{"run", "-rate", "1/s", "-per-key", "url", "--", "true"}, "-per-key url"},
		{[]string{"run", "-rate", "5/s", "-burst", "6", "--", "true"}, "-burst 6"},
		{[]string{"run", "-key", "k", "--", "true"}, "needs -redis"},
	} {
		r := runBin(t, "line\n", c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("rategate %q: exit status %d, stdout %q, stderr %q; want 2, nothing, and %q",
				c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}

// interruptible starts rategate run, as a shell starts a pipeline, in a
// process group of its own, and waits until n jobs have started.
func interruptible(t *testing.T, n int, d time.Duration, args ...string) (cmd *exec.Cmd, log string, out, errOut *bytes.Buffer) {
	t.Helper()
	log = filepath.Join(t.TempDir(), "jobs")
	env, argv := jobCommand(t, log, d)
	cmd = execBin(append(append([]string{"run"}, args...), argv...)...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(jobLines("job ", 10))
	out, errOut = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if len(starts(readJobLog(t, log), all)) >= n {
			return cmd, log, out, errOut
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%d jobs did not start in 10 s", n)
		}
	}
}

// TestRunInterrupt: Ctrl-C (SIGINT to the terminal's process group) stops
// the starts, lets the running jobs finish, reports what did not run, and
// exits with 130.
func TestRunInterrupt(t *testing.T) {
	t.Parallel()
	cmd, log, out, errOut := interruptible(t, 2, 600*time.Millisecond, "-j", "2", "-rate", "50/s")
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
	evs := readJobLog(t, log)
	if len(evs) != 4 || mostRunning(evs) != 2 || evs[3].start {
		t.Fatalf("want the 2 running jobs to have run to their end, and no other; job log: %v", evs)
	}
	for _, e := range evs {
		if e.start && e.at.After(sent) {
			t.Errorf("job %q started after the interrupt", e.line)
		}
	}
	for _, want := range []string{"starting no more jobs", " jobs: 2 succeeded, 0 failed", "did not run: line 3: job 3", "stdin was not read after line"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if got := out.String(); !strings.Contains(got, "out job 1\n") || !strings.Contains(got, "out job 2\n") {
		t.Errorf("stdout %q lacks the two jobs' output", got)
	}
}

// TestRunInterruptTwice: a second interrupt passes the signal on to the
// running jobs.
func TestRunInterruptTwice(t *testing.T) {
	t.Parallel()
	cmd, log, _, errOut := interruptible(t, 2, time.Minute, "-j", "2", "-joblog", "-")
	for range 2 {
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("rategate did not end 10 s after the second interrupt")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
	for _, e := range readJobLog(t, log) {
		if !e.start {
			t.Errorf("job %q ran to its end despite the interrupt", e.line)
		}
	}
	if got := strings.Count(errOut.String(), "\t-1\t2\t"); got != 2 {
		t.Errorf("joblog on stderr: %d jobs with Exitval -1 and Signal 2, want 2:\n%s", got, errOut)
	}
}

func TestPerKeyField(t *testing.T) {
	t.Parallel()
	host, _ := parseKeyFunc("host")
	second, _ := parseKeyFunc("2")
	for _, c := range []struct {
		f          keyFunc
		line, want string
	}{
		{host, "GET https://API.example.com:8443/v1?q=1 x", "api.example.com"},
		{host, "ftp:/nohost https://b.example/", "b.example"},
		{host, "no url here", ""},
		{second, "a b c", "b"},
		{second, "  a\t b ", "b"},
		{second, "a", ""},
	} {
		if got := c.f(c.line); got != c.want {
			t.Errorf("key of %q: %q, want %q", c.line, got, c.want)
		}
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	if got := expand([]string{"curl", "-o", "{}.out", "https://x/{}"}, "a b"); !slices.Equal(got, []string{"curl", "-o", "a b.out", "https://x/a b"}) {
		t.Errorf("expand with {}: %q", got)
	}
	if got := expand([]string{"echo", "-n"}, "line"); !slices.Equal(got, []string{"echo", "-n", "line"}) {
		t.Errorf("expand without {}: %q", got)
	}
}
