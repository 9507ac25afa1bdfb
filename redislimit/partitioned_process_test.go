//go:build unix

package redislimit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
)

// These tests run the global bound across real OS processes: the test
// binary re-executed (the child role "partitioned", selected by childEnv:
// TestMain runs it instead of the tests, and starts no server), each with its own Partitioned limiter on one key of one
// redis-server, granting one permit at a time as fast as it may.
//
// Timestamps. Each child records, per grant, the wall clock
// (time.Now().UnixNano(), CLOCK_REALTIME) just before TryAcquire and just
// after it returned; the decision was made between the two. All the
// processes run on this machine, so they read one clock, and CLOCK_REALTIME
// advances at the rate of CLOCK_MONOTONIC (on which the limiters decide)
// unless it is stepped, which NTP does not do during a run of seconds. An
// interval counts a grant only when both of its timestamps lie inside it,
// so the check never blames the limiter for a delay between the decision
// and the record (a grant recorded around a SIGSTOP is counted only in the
// intervals that span the stop).

var partitionedLong = flag.Bool("partitioned.long", false, "run the Partitioned process tests for 30 s instead of a few")

func init() { children["partitioned"] = partitionedChild }

// childSpec is what a child is told through its environment.
type childSpec struct {
	Addr       string
	Key        string
	Rate       int
	Burst      int
	Partitions int
	TTL        time.Duration
	Start      time.Time // when every child starts asking (they start up before it)
	Run        time.Duration
	Out        string
}

func (c childSpec) env() []string {
	return append(os.Environ(), childEnv+"=partitioned",
		"PT_ADDR="+c.Addr, "PT_KEY="+c.Key, "PT_RATE="+strconv.Itoa(c.Rate), "PT_BURST="+strconv.Itoa(c.Burst),
		"PT_PARTS="+strconv.Itoa(c.Partitions), "PT_TTL="+c.TTL.String(), "PT_RUN="+c.Run.String(), "PT_OUT="+c.Out,
		"PT_START="+strconv.FormatInt(c.Start.UnixNano(), 10))
}

func childFromEnv() (childSpec, error) {
	var c childSpec
	var err error
	atoi := func(k string) int {
		n, e := strconv.Atoi(os.Getenv(k))
		err = errors.Join(err, e)
		return n
	}
	dur := func(k string) time.Duration {
		d, e := time.ParseDuration(os.Getenv(k))
		err = errors.Join(err, e)
		return d
	}
	c.Addr, c.Key, c.Out = os.Getenv("PT_ADDR"), os.Getenv("PT_KEY"), os.Getenv("PT_OUT")
	c.Rate, c.Burst, c.Partitions = atoi("PT_RATE"), atoi("PT_BURST"), atoi("PT_PARTS")
	c.TTL, c.Run = dur("PT_TTL"), dur("PT_RUN")
	start, e := strconv.ParseInt(os.Getenv("PT_START"), 10, 64)
	c.Start = time.Unix(0, start)
	return c, errors.Join(err, e)
}

// partitionedChild is a child process of the process tests: from
// spec.Start for spec.Run it takes permits one at a time as fast as its
// Partitioned limiter grants them, and records each grant in spec.Out. It
// fails if it leaves a goroutine behind.
func partitionedChild() int {
	err := runPartitionedChild()
	if err == nil {
		err = goleak.Find()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "partitioned child:", err)
		return 1
	}
	return 0
}

