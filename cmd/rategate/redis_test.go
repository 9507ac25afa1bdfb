package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer starts a real redis-server on a free loopback port for the
// test, and stops it when the test ends. Without redis-server on PATH the
// test is skipped, or fails when RATEGATE_REQUIRE_REDIS is set (as CI does).
func redisServer(t *testing.T) string {
	t.Helper()
	addr, _ := redisProcess(t)
	return addr
}

// redisProcess is redisServer, and returns the server's process too.
func redisProcess(t *testing.T) (string, *os.Process) {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("RATEGATE_REQUIRE_REDIS") != "" {
			t.Fatal("RATEGATE_REQUIRE_REDIS is set but redis-server is not on PATH")
		}
		t.Skip("redis-server is not on PATH: the -redis tests need a real server")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return addr, cmd.Process
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer in 10 s: %v\n%s", addr, err, out.String())
		}
	}
}

// The Redis limiters decide at Redis's clock, so a grant reaches the test
// after the script's reply has come back to rategate, which on a busy machine
// (redis-server, two rategates and the test sharing 2 cores) takes from
// under a millisecond to tens of milliseconds. The windows of the -redis
// checks are shorter by this slack, for the same reason as slack: a process
// that kept its own limit instead of the shared one would still double the
// count.
const redisSlack = 100 * time.Millisecond

// TestRedisLines: two rategate lines sharing a key through Redis pass at
// most N lines between them in any window of the period, and reach it.
func TestRedisLines(t *testing.T) {
	t.Parallel()
	addr := redisServer(t)
	const rate = 20
	for _, window := range []string{"smooth", "strict"} {
		t.Run(window, func(t *testing.T) {
			t.Parallel()
			attempt := 0
			realClock(t, redisSlack, func(c *clock) {
				attempt++
				var ps []*proc
				for i := range 2 {
					p := start(t, true, "lines", "-rate", fmt.Sprintf("%d/s", rate), "-window", window,
						"-redis", addr, "-key", fmt.Sprintf("lines-%s-%d", window, attempt))
					ps = append(ps, p)
					p.feed([]feedPart{{0, numberedLines(i*100, i*100+rate*2)}})
				}
				var as []arrival
				for _, p := range ps {
					if code := p.wait(t); code != 0 {
						t.Fatalf("exit status %d, stderr:\n%s", code, p.stderr.String())
					}
					as = append(as, p.shifted(ps[0].start)...)
				}
				sortArrivals(as)
				got := maxInWindow(as, time.Second-redisSlack)
				t.Logf("most in a window of 1s-%v, both processes: %d lines (bound %d)", redisSlack, got, rate)
				if got > rate {
					c.errorf("%d lines in a window of 1s-%v, over the shared bound of %d", got, redisSlack, rate)
				}
				t0 := as[0].at
				n := countIn(as, t0, t0+3*time.Second-slack)
				t.Logf("first 3 s, both processes: %d lines, %.1f%% of the rate", n, float64(n)*100/(3*rate))
				if n*100 < 3*rate*98 {
					c.errorf("%d lines in the first 3 s, under 98%% of the shared rate", n)
				}
			})
		})
	}
}

// shifted returns p's stamps measured from origin.
func (p *proc) shifted(origin time.Time) []arrival {
	d := p.start.Sub(origin)
	as := make([]arrival, len(p.stamps))
	for i, a := range p.stamps {
		as[i] = arrival{a.at + d, a.n}
	}
	return as
}

func sortArrivals(as []arrival) {
	slices.SortStableFunc(as, func(a, b arrival) int { return cmp.Compare(a.at, b.at) })
}

