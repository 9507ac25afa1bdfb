package redislimit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
)

// childEnv names the role a re-executed test binary plays (see children);
// TestMain runs it instead of the tests.
const childEnv = "REDISLIMIT_CHILD"

// children maps a role to what a child process runs; other test files add
// theirs in init.
var children = map[string]func() int{
	"grants": grantsChild,
	"holder": holderChild,
}

func childMain() int {
	f := children[os.Getenv(childEnv)]
	if f == nil {
		fmt.Fprintf(os.Stderr, "unknown child role %q\n", os.Getenv(childEnv))
		return 2
	}
	return f()
}

// childConfig is what the parent tells a child, through the environment.
type childConfig struct {
	Addrs     []string      // one server, or a cluster's masters
	Cluster   bool          //
	Key       string        //
	Alg       string        // tb, fw, sl, cc
	Limit     int           // Limit, or Burst for tb
	Window    time.Duration // Window, or the period of Limit·… for tb: Rate = Rate/Per
	Rate      int           // tb: Rate events per Window
	Dur       time.Duration // how long to ask
	G         int           // goroutines asking
	Hold      time.Duration // cc: how long a lease is held
	Guard     bool          // GuardRestarts
	Timeout   time.Duration // Options.Timeout
	LeaseTTL  time.Duration //
	Permits   int           // per request (default 1)
	UseTryAcq bool          // TryAcquire instead of Acquire
}

func (c childConfig) env() []string {
	return []string{
		"RL_ADDRS=" + strings.Join(c.Addrs, ","), "RL_CLUSTER=" + strconv.FormatBool(c.Cluster),
		"RL_KEY=" + c.Key, "RL_ALG=" + c.Alg, "RL_LIMIT=" + strconv.Itoa(c.Limit),
		"RL_WINDOW=" + c.Window.String(), "RL_RATE=" + strconv.Itoa(c.Rate), "RL_DUR=" + c.Dur.String(),
		"RL_G=" + strconv.Itoa(c.G), "RL_HOLD=" + c.Hold.String(), "RL_GUARD=" + strconv.FormatBool(c.Guard),
		"RL_TIMEOUT=" + c.Timeout.String(), "RL_TTL=" + c.LeaseTTL.String(), "RL_PERMITS=" + strconv.Itoa(c.Permits),
		"RL_TRY=" + strconv.FormatBool(c.UseTryAcq),
	}
}

func readChildConfig() childConfig {
	d := func(k string) time.Duration { v, _ := time.ParseDuration(os.Getenv(k)); return v }
	i := func(k string) int { v, _ := strconv.Atoi(os.Getenv(k)); return v }
	b := func(k string) bool { v, _ := strconv.ParseBool(os.Getenv(k)); return v }
	return childConfig{
		Addrs: strings.Split(os.Getenv("RL_ADDRS"), ","), Cluster: b("RL_CLUSTER"), Key: os.Getenv("RL_KEY"),
		Alg: os.Getenv("RL_ALG"), Limit: i("RL_LIMIT"), Window: d("RL_WINDOW"), Rate: i("RL_RATE"),
		Dur: d("RL_DUR"), G: i("RL_G"), Hold: d("RL_HOLD"), Guard: b("RL_GUARD"), Timeout: d("RL_TIMEOUT"),
		LeaseTTL: d("RL_TTL"), Permits: i("RL_PERMITS"), UseTryAcq: b("RL_TRY"),
	}
}

func (c childConfig) client() redis.UniversalClient {
	if c.Cluster {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	}
	return redis.NewClient(&redis.Options{Addr: c.Addrs[0]})
}

// limiterFor builds the configured limiter and returns its engine.
func (c childConfig) limiterFor(cl redis.UniversalClient) (limiter.Limiter, *engine, error) {
	o := Options{Client: cl, Key: c.Key, GuardRestarts: c.Guard, Timeout: c.Timeout, LeaseTTL: c.LeaseTTL}
	switch c.Alg {
	case "tb":
		l, err := NewTokenBucket(o, limiter.TokenBucketOptions{Rate: limiter.Per(c.Rate, c.Window), Burst: c.Limit})
		if err != nil {
			return nil, nil, err
		}
		return l, l.e, nil
	case "fw":
		l, err := NewFixedWindow(o, limiter.FixedWindowOptions{Limit: c.Limit, Window: c.Window})
		if err != nil {
			return nil, nil, err
		}
		return l, l.e, nil
	case "sl":
		l, err := NewSlidingLog(o, limiter.SlidingLogOptions{Limit: c.Limit, Window: c.Window})
		if err != nil {
			return nil, nil, err
		}
		return l, l.e, nil
	case "cc":
		l, err := NewConcurrency(o, limiter.ConcurrencyOptions{Limit: c.Limit})
		if err != nil {
			return nil, nil, err
		}
		return l, l.e, nil
	}
	return nil, nil, fmt.Errorf("unknown algorithm %q", c.Alg)
}

