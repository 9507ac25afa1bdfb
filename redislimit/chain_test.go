package redislimit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
)

func init() { children["chain"] = chainChild }

// A chain decides all or nothing in one script call: a refusal names the
// member, says when every member could grant, and consumes nothing.
func TestChain(t *testing.T) {
	c := newClient(t)
	hook := &countingHook{}
	c.AddHook(hook)
	key := uniqueKey(t)
	perSec, _ := NewTokenBucket(Options{Client: c, Key: key + "/s"}, limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 10})
	perDay, _ := NewSlidingLog(Options{Client: c, Key: key + "/d"}, limiter.SlidingLogOptions{Limit: 3, Window: time.Hour})
	defer perSec.Close()
	defer perDay.Close()
	ch, err := Chain(perSec, perDay)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if l := ch.TryAcquire(1); !l.Granted() {
			t.Fatalf("grant %d: %v", i, l.Err())
		}
	}
	calls := hook.n.Load()
	l := ch.TryAcquire(1)
	var cr *ChainRefusal
	if l.Granted() || !errors.As(l.Err(), &cr) || cr.Index != 1 || cr.Member != perDay || !errors.Is(l.Err(), limiter.ErrLimited) {
		t.Fatalf("over the daily limit: granted %v, %v; want a ChainRefusal by member 1", l.Granted(), l.Err())
	}
	if n := hook.n.Load() - calls; n != 1 {
		t.Errorf("a chain decision took %d script calls", n)
	}
	if ra := l.RetryAfter(); ra < time.Hour-time.Minute || ra > time.Hour {
		t.Errorf("RetryAfter %v, want the daily log's, just under an hour", ra)
	}
	// The refusal took nothing from the bucket: 7 of its 10 are left.
	if q := perSec.Quota(); q.Remaining != 7 {
		t.Errorf("the bucket after 3 grants and a refusal: %+v, want 7 remaining", q)
	}
	qs := ch.(interface {
		AppendQuotas([]limiter.Quota) []limiter.Quota
	}).AppendQuotas(nil)
	if len(qs) != 2 || qs[0].Limit != 10 || qs[1].Limit != 3 || qs[1].Remaining != 0 {
		t.Errorf("AppendQuotas: %+v", qs)
	}
	if q, _ := limiter.QuotaOf(ch); q.Limit != 3 || q.Remaining != 0 {
		t.Errorf("Quota %+v, want the member with the fewest remaining, %+v", q, qs[1])
	}
	// When both refuse, RetryAfter is the later wait and names its member.
	for perSec.TryAcquire(1).Granted() {
	}
	ch2, _ := Chain(perDay, perSec)
	if l := ch2.TryAcquire(1); !errors.As(l.Err(), &cr) || cr.Index != 0 || l.RetryAfter() < time.Hour-time.Minute {
		t.Errorf("both refuse: %v, RetryAfter %v; want member 0 (the daily log), just under an hour", l.Err(), l.RetryAfter())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := ch.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire past the deadline: %v", err)
	}
	if s := perDay.Stats(); s.Granted != 3 {
		t.Errorf("the daily log's Stats: %+v, want the chain's 3 grants", s)
	}
	perDay.Close()
	if l := ch.TryAcquire(1); !errors.Is(l.Err(), limiter.ErrClosed) {
		t.Errorf("a chain with a closed member: %v", l.Err())
	}
}

// Keyed members' For results chain per key; Acquire waits for the member
// that refuses.
func TestChainKeyed(t *testing.T) {
	c := newClient(t)
	key := uniqueKey(t)
	a, _ := NewKeyedTokenBucket(Options{Client: c, Key: key + "/a"}, limiter.TokenBucketOptions{Rate: limiter.Per(20, time.Second), Burst: 1})
	b, _ := NewKeyedFixedWindow(Options{Client: c, Key: key + "/b"}, limiter.FixedWindowOptions{Limit: 100, Window: time.Hour})
	defer a.Close()
	defer b.Close()
	bu := b.For("u1")
	ch, err := Chain(a.For("u1"), bu)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 3 {
		if _, err := ch.Acquire(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Errorf("3 permits at 20/s, burst 1, in %v", d)
	}
	if q, _ := limiter.QuotaOf(bu); q.Remaining != 97 {
		t.Errorf("the window after 3 chain grants: %+v", q)
	}
	if l := b.For("u1").TryAcquire(97); !l.Granted() {
		t.Errorf("the window's other 97 permits: %v", l.Err())
	}
	if l := b.For("u2").TryAcquire(100); !l.Granted() {
		t.Errorf("another key's window: %v", l.Err())
	}
}

func TestChainErrors(t *testing.T) {
	c, c2 := newClient(t), newClient(t)
	tbo := limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 1}
	tb, _ := NewTokenBucket(Options{Client: c, Key: "a"}, tbo)
	tb2, _ := NewTokenBucket(Options{Client: c2, Key: "b"}, tbo)
	cc, _ := NewConcurrency(Options{Client: c, Key: "c"}, limiter.ConcurrencyOptions{Limit: 1})
	kcc, _ := NewKeyedConcurrency(Options{Client: c, Key: "kc"}, limiter.ConcurrencyOptions{Limit: 1})
	local, _ := limiter.NewTokenBucket(tbo)
	var many []limiter.Limiter
	for i := range maxChainMembers + 1 {
		l, _ := NewTokenBucket(Options{Client: c, Key: fmt.Sprint("m", i)}, tbo)
		many = append(many, l)
	}
	for _, tc := range []struct {
		ls   []limiter.Limiter
		want string
	}{
		{nil, "no members"},
		{[]limiter.Limiter{tb, cc}, "member 1 is a *redislimit.Concurrency"},
		{[]limiter.Limiter{tb, kcc.For("x")}, "member 1 is a *redislimit.keyLimiter"},
		{many, "17 members; a chain has at most 16"},
		{[]limiter.Limiter{tb, local}, "member 1 is a *limiter.TokenBucket"},
		{[]limiter.Limiter{tb, tb2}, "another client"},
		{[]limiter.Limiter{tb, tb}, "members 0 and 1 are the same limit"},
	} {
		if _, err := Chain(tc.ls...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Chain(%v): %v, want an error saying %q", tc.ls, err, tc.want)
		}
	}
}

