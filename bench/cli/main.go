// Command cli compares `rategate pipe -rate R` with `pv -q -L R` (Debian's
// pv) on the same input, on the real clock, and prints a markdown table.
//
//	cd bench && go run ./cli            # builds ../cmd/rategate; needs pv on PATH
//	go run ./cli -rates 1MiB -runs 3 -idle 5s
//
// Each run feeds the tool's stdin faster than the limit for -steady, then
// nothing for -idle, then a large write at once, and stamps every read of
// the tool's stdout. It reports the throughput share (bytes in the first
// -steady from the first byte, over what the limit allows in that time),
// the most bytes in any window of 1 s of the whole run and in the second
// after the idle spell (the case of pv's issue 32: a burst after an idle
// spell), both as % of the limit, and the
// tool's CPU time over wall time. The tools take turns, run by run, so that
// a change in the machine's load touches both. Medians over -runs, and the
// worst run of the worst-window columns.
//
// Stamps are taken when a Read returns, a moment after the tool wrote; on a
// busy machine that moment varies. A limit that is exact over a sliding
// window admits the first piece of a new second exactly one second after
// the piece it replaces, so a window of the full second would count both
// whenever the earlier stamp came later after its write, which is often;
// the windows are therefore shorter than a second by a slack of 50 ms, as in
// the tests of cmd/rategate. When the harness is not scheduled for
// a while the tool's writes wait in the pipe (64 KiB) and are stamped
// together when it reads again: the window columns can then read a few
// pieces over 100% for a tool that kept its limit. The last column is how
// late a goroutine of the harness that sleeps 1 ms at a time woke, at worst,
// during the runs: a window reading over 100% by a few pieces, in a run
// whose harness was late by tens of milliseconds, is this artefact.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	rates := flag.String("rates", "1MiB,10MiB", "comma-separated `LIST` of byte rates per second: a number and KiB, MiB or GiB")
	runs := flag.Int("runs", 3, "runs per tool and rate")
	steady := flag.Duration("steady", 3*time.Second, "how long the input outruns the limit before the idle spell")
	idle := flag.Duration("idle", 3*time.Second, "how long the input stops")
	rategate := flag.String("rategate", "", "the rategate binary (default: go build ../cmd/rategate)")
	flag.Parse()
	if err := run(*rates, *runs, *steady, *idle, *rategate); err != nil {
		fmt.Fprintln(os.Stderr, "cli:", err)
		os.Exit(1)
	}
}