// grantsChild asks with G goroutines for Dur and prints every grant as
// "g <redis µs> <permits>" (for cc also "r <redis µs> <permits>" at every
// release), and "e <errors>" at the end.
func grantsChild() int {
	c := readChildConfig()
	cl := c.client()
	defer cl.Close()
	lim, e, err := c.limiterFor(cl)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	e.onGrant = func(now int64, n int) {
		mu.Lock()
		fmt.Fprintf(out, "g %d %d\n", now, n)
		mu.Unlock()
	}
	e.onRelease = func(now int64) {
		mu.Lock()
		fmt.Fprintf(out, "r %d %d\n", now, max(c.Permits, 1))
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Dur)
	defer cancel()
	var errs sync.Map
	var wg sync.WaitGroup
	for range c.G {
		wg.Go(func() {
			for ctx.Err() == nil {
				var l limiter.Lease
				var err error
				if c.UseTryAcq {
					l = lim.TryAcquire(max(c.Permits, 1))
					err = l.Err()
					if errors.Is(err, limiter.ErrLimited) {
						time.Sleep(time.Millisecond)
						continue
					}
				} else {
					l, err = lim.Acquire(ctx, max(c.Permits, 1))
				}
				if errors.Is(err, context.DeadlineExceeded) {
					return // the run's end: the wait would outlast it
				}
				if err != nil {
					if ctx.Err() == nil {
						v, _ := errs.LoadOrStore(err.Error(), new(int))
						mu.Lock()
						*v.(*int)++
						mu.Unlock()
						time.Sleep(5 * time.Millisecond)
					}
					continue
				}
				if c.Hold > 0 {
					time.Sleep(c.Hold)
				}
				l.Release()
			}
		})
	}
	wg.Wait()
	mu.Lock()
	errs.Range(func(k, v any) bool {
		fmt.Fprintf(out, "e %d %s\n", *v.(*int), strings.ReplaceAll(k.(string), "\n", " "))
		return true
	})
	out.Flush()
	mu.Unlock()
	return 0
}

// holderChild takes Limit permits of a semaphore, prints "held <µs>", then
// "renew <µs>" at every renewal, and holds them until killed.
func holderChild() int {
	c := readChildConfig()
	cl := c.client()
	lim, e, err := c.limiterFor(cl)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	e.onRenew = func(now int64) { fmt.Printf("renew %d\n", now) }
	e.onGrant = func(now int64, _ int) { fmt.Printf("held %d\n", now) }
	if _, err := lim.Acquire(context.Background(), c.Limit); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

// event is one line of a child's log.
type event struct {
	kind string // g (grant), r (release), e (errors)
	at   int64  // Redis µs
	n    int
	text string
}

// runChildren runs k children with cfg at once and returns their merged,
// time-ordered logs.
func runChildren(t *testing.T, k int, cfg childConfig, role string) []event {
	t.Helper()
	var mu sync.Mutex
	var all []event
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), append(cfg.env(), childEnv+"="+role)...)
			cmd.Stderr = os.Stderr
			outp, err := cmd.Output()
			if err != nil {
				t.Errorf("child %d: %v", i, err)
			}
			evs := parseEvents(string(outp))
			mu.Lock()
			all = append(all, evs...)
			mu.Unlock()
		})
	}
	wg.Wait()
	sort.SliceStable(all, func(i, j int) bool { return all[i].at < all[j].at })
	return all
}

func parseEvents(s string) []event {
	var evs []event
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		at, _ := strconv.ParseInt(f[1], 10, 64)
		n, _ := strconv.Atoi(f[2])
		if f[0] == "e" {
			evs = append(evs, event{kind: "e", n: int(at), text: strings.Join(f[2:], " ")})
			continue
		}
		evs = append(evs, event{kind: f[0], at: at, n: n})
	}
	return evs
}

// grantsOf returns the grant events, in time order.
func grantsOf(evs []event) []event {
	var g []event
	for _, e := range evs {
		if e.kind == "g" {
			g = append(g, e)
		}
	}
	return g
}
