package redislimit

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
)

// ownServer starts a server for one test, which may kill or stall it.
func ownServer(t *testing.T, realOnly bool) *redistest.Server {
	t.Helper()
	if realOnly && redistest.ServerPath() == "" {
		t.Skip("needs redis-server (the embedded server cannot be stalled, and has no INFO in scripts)")
	}
	s, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// redisTime reads the server's clock in µs.
func redisTime(t *testing.T, s *redistest.Server) int64 {
	t.Helper()
	v, err := s.Do("TIME")
	if err != nil {
		t.Fatal(err)
	}
	a := v.([]any)
	sec, _ := strconv.ParseInt(a[0].(string), 10, 64)
	us, _ := strconv.ParseInt(a[1].(string), 10, 64)
	return sec*1e6 + us
}

// TestFaultRestart kills the server under three processes sharing a strict
// log and starts it again, empty (no persistence): with GuardRestarts the
// merged log keeps the bound across the restart, the processes are refused
// with ErrUnavailable (and nothing else) while it is down, and grants
// resume after.
func TestFaultRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	s := ownServer(t, true)
	// The children run well past the restart: under load (CI runs packages
	// in parallel) spawning them and restarting the server can each take
	// hundreds of milliseconds, and with a 1.5 s run the restart once came
	// too late for any grant after it.
	cfg := childConfig{Addrs: []string{s.Addr}, Key: uniqueKey(t), Alg: "sl", Limit: 20, Window: 200 * time.Millisecond,
		Dur: runFor(3 * time.Second), G: 4, Guard: true, Timeout: 200 * time.Millisecond}
	restartedAt := make(chan int64, 1)
	go func() {
		time.Sleep(700 * time.Millisecond)
		s.Kill()
		time.Sleep(150 * time.Millisecond)
		if err := s.Restart(); err != nil {
			t.Error(err)
			restartedAt <- 0
			return
		}
		restartedAt <- redisTime(t, s)
	}()
	evs := runChildren(t, 3, cfg, "grants")
	restarted := <-restartedAt
	g := grantsOf(evs)
	checkSliding(t, g, cfg.Window, cfg.Limit)
	errs := 0
	for _, e := range evs {
		if e.kind == "e" {
			errs += e.n
			if !strings.Contains(e.text, ErrUnavailable.Error()) {
				t.Errorf("an error other than ErrUnavailable while the server was down: %s", e.text)
			}
		}
	}
	after := 0
	for _, e := range g {
		if e.at >= restarted {
			after++
		}
	}
	// While the server is down a call fails with ErrUnavailable, unless
	// go-redis's own reconnection outlasts the outage.
	t.Logf("%d grants, %d after the restart; %d refusals with ErrUnavailable while down", len(g), after, errs)
	if after == 0 {
		t.Fatal("no grant after the restart")
	}
}