func run(rateList string, runs int, steady, idle time.Duration, rategate string) error {
	pv, err := exec.LookPath("pv")
	if err != nil {
		return errors.New("pv is not on PATH (apt-get install pv)")
	}
	if rategate == "" {
		dir, err := os.MkdirTemp("", "cli-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		rategate = filepath.Join(dir, "rategate")
		if out, err := exec.Command("go", "build", "-o", rategate, "../cmd/rategate").CombinedOutput(); err != nil {
			return fmt.Errorf("building rategate: %v\n%s", err, out)
		}
	}
	pvVersion, _ := exec.Command(pv, "--version").Output()
	fmt.Printf("`rategate pipe -q -rate R` against `%s -q -L R` on the same input: %v faster than R, %v idle, then %v of R at once; %d runs each, taking turns (%s, %d CPUs, GOMAXPROCS of this harness %d, load average at start: %s).\n\n",
		pv, steady, idle, steady, runs, strings.TrimSpace(strings.SplitN(string(pvVersion), "\n", 2)[0]), runtime.NumCPU(), runtime.GOMAXPROCS(0), loadavg())
	fmt.Println("| tool | limit | share of the limit (median) | most in any 1 s - 50 ms (median, worst) | the second - 50 ms after the idle spell (median, worst) | CPU | harness late (worst) |")
	fmt.Println("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, rs := range strings.Split(rateList, ",") {
		rate, err := parseRate(rs)
		if err != nil {
			return err
		}
		tools := []tool{
			{"rategate pipe", []string{rategate, "pipe", "-q", "-rate", rs + "/s"}},
			{"pv -L", []string{pv, "-q", "-L", strconv.FormatInt(rate, 10)}},
		}
		res := make([][]result, len(tools))
		for range runs {
			for i, tl := range tools {
				r, err := measure(tl.argv, rate, steady, idle)
				if err != nil {
					return fmt.Errorf("%s: %w", tl.name, err)
				}
				res[i] = append(res[i], r)
			}
		}
		for i, tl := range tools {
			printRow(tl.name, rs+"/s", res[i])
		}
	}
	fmt.Printf("\nLoad average at end: %s.\n", loadavg())
	return nil
}

type tool struct {
	name string
	argv []string
}

// result is one run, in % of the limit.
type result struct {
	share, worstSecond, afterIdle, cpu float64
	late                               time.Duration // the harness's worst lateness
}

func printRow(name, limit string, rs []result) {
	col := func(f func(result) float64) []float64 {
		var v []float64
		for _, r := range rs {
			v = append(v, f(r))
		}
		slices.Sort(v)
		return v
	}
	share := col(func(r result) float64 { return r.share })
	worst := col(func(r result) float64 { return r.worstSecond })
	after := col(func(r result) float64 { return r.afterIdle })
	cpu := col(func(r result) float64 { return r.cpu })
	late := col(func(r result) float64 { return r.late.Seconds() * 1e3 })
	fmt.Printf("| %s | %s | %.1f%% | %.1f%%, %.1f%% | %.1f%%, %.1f%% | %.1f%% | %.0f ms |\n", name, limit,
		median(share), median(worst), worst[len(worst)-1], median(after), after[len(after)-1], median(cpu), late[len(late)-1])
}

func median(v []float64) float64 {
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// stamp is a read of the tool's output.
type stamp struct {
	at time.Duration
	n  int
}

// measure runs argv once and returns its result.
func measure(argv []string, rate int64, steady, idle time.Duration) (result, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return result{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	p := startProbe()
	defer p.stop()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	fed := make(chan error, 1)
	go func() { fed <- feed(stdin, rate, steady, idle) }()
	stamps := read(stdout, start)
	if err := cmd.Wait(); err != nil {
		return result{}, err
	}
	if err := <-fed; err != nil {
		return result{}, err
	}
	wall := time.Since(start)
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	r, err := summarize(stamps, rate, steady, idle, 100*cpu.Seconds()/wall.Seconds())
	r.late = p.stop()
	return r, err
}

// probe is a goroutine that sleeps 1 ms at a time and records how much later
// than that it woke, at worst.
type probe struct {
	worst time.Duration
	done  chan struct{}
	ended chan struct{}
	once  sync.Once
}

func startProbe() *probe {
	p := &probe{done: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(p.ended)
		for last := time.Now(); ; last = time.Now() {
			select {
			case <-p.done:
				return
			case <-time.After(time.Millisecond):
				p.worst = max(p.worst, time.Since(last)-time.Millisecond)
			}
		}
	}()
	return p
}

// stop ends the probe and returns the worst lateness it saw.
func (p *probe) stop() time.Duration {
	p.once.Do(func() { close(p.done) })
	<-p.ended
	return p.worst
}

// feed writes more than steady's worth of the limit without pause (the
// pipe holds back what the tool does not take), then, after idle, as much
// again at once.
func feed(w io.WriteCloser, rate int64, steady, idle time.Duration) error {
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	write := func(total int64) error {
		for ; total > 0; total -= int64(len(chunk)) {
			if _, err := w.Write(chunk[:min(total, int64(len(chunk)))]); err != nil {
				return err
			}
		}
		return nil
	}
	n := int64(float64(rate) * (steady.Seconds() + 0.2))
	if err := write(n); err != nil {
		return err
	}
	time.Sleep(idle)
	if err := write(n); err != nil {
		return err
	}
	return w.Close()
}

func read(r io.Reader, start time.Time) []stamp {
	var stamps []stamp
	buf := make([]byte, 1<<20)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			stamps = append(stamps, stamp{time.Since(start), n})
		}
		if err != nil {
			return stamps
		}
	}
}

func summarize(s []stamp, rate int64, steady, idle time.Duration, cpu float64) (result, error) {
	if len(s) == 0 {
		return result{}, errors.New("no output")
	}
	t0 := s[0].at
	r := result{cpu: cpu}
	r.share = 100 * float64(sumIn(s, t0, t0+steady)) / (float64(rate) * steady.Seconds())
	r.worstSecond = 100 * float64(mostIn(s, time.Second-slack)) / float64(rate)
	for i := 1; i < len(s); i++ {
		if s[i].at-s[i-1].at >= idle/2 {
			r.afterIdle = 100 * float64(sumIn(s, s[i].at, s[i].at+time.Second-slack)) / float64(rate)
			return r, nil
		}
	}
	return r, errors.New("no idle spell in the output")
}

// slack shortens the windows of a second (see the package comment).
const slack = 50 * time.Millisecond

func sumIn(s []stamp, from, to time.Duration) int {
	n := 0
	for _, x := range s {
		if x.at >= from && x.at < to {
			n += x.n
		}
	}
	return n
}

// mostIn returns the most bytes in any window [t, t+w).
func mostIn(s []stamp, w time.Duration) int {
	most, sum, lo := 0, 0, 0
	for _, x := range s {
		sum += x.n
		for s[lo].at <= x.at-w {
			sum -= s[lo].n
			lo++
		}
		most = max(most, sum)
	}
	return most
}

// parseRate reads "1MiB" as 1<<20 bytes (pv's -L takes a plain number).
func parseRate(s string) (int64, error) {
	for suffix, mult := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err == nil && v > 0 {
				return v * mult, nil
			}
		}
	}
	return 0, fmt.Errorf("rate %q: want a number and KiB, MiB or GiB", s)
}

// loadavg returns the 1, 5 and 15 minute load averages, where Linux says.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
