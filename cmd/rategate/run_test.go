package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The jobs of these tests are a shell that writes "start LINE" to its
// stdout (rategate's, with -u, read by the test), sleeps, writes "end
// LINE", and exits with status 3 when LINE contains "fail". The test stamps
// each line when it reads it. A "start" written after an "end" is read after
// it, so the count of running jobs is exact whatever the delays.
//
// A job's start comes after rategate has forked and executed the shell: a
// millisecond or so after its permit, but, with other work on the machine,
// now and then more than a hundred, which no slack of the rate checks could
// absorb. So the rate checks use the instants rategate gives in its joblog
// (Starttime, taken when the pool hands out the job, just before the fork),
// and check them against the test's own stamps: a job cannot start before
// rategate says it did, so a joblog that moved a start later than it was
// would show, and a joblog instant can only be earlier than the stamp. The
// slack of the checks is then rategate's own delay from its permit to the
// joblog instant, as for pipe and lines.

func jobLines(prefix string, n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s%d\n", prefix, i)
	}
	return b.String()
}

// jobEvent is a line a job wrote, and when the test read it; for a start,
// also when rategate's joblog says the job started.
type jobEvent struct {
	start  bool
	at     time.Time
	line   string
	logged time.Time
}

// jobsRun is a rategate run of the test's jobs.
type jobsRun struct {
	cmd    *exec.Cmd
	joblog string // the joblog file, when the test did not name one
	errOut bytes.Buffer
	mu     sync.Mutex
	events []jobEvent
	out    strings.Builder // what is not a start or an end
	done   chan struct{}   // closed when stdout is at EOF
}

// newJobs prepares rategate run -u with args, the jobs sleeping d, on input.
func newJobs(t *testing.T, input string, d time.Duration, args ...string) *jobsRun {
	t.Helper()
	script := fmt.Sprintf(`echo "start $1"; sleep %.3f; echo "end $1"; case "$1" in *fail*) exit 3;; esac`, d.Seconds())
	r := &jobsRun{done: make(chan struct{})}
	if !slices.Contains(args, "-joblog") {
		r.joblog = filepath.Join(t.TempDir(), "joblog")
		args = append([]string{"-joblog", r.joblog}, args...)
	}
	r.cmd = execBin(append(append([]string{"run", "-u"}, args...), "--", "sh", "-c", script, "sh", "{}")...)
	r.cmd.Stdin = strings.NewReader(input)
	r.cmd.Stderr = &r.errOut
	return r
}

func (r *jobsRun) start(t *testing.T) *jobsRun {
	t.Helper()
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(r.done)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			r.record(s.Text(), time.Now())
		}
	}()
	return r
}

func (r *jobsRun) record(text string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if line, ok := strings.CutPrefix(text, "start "); ok {
		r.events = append(r.events, jobEvent{start: true, at: at, line: line})
	} else if line, ok := strings.CutPrefix(text, "end "); ok {
		r.events = append(r.events, jobEvent{at: at, line: line})
	} else {
		r.out.WriteString(text + "\n")
	}
}

// started returns how many jobs have started so far.
func (r *jobsRun) started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.start {
			n++
		}
	}
	return n
}

// wait waits for rategate to end and returns its result and the jobs'
// events, with the joblog's start instants.
func (r *jobsRun) wait(t *testing.T) (runResult, []jobEvent) {
	t.Helper()
	<-r.done
	r.cmd.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.joblog != "" {
		r.readJoblog(t)
	}
	return runResult{r.cmd.ProcessState.ExitCode(), r.out.String(), r.errOut.String()}, r.events
}

// readJoblog sets the logged start of each start event from the joblog,
// whose last field is the job's line (shell-quoted when it has a space).
func (r *jobsRun) readJoblog(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(r.joblog)
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]time.Time{}
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")[1:] {
		f := strings.Split(l, "\t")
		ms, err := strconv.ParseFloat(f[2], 64)
		if len(f) != 9 || err != nil {
			t.Fatalf("joblog line %q", l)
		}
		line := f[8][strings.LastIndex(f[8], " sh ")+len(" sh "):]
		logged[strings.Trim(line, "'")] = time.UnixMilli(int64(math.Round(ms * 1e3)))
	}
	for i, e := range r.events {
		if e.start {
			r.events[i].logged = logged[e.line]
		}
	}
}

// runJobs runs rategate run -u with args, the jobs sleeping d, on input.
func runJobs(t *testing.T, input string, d time.Duration, args ...string) (runResult, []jobEvent) {
	t.Helper()
	return newJobs(t, input, d, args...).start(t).wait(t)
}

