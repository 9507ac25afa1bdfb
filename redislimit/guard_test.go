//go:build unix

package redislimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
)

// Redis reports its uptime in whole seconds of its wall clock
// (uptime_in_seconds), so a server restarted at .9 of a second reads 1
// a tenth of a second later. TestGuardRestartOffsets restarts a server at
// chosen offsets within a second, right after every limit was used up, and
// checks each guarded limit's bound over the grants on both sides of the
// restart: the guards must take the server's start as no earlier than it
// can have been.
func TestGuardRestartOffsets(t *testing.T) {
	if redistest.ServerPath() == "" {
		t.Skip("needs redis-server (INFO in scripts, restarts)")
	}
	t.Parallel()
	for _, off := range []time.Duration{150 * time.Millisecond, 500 * time.Millisecond, 900 * time.Millisecond} {
		t.Run(off.String(), func(t *testing.T) {
			t.Parallel()
			guardRestartAt(t, off)
		})
	}
}

// grantLog records the grants an engine's script decided, stamped with
// Redis's clock.
type grantLog struct {
	mu sync.Mutex
	g  []event
}

func (l *grantLog) hook(now int64, n int) {
	l.mu.Lock()
	l.g = append(l.g, event{kind: "g", at: now, n: n})
	l.mu.Unlock()
}

func (l *grantLog) events() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event(nil), l.g...)
}

// guardLimits are the limits of one restart, each used up before it by an
// unguarded twin (same key and algorithm) and asked after it by a guarded
// one.
type guardLimits struct {
	tbOpts limiter.TokenBucketOptions
	fwOpts limiter.FixedWindowOptions
	slOpts limiter.SlidingLogOptions
	ttl    time.Duration // the semaphore's LeaseTTL
	keys   [4]string
	logs   [3]grantLog // tb, fw, sl: both twins' grants
	// holderLast is the semaphore holder's last grant or renewal, µs;
	// ccLast its value at the kill.
	holderLast atomic.Int64
	ccLast     int64
	ccGot      grantLog // grants to the guarded semaphore after the restart
}

func guardRestartAt(t *testing.T, off time.Duration) {
	s := ownServer(t, true)
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	g := &guardLimits{
		tbOpts: limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 10},
		fwOpts: limiter.FixedWindowOptions{Limit: 10, Window: 2 * time.Second},
		slOpts: limiter.SlidingLogOptions{Limit: 10, Window: time.Second},
		ttl:    time.Second,
	}
	for i := range g.keys {
		g.keys[i] = uniqueKey(t)
	}
	// Everything happens in the first second of a fixed window of 2s: the
	// limits are used up 150ms before off, the server is killed 40ms before
	// and started again at off.
	holder := g.useUp(t, c, off)
	defer holder.Close()
	sleepToOffset(off - 40*time.Millisecond)
	s.Kill()
	g.ccLast = g.holderLast.Load()
	sleepToOffset(off)
	restart := time.Now()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := redisTime(t, s)
	// The guards are asked once the server's uptime reads 1, which it does
	// at the next whole second of its clock: at .9, a tenth of a second
	// after the start.
	waitUptime(t, s, 1)
	var wg sync.WaitGroup
	wg.Go(func() { checkQuarantine(t, c, restart) })
	g.askGuarded(t, c, 700*time.Millisecond)
	wg.Wait()
	g.check(t, restarted)
}

