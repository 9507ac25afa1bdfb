package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// bin is the rategate binary the tests run, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rategate-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "rategate")
	if out, err := exec.Command(goTool(), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building rategate: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	parallelByDefault()
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// parallelByDefault lets all the parallel tests run at once, unless
// -test.parallel says otherwise: they spend their time waiting on the real
// clock (for rategate's rate), not on a CPU, so GOMAXPROCS at a time (the
// default) would only add their times up.
func parallelByDefault() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", "64")
	}
}

// goTool is the go command that runs these tests.
func goTool() string {
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// The real-clock checks count what the test reads from rategate's stdout
// in windows shorter than the bound's by slack. The test stamps a piece
// when its Read returns, a moment after rategate was granted it: a few
// microseconds as a rule, tens of milliseconds when rategate or the test
// waits for a CPU (the tests run side by side, with redis-server and the
// jobs of rategate run, on a machine that may be busy). If every stamp
// comes at most slack after its grant, pieces stamped within window-slack
// of each other were granted within one window, so a count over the bound
// is a grant over the bound. 50 ms, as the examples' checks allow.
const slack = 50 * time.Millisecond

// arrival is a piece of rategate's output and when the test read it.
type arrival struct {
	at time.Duration // since the command started
	n  int           // bytes, or lines
}

// maxInWindow returns the most of arrivals (sorted by at) in any window
// [t, t+w).
func maxInWindow(as []arrival, w time.Duration) int {
	most, sum, lo := 0, 0, 0
	for _, a := range as {
		sum += a.n
		for as[lo].at <= a.at-w {
			sum -= as[lo].n
			lo++
		}
		most = max(most, sum)
	}
	return most
}

// countIn returns the sum of arrivals in [from, to).
func countIn(as []arrival, from, to time.Duration) int {
	n := 0
	for _, a := range as {
		if a.at >= from && a.at < to {
			n += a.n
		}
	}
	return n
}

// proc is a running rategate whose stdout the test reads as it comes.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	start  time.Time
	stderr bytes.Buffer
	done   chan struct{} // closed when stdout is at EOF
	out    []byte
	stamps []arrival // one per Read, or per line with lines set
}

// start runs rategate with args and stamps its output: each Read's bytes,
// or each line when lines is set.
func start(t *testing.T, lines bool, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stdout, lines)
	return p
}

func (p *proc) read(r io.Reader, lines bool) {
	defer close(p.done)
	buf := make([]byte, 256<<10)
	for {
		n, err := r.Read(buf)
		at := time.Since(p.start)
		if n > 0 {
			c := n
			if lines {
				c = bytes.Count(buf[:n], []byte("\n"))
			}
			p.stamps = append(p.stamps, arrival{at, c})
			p.out = append(p.out, buf[:n]...)
		}
		if err != nil {
			return
		}
	}
}

// wait waits for rategate to end and returns its exit status.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	<-p.done
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return p.cmd.ProcessState.ExitCode()
}

// feed writes to p's stdin: each part in turn, waiting the pause before
// it, then closes stdin. It returns at once; the returned channel is closed
// when it is done.
func (p *proc) feed(parts []feedPart) <-chan error {
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for _, part := range parts {
			time.Sleep(part.pause)
			if _, err := p.stdin.Write(part.data); err != nil {
				done <- err
				return
			}
		}
		done <- p.stdin.Close()
	}()
	return done
}

type feedPart struct {
	pause time.Duration
	data  []byte
}

// firstAfterGap returns the instant of the first arrival that follows a
// spell of at least gap with none.
func firstAfterGap(as []arrival, gap time.Duration) (time.Duration, bool) {
	for i := 1; i < len(as); i++ {
		if as[i].at-as[i-1].at >= gap {
			return as[i].at, true
		}
	}
	return 0, false
}

// runResult is a finished rategate.
type runResult struct {
	code           int
	stdout, stderr string
}

// runBin runs rategate to its end with stdin as its input.
func runBin(t *testing.T, stdin string, args ...string) runResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return runResult{cmd.ProcessState.ExitCode(), out.String(), errOut.String()}
}

func execBin(args ...string) *exec.Cmd { return exec.Command(bin, args...) }
