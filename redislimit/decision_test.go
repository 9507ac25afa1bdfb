package redislimit

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
)

// decisionLog records what Options.OnDecision is told.
type decisionLog struct {
	mu  sync.Mutex
	got []DecisionInfo
}

func (d *decisionLog) hook(i DecisionInfo) {
	d.mu.Lock()
	d.got = append(d.got, i)
	d.mu.Unlock()
}

func (d *decisionLog) all() []DecisionInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]DecisionInfo(nil), d.got...)
}

// OnDecision is told of every decision that asked Redis, with its duration,
// its error and who decided, and costs no allocation.
func TestOnDecision(t *testing.T) {
	c := newClient(t)
	var log decisionLog
	tbo := limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 2}
	tb, _ := NewTokenBucket(Options{Client: c, Key: uniqueKey(t), OnDecision: log.hook}, tbo)
	defer tb.Close()
	for range 3 {
		tb.TryAcquire(1)
	}
	tb.TryAcquire(-1) // refused without asking Redis
	got := log.all()
	if len(got) != 3 {
		t.Fatalf("3 decisions that asked Redis reported %d times", len(got))
	}
	for _, i := range got {
		if i.Answer != AnsweredByRedis || i.Err != nil || i.Duration <= 0 || i.Duration > time.Second {
			t.Errorf("a decision Redis made: %+v", i)
		}
	}
	// No allocation on the success path: with the hook as without it.
	plain, _ := NewTokenBucket(Options{Client: c, Key: uniqueKey(t)}, limiter.TokenBucketOptions{Rate: limiter.Per(1e9, time.Second), Burst: 1e9})
	hooked, _ := NewTokenBucket(Options{Client: c, Key: uniqueKey(t), OnDecision: func(DecisionInfo) {}}, limiter.TokenBucketOptions{Rate: limiter.Per(1e9, time.Second), Burst: 1e9})
	defer plain.Close()
	defer hooked.Close()
	a0 := testing.AllocsPerRun(200, func() { plain.TryAcquire(1) })
	a1 := testing.AllocsPerRun(200, func() { hooked.TryAcquire(1) })
	if a1 > a0 {
		t.Errorf("a decision allocates %.1f times with OnDecision, %.1f without", a1, a0)
	}

	addr, err := redistest.Refused()
	if err != nil {
		t.Fatal(err)
	}
	dead := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	defer waitDialsEnd(t)
	defer dead.Close()
	fb, _ := limiter.NewTokenBucket(tbo)
	for policy, want := range map[ErrorPolicy]Answer{FailClosed: AnsweredFailClosed, FailOpen: AnsweredFailOpen, UseFallback: AnsweredFallback} {
		var log decisionLog
		l, err := NewSlidingLog(Options{Client: dead, Key: "k", OnError: policy, Fallback: fallbackFor(policy, fb), Timeout: 50 * time.Millisecond, OnDecision: log.hook},
			limiter.SlidingLogOptions{Limit: 1, Window: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		l.TryAcquire(1)
		l.Close()
		if got := log.all(); len(got) != 1 || got[0].Answer != want || !errors.Is(got[0].Err, ErrUnavailable) {
			t.Errorf("%v with Redis out of reach: %+v, want one %v with an error wrapping ErrUnavailable", policy, got, want)
		}
	}
}

// A Chain reports its decision to each member's OnDecision; Partitioned
// reports each lease sync.
func TestOnDecisionChainAndPartitioned(t *testing.T) {
	c := newClient(t)
	var la, lb decisionLog
	a, _ := NewTokenBucket(Options{Client: c, Key: uniqueKey(t), OnDecision: la.hook}, limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 5})
	b, _ := NewFixedWindow(Options{Client: c, Key: uniqueKey(t), OnDecision: lb.hook}, limiter.FixedWindowOptions{Limit: 5, Window: time.Second})
	defer a.Close()
	defer b.Close()
	ch, _ := Chain(a, b)
	ch.TryAcquire(1)
	ch.TryAcquire(1)
	if na, nb := len(la.all()), len(lb.all()); na != 2 || nb != 2 {
		t.Errorf("two chain decisions reported %d and %d times to the members", na, nb)
	}
	var lp decisionLog
	p, err := NewPartitioned(Options{Client: c, Key: uniqueKey(t), OnDecision: lp.hook},
		PartitionedOptions{Rate: limiter.Per(100, time.Second), Burst: 10, Partitions: 2, LeaseTTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	waitPartitions(t, p, 1)
	p.Close()
	got := lp.all()
	if int64(len(got)) != p.LeaseCalls() || len(got) == 0 {
		t.Fatalf("%d lease syncs reported %d times", p.LeaseCalls(), len(got))
	}
	for _, i := range got {
		if i.Answer != AnsweredByRedis || i.Err != nil || i.Duration <= 0 {
			t.Errorf("a lease sync: %+v", i)
		}
	}
}