// checkQuarantine: a Partitioned that first syncs with a server started at
// restart (or later) uses no partition before restart + LeaseTTL, when no
// lease of a lost state can be in use any more.
func checkQuarantine(t *testing.T, c redis.UniversalClient, restart time.Time) {
	po := PartitionedOptions{Rate: limiter.Per(1000, time.Second), Burst: 100, Partitions: 4, LeaseTTL: time.Second}
	p, err := NewPartitioned(Options{Client: c, Key: uniqueKey(t)}, po)
	if err != nil {
		t.Error(err)
		return
	}
	defer p.Close()
	end := restart.Add(po.LeaseTTL)
	for time.Now().Before(end) {
		before := time.Now()
		if p.TryAcquire(1).Granted() && before.Before(end) {
			t.Errorf("Partitioned granted %v after the restart, inside the quarantine of one LeaseTTL (%v)",
				before.Sub(restart), po.LeaseTTL)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// sleepToOffset sleeps until the wall clock is off into an even second
// (the next time it is, at least 10ms from now).
func sleepToOffset(off time.Duration) {
	const period = 2 * time.Second
	now := time.Now()
	in := time.Duration(now.Unix()%2)*time.Second + time.Duration(now.Nanosecond())
	d := ((off-in)%period + period) % period
	if d < 10*time.Millisecond {
		d += period
	}
	time.Sleep(d)
}

// useUp uses every limit up, shortly before off: the bucket, the window and
// the log with unguarded twins, the semaphore's one permit with a holder it
// returns (it renews the lease until the kill).
func (g *guardLimits) useUp(t *testing.T, c redis.UniversalClient, off time.Duration) *Concurrency {
	sleepToOffset(off - 150*time.Millisecond)
	o := func(i int) Options { return Options{Client: c, Key: g.keys[i]} }
	tb, _ := NewTokenBucket(o(0), g.tbOpts)
	fw, _ := NewFixedWindow(o(1), g.fwOpts)
	sl, _ := NewSlidingLog(o(2), g.slOpts)
	for i, e := range []*engine{tb.e, fw.e, sl.e} {
		e.onGrant = g.logs[i].hook
	}
	for i, l := range []limiter.Limiter{tb, fw, sl} {
		if lease := l.TryAcquire(10); !lease.Granted() {
			t.Fatalf("using up limit %d before the restart: %v", i, lease.Err())
		}
	}
	co := o(3)
	co.LeaseTTL = g.ttl
	holder, err := NewConcurrency(co, limiter.ConcurrencyOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	last := &g.holderLast
	holder.e.onGrant = func(now int64, _ int) { last.Store(now) }
	holder.e.onRenew = func(now int64) { last.Store(max(last.Load(), now)) }
	if _, err := holder.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	return holder
}

// askGuarded asks each limit's guarded twin, one permit at a time, for d
// after the restart.
func (g *guardLimits) askGuarded(t *testing.T, c redis.UniversalClient, d time.Duration) {
	o := func(i int) Options {
		return Options{Client: c, Key: g.keys[i], GuardRestarts: true}
	}
	tb, _ := NewTokenBucket(o(0), g.tbOpts)
	fw, _ := NewFixedWindow(o(1), g.fwOpts)
	sl, _ := NewSlidingLog(o(2), g.slOpts)
	co := o(3)
	co.LeaseTTL = g.ttl
	cc, err := NewConcurrency(co, limiter.ConcurrencyOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range []*engine{tb.e, fw.e, sl.e} {
		e.onGrant = g.logs[i].hook
	}
	cc.e.onGrant = g.ccGot.hook
	defer func() {
		for _, l := range []interface{ Close() error }{tb, fw, sl, cc} {
			l.Close()
		}
	}()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for _, l := range []limiter.Limiter{tb, fw, sl, cc} {
			l.TryAcquire(1).Release()
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// check checks each limit's bound over its grants on both sides of the
// restart (Redis's clock, µs).
func (g *guardLimits) check(t *testing.T, restarted int64) {
	t.Helper()
	for i := range g.logs {
		evs := g.logs[i].events()
		t.Logf("limit %d: %d grants, %d after the restart", i, len(evs), countAfter(evs, restarted))
	}
	checkBucket(t, g.logs[0].events(), 10, time.Second, 10)
	checkFixed(t, g.logs[1].events(), 2*time.Second, 10)
	checkSliding(t, g.logs[2].events(), time.Second, 10)
	ttl := g.ttl.Microseconds()
	for _, e := range g.ccGot.events() {
		if e.at < g.ccLast+ttl {
			t.Fatalf("the semaphore granted its one permit %d µs after the holder's last renewal, inside its lease TTL %v",
				e.at-g.ccLast, g.ttl)
		}
	}
}

func countAfter(g []event, at int64) int {
	n := 0
	for _, e := range g {
		if e.at >= at {
			n++
		}
	}
	return n
}

// A Partitioned hash lost on a long-running server (FLUSHALL, or evicted:
// it has a TTL, so volatile-* policies may evict it) is quarantined like
// one lost in a restart: two saturating limiters keep the global bound
// across a FLUSHALL and a DEL of the hash.
func TestPartitionedHashLost(t *testing.T) {
	if redistest.ServerPath() == "" {
		t.Skip("needs redis-server (INFO in scripts)")
	}
	t.Parallel()
	s := ownServer(t, true)
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	po := PartitionedOptions{Rate: limiter.Per(1000, time.Second), Burst: 100, Partitions: 4, LeaseTTL: 300 * time.Millisecond}
	waitUptime(t, s, 2) // no quarantine for the server's start
	key := uniqueKey(t)
	var pgrants [2][]grant
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range pgrants {
		p, err := NewPartitioned(Options{Client: c, Key: key}, po)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		wg.Go(func() { pgrants[i] = saturateLog(p, stop) })
	}
	time.Sleep(500 * time.Millisecond)
	var lost [2]int64
	for i, cmd := range [][]any{{"FLUSHALL"}, {"DEL", redisKey("pt", key, "", false, "")}} {
		lost[i] = time.Now().UnixNano()
		if _, err := s.Do(cmd...); err != nil {
			t.Fatal(err)
		}
		time.Sleep(700 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	all := append(pgrants[0], pgrants[1]...)
	t.Logf("%d + %d grants in 1.9 s", len(pgrants[0]), len(pgrants[1]))
	if msg, _ := boundViolation(all, int64(po.Burst), 1000, time.Second); msg != "" {
		t.Errorf("across the loss of the hash: %s", msg)
	}
	// Each limiter finds the hash missing at its next sync and stops using
	// its leases then; the partitions it takes join only when the
	// quarantine ends, one LeaseTTL after the first sync that found the hash
	// missing, so after the loss. Saturating, it grants nothing between.
	for i, gs := range pgrants {
		for j, at := range lost {
			gap, end := longestGap(gs, at, at+int64(700*time.Millisecond))
			t.Logf("limiter %d, loss %d: longest pause %v, to %v after the loss", i, j, gap, time.Duration(end-at))
			if end < at+int64(po.LeaseTTL-2*time.Millisecond) {
				t.Errorf("limiter %d granted again %v after loss %d of the hash, inside the quarantine of %v",
					i, time.Duration(end-at), j, po.LeaseTTL)
			}
		}
	}
}

// longestGap is the longest time between consecutive grants of gs in
// [from, to] (ns of the wall clock), and when it ended.
func longestGap(gs []grant, from, to int64) (time.Duration, int64) {
	var gap, end, last int64 = 0, from, from
	for _, g := range gs {
		if g.before < from || g.after > to {
			continue
		}
		if g.before-last > gap {
			gap, end = g.before-last, g.before
		}
		last = g.after
	}
	return time.Duration(gap), end
}

// saturateLog asks p for one permit at a time until stop, and returns the
// grants with the wall clock around each call.
func saturateLog(p *Partitioned, stop <-chan struct{}) []grant {
	var gs []grant
	for {
		select {
		case <-stop:
			return gs
		default:
		}
		before := time.Now().UnixNano()
		if p.TryAcquire(1).Granted() {
			gs = append(gs, grant{before, time.Now().UnixNano()})
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
}