// On Redis Cluster, members must share a hash tag; the error says how.
func TestChainCluster(t *testing.T) {
	if redistest.ServerPath() == "" {
		t.Skip("a cluster needs redis-server")
	}
	cl := sharedCluster(t).Client()
	defer cl.Close()
	key := uniqueKey(t)
	tbo := limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 2}
	mk := func(k string) *TokenBucket {
		l, err := NewTokenBucket(Options{Client: cl, Key: k}, tbo)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if _, err := Chain(mk(key+"x"), mk(key+"y")); err == nil || !strings.Contains(err.Error(), "hash tag") {
		t.Fatalf("members in two slots: %v, want an error naming the hash tag", err)
	}
	ch, err := Chain(mk("{"+key+"}x"), mk("{"+key+"}y"))
	if err != nil {
		t.Fatal(err)
	}
	if l := ch.TryAcquire(2); !l.Granted() {
		t.Fatalf("a chain in one slot: %v", l.Err())
	}
	users, _ := NewKeyedSlidingLog(Options{Client: cl, Key: "users"}, limiter.SlidingLogOptions{Limit: 5, Window: time.Minute})
	tenants, _ := NewKeyedTokenBucket(Options{Client: cl, Key: "tenants"}, tbo)
	ch, err = Chain(users.For("{"+key+"}alice"), tenants.For(key))
	if err != nil {
		t.Fatal(err)
	}
	if l := ch.TryAcquire(1); !l.Granted() {
		t.Fatalf("a user inside a tenant: %v", l.Err())
	}
}

// Three OS processes share a chain of a large fixed window and a small
// strict log: once the log refuses, the chains refused take nothing from
// the window, whose count in Redis is the chains' grants, exactly.
func TestChainProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := childConfig{Addrs: []string{server.Addr}, Key: uniqueKey(t), Limit: 50, Dur: runFor(700 * time.Millisecond), G: 2}
	evs := runChildren(t, 3, cfg, "chain")
	granted, refused := 0, 0
	for _, e := range evs {
		switch e.kind {
		case "g":
			granted += e.n
		case "x":
			refused += e.n
		case "e":
			t.Errorf("a child's errors: %d× %s", e.n, e.text)
		}
	}
	st, err := server.Do("GET", redisKey("fw", cfg.Key+"/fw", "", false, ""))
	if err != nil {
		t.Fatal(err)
	}
	var start, count, at int64
	fmt.Sscanf(st.(string), "%d %d %d", &start, &count, &at)
	t.Logf("3 processes: %d chain grants, %d refusals; the window counts %d", granted, refused, count)
	if granted != cfg.Limit || refused == 0 {
		t.Fatalf("%d grants (want the log's %d) and %d refusals (want some)", granted, cfg.Limit, refused)
	}
	if count != int64(granted) {
		t.Fatalf("the window counts %d permits for %d chain grants: refused chains took from it", count, granted)
	}
}

// chainChild asks a chain of a fixed window of 1000 an hour and a strict
// log of Limit an hour with G goroutines for Dur, and prints "g <0>
// <grants>", "x <0> <refusals>" and "e <n> <error>" lines.
func chainChild() int {
	c := readChildConfig()
	cl := c.client()
	defer cl.Close()
	fw, err := NewFixedWindow(Options{Client: cl, Key: c.Key + "/fw"}, limiter.FixedWindowOptions{Limit: 1000, Window: time.Hour})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sl, err := NewSlidingLog(Options{Client: cl, Key: c.Key + "/sl"}, limiter.SlidingLogOptions{Limit: c.Limit, Window: time.Hour})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ch, err := Chain(fw, sl)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	var granted, refused int
	errs := map[string]int{}
	end := time.Now().Add(c.Dur)
	var wg sync.WaitGroup
	for range c.G {
		wg.Go(func() {
			for time.Now().Before(end) {
				l := ch.TryAcquire(1)
				mu.Lock()
				switch {
				case l.Granted():
					granted++
				case errors.Is(l.Err(), limiter.ErrLimited):
					refused++
				default:
					errs[l.Err().Error()]++
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	fmt.Printf("g 0 %d\nx 0 %d\n", granted, refused)
	for e, n := range errs {
		fmt.Printf("e %d %s\n", n, strings.ReplaceAll(e, "\n", " "))
	}
	return 0
}