// TestFaultStall stalls the server (CLIENT PAUSE): every decision fails
// within Options.Timeout, by policy (FailClosed refuses with ErrUnavailable,
// FailOpen grants, UseFallback asks the fallback); the decisions sent during
// the stall are counted at most once: the limit is never exceeded.
func TestFaultStall(t *testing.T) {
	s := ownServer(t, true)
	c := s.Client()
	defer c.Close()
	const timeout = 150 * time.Millisecond
	key := uniqueKey(t)
	closed, err := NewSlidingLog(Options{Client: c, Key: key, Timeout: timeout}, limiter.SlidingLogOptions{Limit: 5, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer closed.Close()
	open, _ := NewSlidingLog(Options{Client: c, Key: key, Timeout: timeout, OnError: FailOpen}, limiter.SlidingLogOptions{Limit: 5, Window: time.Minute})
	defer open.Close()
	fb, _ := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
	viaFB, _ := NewSlidingLog(Options{Client: c, Key: key, Timeout: timeout, OnError: UseFallback, Fallback: fb}, limiter.SlidingLogOptions{Limit: 5, Window: time.Minute})
	defer viaFB.Close()

	if l := closed.TryAcquire(1); !l.Granted() {
		t.Fatal(l.Err())
	}
	if err := s.Pause(time.Second); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l := closed.TryAcquire(1)
	took := time.Since(start)
	if l.Granted() || !errors.Is(l.Err(), ErrUnavailable) {
		t.Fatalf("FailClosed during a stall: granted %v, err %v", l.Granted(), l.Err())
	}
	if took < timeout || took > timeout+500*time.Millisecond {
		t.Fatalf("a stalled decision took %v, want about Timeout %v", took, timeout)
	}
	if _, err := closed.Acquire(context.Background(), 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Acquire during a stall: %v", err)
	}
	if l := open.TryAcquire(1); !l.Granted() {
		t.Fatalf("FailOpen during a stall: %v", l.Err())
	}
	if l := viaFB.TryAcquire(1); !l.Granted() || fb.Stats().Granted != 1 {
		t.Fatalf("UseFallback during a stall: %v, fallback grants %d", l.Err(), fb.Stats().Granted)
	} else {
		l.Release()
	}
	// Four decisions were sent during the stall. Redis drops those of
	// clients that hung up while paused, or runs them after the stall; either
	// way each is counted at most once, and nothing is granted over the limit.
	time.Sleep(time.Second - time.Since(start) + 100*time.Millisecond)
	granted := 0
	for range 5 {
		if closed.TryAcquire(1).Granted() {
			granted++
		}
	}
	logged, err := c.ZCard(context.Background(), closed.h.keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the stall: %d more grants; %d entries in the log", granted, logged)
	if 1+int64(granted) > logged || logged > 5 {
		t.Fatalf("after the stall: %d more grants, %d logged, limit 5", granted, logged)
	}
}

// TestFaultScriptFlush flushes Redis's script cache again and again while
// four goroutines share a strict log: every decision still succeeds (the
// script is re-sent after NOSCRIPT, and only then) and the bound holds.
func TestFaultScriptFlush(t *testing.T) {
	s := ownServer(t, false)
	c := s.Client()
	defer c.Close()
	saturation(t, func(attempt int) float64 {
		return scriptFlushRun(t, s, c, uniqueKey(t)+strconv.Itoa(attempt))
	})
}

func scriptFlushRun(t *testing.T, s *redistest.Server, c *redis.Client, key string) float64 {
	const window = 200 * time.Millisecond
	sl, err := NewSlidingLog(Options{Client: c, Key: key}, limiter.SlidingLogOptions{Limit: 20, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	var mu sync.Mutex
	var g []event
	sl.e.onGrant = func(now int64, n int) {
		mu.Lock()
		g = append(g, event{kind: "g", at: now, n: n})
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*window)
	defer cancel()
	var wg sync.WaitGroup
	var errs []error
	for range 4 {
		wg.Go(func() {
			for {
				_, err := sl.Acquire(ctx, 1)
				if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
					return
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	flushes := 0
	for ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		if _, err := s.Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		flushes++
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("errors across SCRIPT FLUSH: %v", errs)
	}
	checkSliding(t, g, window, 20)
	share := slidingShare(g, window, 20)
	t.Logf("%d grants across %d SCRIPT FLUSHes, %.1f%% of the limit", len(g), flushes, 100*share)
	return share
}

// TestFaultHolderKilled SIGKILLs a process holding every permit of a
// semaphore: the permits stay taken until LeaseTTL after its last renewal
// (decided at Redis's clock), and come back then.
func TestFaultHolderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	const ttl = 600 * time.Millisecond
	cfg := childConfig{Addrs: []string{server.Addr}, Key: uniqueKey(t), Alg: "cc", Limit: 3, LeaseTTL: ttl}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(cfg.env(), childEnv+"=holder")...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var last int64 // the holder's last renewal (or grant) it reported
	lines := make(chan int64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				lines <- v
			}
		}
		close(lines)
	}()
	last = <-lines // held
	deadline := time.After(450 * time.Millisecond)
	for wait := true; wait; {
		select {
		case v := <-lines:
			last = max(last, v)
		case <-deadline:
			wait = false
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	for v := range lines {
		last = max(last, v)
	}
	cmd.Wait()
	killed := redisTime(t, server)

	c := newClient(t)
	cc, err := NewConcurrency(Options{Client: c, Key: cfg.Key, LeaseTTL: ttl}, limiter.ConcurrencyOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var denied, granted int64
	cc.e.onDeny = func(now int64) { denied = now }
	cc.e.onGrant = func(now int64, _ int) { granted = now }
	start := time.Now()
	for granted == 0 && time.Since(start) < 3*ttl {
		if l := cc.TryAcquire(1); l.Granted() {
			l.Release()
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	ttlUS := int64(ttl / time.Microsecond)
	t.Logf("last renewal %d µs, killed at +%d µs, last refusal at +%d µs, first grant at +%d µs",
		last, killed-last, denied-last, granted-last)
	if granted == 0 {
		t.Fatal("the killed holder's permits never came back")
	}
	if granted < last+ttlUS {
		t.Fatalf("permits came back %d µs after the last renewal, before the TTL %v", granted-last, ttl)
	}
	if denied == 0 {
		t.Fatal("no refusal while the killed holder's lease was live")
	}
	if granted > killed+ttlUS+time.Second.Microseconds() { // liveness, on a loaded machine
		t.Fatalf("permits came back %d µs after the kill, long after the TTL %v", granted-killed, ttl)
	}
}

// TestGuardRestarts: on a server that has just started, a limit found
// missing is taken as used up at the server's start with GuardRestarts, and
// as new without it.
func TestGuardRestarts(t *testing.T) {
	s := ownServer(t, true)
	c := s.Client()
	defer c.Close()
	opts := limiter.SlidingLogOptions{Limit: 3, Window: 10 * time.Second}
	for _, guard := range []bool{false, true} {
		key := uniqueKey(t)
		sl, err := NewSlidingLog(Options{Client: c, Key: key, GuardRestarts: guard}, opts)
		if err != nil {
			t.Fatal(err)
		}
		l := sl.TryAcquire(1)
		sl.Close()
		if l.Granted() == guard {
			t.Fatalf("GuardRestarts %v on a server up for less than the window: granted %v", guard, l.Granted())
		}
		if guard && (l.RetryAfter() <= 8*time.Second || l.RetryAfter() > 10*time.Second) {
			t.Fatalf("RetryAfter %v, want the rest of the window from the server's start", l.RetryAfter())
		}
	}
	tb, _ := NewTokenBucket(Options{Client: c, Key: uniqueKey(t), GuardRestarts: true},
		limiter.TokenBucketOptions{Rate: limiter.Per(1, 10*time.Second), Burst: 1})
	defer tb.Close()
	if l := tb.TryAcquire(1); l.Granted() {
		t.Fatal("a guarded bucket granted on a server younger than its refill time")
	}
	fw, _ := NewFixedWindow(Options{Client: c, Key: uniqueKey(t), GuardRestarts: true},
		limiter.FixedWindowOptions{Limit: 1, Window: time.Hour})
	defer fw.Close()
	if l := fw.TryAcquire(1); l.Granted() {
		t.Fatal("a guarded window granted in the window the server started in")
	}
	// In a chain, each member guards as it does alone: one guarded member
	// refuses; unguarded members grant.
	guarded := func(guard bool) []limiter.Limiter {
		o := func() Options { return Options{Client: c, Key: "{g}" + uniqueKey(t), GuardRestarts: guard} }
		return []limiter.Limiter{
			must[limiter.Limiter](NewTokenBucket(o(), limiter.TokenBucketOptions{Rate: limiter.Per(1, 10*time.Second), Burst: 1})),
			must[limiter.Limiter](NewFixedWindow(o(), limiter.FixedWindowOptions{Limit: 1, Window: time.Hour})),
			must[limiter.Limiter](NewSlidingLog(o(), limiter.SlidingLogOptions{Limit: 3, Window: 10 * time.Second})),
		}
	}
	plain := guarded(false)
	if ch, err := Chain(plain...); err != nil {
		t.Fatal(err)
	} else if l := ch.TryAcquire(1); !l.Granted() {
		t.Fatalf("a chain of unguarded members refused: %v", l.Err())
	}
	for i, g := range guarded(true) {
		ms := append(guarded(false), g)
		ch, err := Chain(ms...)
		if err != nil {
			t.Fatal(err)
		}
		l := ch.TryAcquire(1)
		var cr *ChainRefusal
		if l.Granted() || !errors.As(l.Err(), &cr) || cr.Index != 3 {
			t.Fatalf("a chain with guarded member %d (%T): granted %v, %v; want a refusal by member 3", i, g, l.Granted(), l.Err())
		}
	}
	cc, _ := NewConcurrency(Options{Client: c, Key: uniqueKey(t), GuardRestarts: true, LeaseTTL: 10 * time.Second},
		limiter.ConcurrencyOptions{Limit: 1})
	defer cc.Close()
	if l := cc.TryAcquire(1); l.Granted() {
		l.Release()
		t.Fatal("a guarded semaphore granted on a server younger than its lease TTL")
	}
}

// waitUptime waits until s reports an uptime of at least up seconds.
func waitUptime(t *testing.T, s *redistest.Server, up int) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(up+2) * time.Second)
	for time.Now().Before(deadline) {
		v, err := s.Do("INFO", "server")
		if info, ok := v.(string); err == nil && ok && infoUptime(info) >= up {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("the server's uptime did not reach %ds", up)
}

func infoUptime(info string) int {
	_, rest, _ := strings.Cut(info, "uptime_in_seconds:")
	n, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	return n
}