// TestRedisPause: a Redis server that stops answering for a while (here
// SIGSTOP for 1.5 s, three times redislimit's timeout for a round trip)
// holds rategate up without ending it or letting anything through.
func TestRedisPause(t *testing.T) {
	t.Parallel()
	addr, server := redisProcess(t)
	p := start(t, true, "lines", "-rate", "20/s", "-redis", addr, "-key", "pause")
	in := numberedLines(0, 40)
	fed := p.feed([]feedPart{{0, in}})
	time.Sleep(500 * time.Millisecond)
	if err := server.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := server.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", code, p.stderr.String())
	}
	if err := <-fed; err != nil {
		t.Fatal(err)
	}
	if string(p.out) != string(in) {
		t.Fatalf("the lines that arrived differ from those written:\n%s", p.out)
	}
	gap, _ := firstAfterGap(p.stamps, time.Second)
	if gap == 0 {
		t.Errorf("no pause in the output while Redis was stopped: %v", p.stamps)
	}
	if got := maxInWindow(p.stamps, time.Second-redisSlack); got > 20 {
		t.Errorf("%d lines in a window of 1s-%v, over the bound of 20", got, redisSlack)
	}
}

// TestRedisPipe: two rategate pipes sharing a key share the byte rate.
func TestRedisPipe(t *testing.T) {
	t.Parallel()
	addr := redisServer(t)
	const rate = 100 << 10
	attempt := 0
	realClock(t, redisSlack, func(c *clock) {
		attempt++
		var ps []*proc
		var want [][]byte
		for i := range 2 {
			data := randomBytes(rate*16/10, uint64(10+i))
			p := start(t, false, "pipe", "-rate", "100KiB/s", "-redis", addr, "-key", fmt.Sprint("pipe-", attempt))
			ps = append(ps, p)
			want = append(want, data)
			p.feed([]feedPart{{0, data}})
		}
		var as []arrival
		for i, p := range ps {
			if code := p.wait(t); code != 0 {
				t.Fatalf("exit status %d, stderr:\n%s", code, p.stderr.String())
			}
			if !bytes.Equal(p.out, want[i]) {
				c.errorf("process %d: %d bytes out, not the %d in", i, len(p.out), len(want[i]))
			}
			as = append(as, p.shifted(ps[0].start)...)
		}
		sortArrivals(as)
		got := maxInWindow(as, time.Second-redisSlack)
		t.Logf("most in a window of 1s-%v, both processes: %d bytes (bound %d)", redisSlack, got, rate)
		if got > rate {
			c.errorf("%d bytes in a window of 1s-%v, over the shared bound of %d", got, redisSlack, rate)
		}
		t0 := as[0].at
		n := countIn(as, t0, t0+3*time.Second-slack)
		t.Logf("first 3 s, both processes: %.1f%% of the rate", float64(n)*100/(3*rate))
		if n*100 < 3*rate*98 {
			c.errorf("%d bytes in the first 3 s, under 98%% of the shared rate", n)
		}
	})
}

// TestRedisRunPerKey: two rategate runs sharing a key keep each -per-key
// key's rate between them.
func TestRedisRunPerKey(t *testing.T) {
	t.Parallel()
	addr := redisServer(t)
	var b strings.Builder
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(&b, "a %d\nb %d\n", i, i)
	}
	attempt := 0
	realClock(t, redisSlack, func(c *clock) {
		attempt++
		key := fmt.Sprintf("run-%d", attempt) // no state left from an earlier attempt
		args := []string{"-j", "4", "-rate", "4/s", "-per-key", "1", "-redis", addr, "-key", key}
		runs := []*jobsRun{newJobs(t, b.String(), 0, args...).start(t), newJobs(t, b.String(), 0, args...).start(t)}
		var results [][]jobEvent
		for _, run := range runs {
			r, evs := run.wait(t)
			if r.code != 0 {
				t.Fatalf("exit status %d, stderr:\n%s", r.code, r.stderr)
			}
			results = append(results, evs)
		}
		evs := append(results[0], results[1]...)
		sortEvents(evs)
		for _, key := range []string{"a", "b"} {
			as := starts(c, evs, func(l string) bool { return strings.HasPrefix(l, key+" ") })
			if len(as) != 8 {
				c.errorf("key %s: %d jobs started, want 8", key, len(as))
			}
			if got := maxInWindow(as, time.Second-redisSlack); got > 4 {
				c.errorf("key %s: %d starts in a window of 1s-%v, over the shared 4", key, got, redisSlack)
			}
		}
	})
}

func sortEvents(evs []jobEvent) {
	slices.SortStableFunc(evs, func(a, b jobEvent) int { return a.at.Compare(b.at) })
}