func runPartitionedChild() error {
	spec, err := childFromEnv()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(spec.Out, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer out.Close()
	client := redis.NewClient(&redis.Options{Addr: spec.Addr, MaxRetries: -1})
	defer client.Close()
	p, err := NewPartitioned(Options{Client: client, Key: spec.Key, Timeout: 100 * time.Millisecond},
		PartitionedOptions{Rate: limiter.Per(spec.Rate, time.Second), Burst: spec.Burst, Partitions: spec.Partitions, LeaseTTL: spec.TTL})
	if err != nil {
		return err
	}
	defer p.Close()
	time.Sleep(time.Until(spec.Start))
	end := spec.Start.Add(spec.Run)
	var rec [16]byte
	for time.Now().Before(end) {
		b := time.Now().UnixNano()
		l := p.TryAcquire(1)
		a := time.Now().UnixNano()
		if !l.Granted() {
			time.Sleep(min(max(l.RetryAfter(), 200*time.Microsecond), 5*time.Millisecond))
			continue
		}
		// One write per grant, unbuffered: the log of a killed child
		// keeps every grant it recorded.
		binary.LittleEndian.PutUint64(rec[:8], uint64(b))
		binary.LittleEndian.PutUint64(rec[8:], uint64(a))
		if _, err := out.Write(rec[:]); err != nil {
			return err
		}
	}
	p.Close()
	fmt.Printf("child: %d grants, %d lease calls in %v\n", p.Stats().Granted, p.LeaseCalls(), spec.Run)
	return nil
}

// startDelay is the time the children have to start up.
const startDelay = 1500 * time.Millisecond

// grant is one recorded grant: the wall clock before and after the call.
type grant struct{ before, after int64 }

func readGrants(t *testing.T, path string) []grant {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gs := make([]grant, 0, len(b)/16)
	for ; len(b) >= 16; b = b[16:] {
		gs = append(gs, grant{int64(binary.LittleEndian.Uint64(b)), int64(binary.LittleEndian.Uint64(b[8:]))})
	}
	return gs
}

// maxSpread is the longest call whose grant the bound check keeps: a grant
// recorded around a longer stall (a SIGSTOP, a descheduled process) is
// dropped, which can only hide an excess, never make one up.
const maxSpread = 2 * time.Millisecond

// boundViolation checks the bound burst + n/per·t over every interval
// [s, e] on the grants definitely inside it (both timestamps in it), and
// returns a description of the worst excess, or "" when there is none.
// Dropped counts the grants left out for a spread over maxSpread.
//
// With the kept grants sorted by their before stamps, grants j..k all lie
// within [before_j, max(after_0..after_k)], so it suffices that
// (k-j+1)·per <= burst·per + n·(M_k - before_j) for all j <= k, where M_k
// is the running maximum of after; the maximum over j is kept as a running
// maximum too, so the check is linear after the sort.
func boundViolation(gs []grant, burst, n int64, per time.Duration) (msg string, dropped int) {
	kept := make([]grant, 0, len(gs))
	for _, g := range gs {
		if g.after-g.before > int64(maxSpread) {
			dropped++
			continue
		}
		kept = append(kept, g)
	}
	if len(kept) == 0 {
		return "", dropped
	}
	slices.SortFunc(kept, func(a, b grant) int { return int(a.before - b.before) })
	t0 := kept[0].before
	d := int64(per)
	var runMax int64 = -1 << 62 // max over j <= k of n·before_j - j·d
	var maxAfter int64
	worst, worstK, worstJ := int64(0), -1, -1
	var bestJ int
	for k, g := range kept {
		if x := n*(g.before-t0) - int64(k)*d; x > runMax {
			runMax, bestJ = x, k
		}
		maxAfter = max(maxAfter, g.after-t0)
		excess := int64(k+1)*d - n*maxAfter + runMax - burst*d
		if excess > worst {
			worst, worstK, worstJ = excess, k, bestJ
		}
	}
	if worstK < 0 {
		return "", dropped
	}
	j, k := worstJ, worstK
	span := time.Duration(maxAfter)
	return fmt.Sprintf("%d grants between %v and %v after the first, over the bound of %d + %d/%v·t (excess %.2f permits)",
		k-j+1, time.Duration(kept[j].before-t0), span, burst, n, per, float64(worst)/float64(d)), dropped
}

func TestBoundViolationDetects(t *testing.T) {
	// 10/s, burst 5: 5 at once and one every 100 ms is exactly the bound.
	var gs []grant
	for i := range 5 {
		gs = append(gs, grant{int64(i), int64(i) + 10})
	}
	for i := 1; i <= 10; i++ {
		at := int64(i) * int64(100*time.Millisecond)
		gs = append(gs, grant{at, at + 1000})
	}
	if msg, _ := boundViolation(gs, 5, 10, time.Second); msg != "" {
		t.Fatalf("a log at the bound: %s", msg)
	}
	// One more grant 50 ms in is over it.
	over := append(slices.Clone(gs), grant{int64(50 * time.Millisecond), int64(50*time.Millisecond) + 1000})
	if msg, _ := boundViolation(over, 5, 10, time.Second); msg == "" {
		t.Fatal("a log one grant over the bound passed")
	}
	// A grant recorded around a long stall is dropped, not counted early.
	stalled := append(slices.Clone(gs), grant{int64(50 * time.Millisecond), int64(3 * time.Second)})
	if msg, dropped := boundViolation(stalled, 5, 10, time.Second); msg != "" || dropped != 1 {
		t.Fatalf("a stalled record: %q, dropped %d", msg, dropped)
	}
}

// procRun is one run of child processes.
type procRun struct {
	spec  childSpec
	cmds  []*exec.Cmd
	outs  []string
	logs  []*bytes.Buffer
	start time.Time
}

func startChildren(t *testing.T, spec childSpec, n int) *procRun {
	t.Helper()
	// The children start asking together, once all have started up (a
	// race-enabled test binary takes a while).
	spec.Start = time.Now().Add(startDelay)
	r := &procRun{spec: spec, start: spec.Start}
	dir := t.TempDir()
	for i := range n {
		s := spec
		s.Out = filepath.Join(dir, fmt.Sprintf("grants-%d", i))
		if err := os.WriteFile(s.Out, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = s.env()
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.cmds = append(r.cmds, cmd)
		r.outs = append(r.outs, s.Out)
		r.logs = append(r.logs, &buf)
	}
	t.Cleanup(func() {
		for _, c := range r.cmds {
			c.Process.Signal(syscall.SIGCONT)
			c.Process.Kill()
		}
	})
	return r
}

// wait waits for the children (a killed one's exit is expected) and
// returns every grant they recorded.
func (r *procRun) wait(t *testing.T, killed map[int]bool) []grant {
	t.Helper()
	var all []grant
	var per [][]grant
	defer func() {
		t.Logf("grants per child per 200 ms:\n%s", timeline(per, r.start, 200*time.Millisecond, int(r.spec.Run/(200*time.Millisecond))))
	}()
	for i, c := range r.cmds {
		err := c.Wait()
		if err != nil && !killed[i] {
			t.Errorf("child %d: %v\n%s", i, err, r.logs[i])
		}
		gs := readGrants(t, r.outs[i])
		t.Logf("child %d: %d grants recorded; %s", i, len(gs), bytes.TrimSpace(lastLine(r.logs[i].Bytes())))
		all = append(all, gs...)
		per = append(per, gs)
	}
	return all
}

func lastLine(b []byte) []byte {
	for _, l := range slices.Backward(bytes.Split(bytes.TrimSpace(b), []byte("\n"))) {
		if bytes.HasPrefix(l, []byte("child:")) {
			return l
		}
	}
	return nil
}

// grantsBetween counts the grants decided within [from, to] since start.
func grantsBetween(gs []grant, start time.Time, from, to time.Duration) int {
	s, e := start.Add(from).UnixNano(), start.Add(to).UnixNano()
	n := 0
	for _, g := range gs {
		if g.before >= s && g.after <= e {
			n++
		}
	}
	return n
}

func processSpec(t *testing.T, addr string, run time.Duration) childSpec {
	if *partitionedLong {
		run = 30 * time.Second
	}
	return childSpec{Addr: addr, Key: t.Name(), Rate: 4000, Burst: 400, Partitions: 8, TTL: 300 * time.Millisecond, Run: run}
}

// Four processes with saturating demand share the rate: the merged grant
// log keeps the global bound in every interval, and together they get at
// least 90% of the rate.
func TestPartitionedProcesses(t *testing.T) {
	spec := processSpec(t, server.Addr, 3*time.Second)
	r := startChildren(t, spec, 4)
	gs := r.wait(t, nil)
	if msg, dropped := boundViolation(gs, int64(spec.Burst), int64(spec.Rate), time.Second); msg != "" {
		t.Errorf("over the global bound: %s (%d grants dropped for a spread over %v)", msg, dropped, maxSpread)
	} else {
		t.Logf("%d grants: the global bound holds in every interval (%d grants dropped for a spread over %v)", len(gs), dropped, maxSpread)
	}
	// Throughput once the processes run (a fresh key on a server started
	// less than a lease ago starts with a quarantine of up to one TTL).
	from, to := 3*spec.TTL+200*time.Millisecond, spec.Run-100*time.Millisecond
	got := grantsBetween(gs, r.start, from, to)
	share := float64(got) / (float64(spec.Rate) * (to - from).Seconds())
	t.Logf("%d grants in [%v, %v]: %.1f%% of the rate", got, from, to, 100*share)
	if share < 0.9 {
		t.Errorf("four saturating processes got %.1f%% of the rate, want at least 90%%", 100*share)
	}
}

// The same while one process is SIGKILLed, one is SIGSTOPped for longer
// than a lease, and the Redis server is killed and restarted empty: never
// over the bound, and back to at least 80% of the rate afterwards.
func TestPartitionedProcessFaults(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	spec := processSpec(t, srv.Addr, 5*time.Second)
	r := startChildren(t, spec, 4)
	at := func(d time.Duration) { time.Sleep(time.Until(r.start.Add(d))) }
	at(800 * time.Millisecond)
	r.cmds[0].Process.Kill()
	at(1200 * time.Millisecond)
	r.cmds[1].Process.Signal(syscall.SIGSTOP)
	at(2000 * time.Millisecond) // stopped 800 ms: over two lease TTLs
	r.cmds[1].Process.Signal(syscall.SIGCONT)
	at(2600 * time.Millisecond)
	srv.Kill()
	at(2900 * time.Millisecond)
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Since(r.start)
	gs := r.wait(t, map[int]bool{0: true})
	if msg, dropped := boundViolation(gs, int64(spec.Burst), int64(spec.Rate), time.Second); msg != "" {
		t.Errorf("over the global bound: %s (%d grants dropped for a spread over %v)", msg, dropped, maxSpread)
	} else {
		t.Logf("%d grants: the global bound holds in every interval (%d dropped for a spread over %v)", len(gs), dropped, maxSpread)
	}
	for _, w := range []struct {
		name     string
		from, to time.Duration
	}{
		{"one killed, one stopped", 1200 * time.Millisecond, 2000 * time.Millisecond},
		{"redis down", 2600 * time.Millisecond, restarted},
		{"after the restart", restarted + 2*spec.TTL + 200*time.Millisecond, spec.Run - 100*time.Millisecond},
	} {
		got := grantsBetween(gs, r.start, w.from, w.to)
		share := float64(got) / (float64(spec.Rate) * (w.to - w.from).Seconds())
		t.Logf("%s [%v, %v]: %d grants, %.1f%% of the rate", w.name, w.from.Round(time.Millisecond), w.to.Round(time.Millisecond), got, 100*share)
		if w.name == "after the restart" && share < 0.8 {
			t.Errorf("after the restart the processes got %.1f%% of the rate, want at least 80%%", 100*share)
		}
	}
}

// timeline tabulates each child's grants per step since start, for the log.
func timeline(gs [][]grant, start time.Time, step time.Duration, n int) string {
	var b strings.Builder
	for k := range n {
		s, e := start.Add(time.Duration(k)*step).UnixNano(), start.Add(time.Duration(k+1)*step).UnixNano()
		fmt.Fprintf(&b, "%6v:", time.Duration(k)*step)
		for _, g := range gs {
			c := 0
			for _, x := range g {
				if x.before >= s && x.before < e {
					c++
				}
			}
			fmt.Fprintf(&b, " %4d", c)
		}
		b.WriteString("\n")
	}
	return b.String()
}