// starts returns the instants rategate's joblog gives for the starts of
// the jobs whose line keep accepts, relative to the first, as arrivals in
// order. It reports a start logged later than the test read it.
func starts(c *clock, evs []jobEvent, keep func(line string) bool) []arrival {
	var ts []time.Time
	for _, e := range evs {
		if !e.start || !keep(e.line) {
			continue
		}
		if e.logged.IsZero() || e.logged.After(e.at) {
			c.errorf("job %q: joblog start %v, but the test read its start at %v", e.line, e.logged, e.at)
		}
		ts = append(ts, e.logged)
	}
	slices.SortFunc(ts, time.Time.Compare)
	var as []arrival
	for _, at := range ts {
		as = append(as, arrival{at.Sub(ts[0]), 1})
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

// checkRan checks that every line of input ran exactly once, to its end.
func checkRan(t *testing.T, evs []jobEvent, input string) {
	t.Helper()
	want := strings.Split(strings.TrimSuffix(input, "\n"), "\n")
	var started, ended []string
	for _, e := range evs {
		if e.start {
			started = append(started, e.line)
		} else {
			ended = append(ended, e.line)
		}
	}
	slices.Sort(want)
	slices.Sort(started)
	slices.Sort(ended)
	if !slices.Equal(started, want) || !slices.Equal(ended, want) {
		t.Errorf("jobs started %q and ended %q; want each of %q once", started, ended, want)
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
	checkRan(t, evs, input)
	if got := mostRunning(evs); got != 2 {
		t.Errorf("at most %d jobs ran at once, want -j 2", got)
	}
}

// TestRunRate: job starts keep the rate, on the real clock, and reach it.
func TestRunRate(t *testing.T) {
	t.Parallel()
	const rate = 20
	input := jobLines("job ", rate*3)
	realClock(t, slack, func(c *clock) {
		r, evs := runJobs(t, input, 50*time.Millisecond, "-j", "4", "-rate", fmt.Sprintf("%d/s", rate))
		if r.code != 0 {
			t.Fatalf("exit status %d, stderr:\n%s", r.code, r.stderr)
		}
		checkRan(t, evs, input)
		as := starts(c, evs, all)
		for _, w := range []time.Duration{250 * time.Millisecond, time.Second} {
			bound := min(rate, 2+int(rate*w.Seconds())) // the default burst is 2
			got := maxInWindow(as, w-slack)
			t.Logf("most starts in a window of %v-%v: %d (bound %d)", w, slack, got, bound)
			if got > bound {
				c.errorf("%d starts in a window of %v-%v, over the bound of %d", got, w, slack, bound)
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
	realClock(t, slack, func(c *clock) {
		r, evs := runJobs(t, input, 20*time.Millisecond, "-j", "8", "-rate", "5/s", "-per-key", "1")
		if r.code != 0 {
			t.Fatalf("exit status %d, stderr:\n%s", r.code, r.stderr)
		}
		checkRan(t, evs, input)
		for _, key := range []string{"a", "b", "c"} {
			as := starts(c, evs, func(l string) bool { return strings.HasPrefix(l, key+" ") })
			if got := maxInWindow(as, time.Second-slack); got > 5 {
				c.errorf("key %s: %d starts in a window of 1s-%v, over 5", key, got, slack)
			}
		}
		if got := countIn(starts(c, evs, all), 0, time.Second-slack); got < 15 {
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
	inputs := strings.Split(input, "\n")
	for _, l := range lines[1:] {
		f := strings.Split(l, "\t")
		seq, _ := strconv.Atoi(f[0])
		if len(f) != 9 || seq < 1 || seq > 5 || f[1] != ":" || f[5] != fmt.Sprint(2*len(inputs[seq-1])+len("start \nend \n")) {
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

// TestRunUngroup: with -u the jobs' output is passed on as it comes.
func TestRunUngroup(t *testing.T) {
	t.Parallel()
	r := runBin(t, "a\nb\n", "run", "-u", "-j", "1", "--", "sh", "-c", "echo out $1; echo err $1 >&2", "sh", "{}")
	if r.code != 0 || r.stdout != "out a\nout b\n" || r.stderr != "err a\nerr b\n" {
		t.Errorf("exit status %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
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
func interruptible(t *testing.T, n int, d time.Duration, args ...string) *jobsRun {
	t.Helper()
	r := newJobs(t, jobLines("job ", 10), d, args...)
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.start(t)
	for deadline := time.Now().Add(10 * time.Second); r.started() < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.cmd.Process.Kill()
			r.wait(t)
			t.Fatalf("%d jobs did not start in 10 s", n)
		}
	}
	return r
}

// TestRunInterrupt: Ctrl-C (SIGINT to the terminal's process group) stops
// the starts, lets the running jobs finish, reports what did not run, and
// exits with 130.
func TestRunInterrupt(t *testing.T) {
	t.Parallel()
	run := interruptible(t, 2, 600*time.Millisecond, "-j", "2", "-rate", "50/s")
	if err := syscall.Kill(-run.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r, evs := run.wait(t)
	if r.code != 130 {
		t.Errorf("exit status %d, want 130", r.code)
	}
	if len(evs) != 4 || mostRunning(evs) != 2 || evs[3].start {
		t.Fatalf("want the 2 running jobs to have run to their end, and no other; events: %v", evs)
	}
	for _, want := range []string{"starting no more jobs", " jobs: 2 succeeded, 0 failed", "did not run: line 3: job 3", "stdin was not read after line"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

// TestRunInterruptTwice: a second interrupt passes the signal on to the
// running jobs.
func TestRunInterruptTwice(t *testing.T) {
	t.Parallel()
	run := interruptible(t, 2, time.Minute, "-j", "2", "-joblog", "-")
	for range 2 {
		if err := run.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	timer := time.AfterFunc(10*time.Second, func() { run.cmd.Process.Kill() })
	r, evs := run.wait(t)
	if !timer.Stop() {
		t.Fatal("rategate did not end 10 s after the second interrupt")
	}
	if r.code != 130 {
		t.Errorf("exit status %d, want 130", r.code)
	}
	for _, e := range evs {
		if !e.start {
			t.Errorf("job %q ran to its end despite the interrupt", e.line)
		}
	}
	if got := strings.Count(r.stderr, "\t-1\t2\t"); got != 2 {
		t.Errorf("joblog on stderr: %d jobs with Exitval -1 and Signal 2, want 2:\n%s", got, r.stderr)
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
