package redislimit

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
)

func newPartitioned(t *testing.T, key string, po PartitionedOptions) *Partitioned {
	t.Helper()
	p, err := NewPartitioned(Options{Client: newClient(t), Key: key}, po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestPartitionedOptions(t *testing.T) {
	c := newClient(t)
	ok := PartitionedOptions{Rate: limiter.Per(100, time.Second), Burst: 10, Partitions: 4, LeaseTTL: time.Second}
	for _, tc := range []struct {
		field string
		o     Options
		po    func(*PartitionedOptions)
	}{
		{"Client", Options{Key: "k"}, func(*PartitionedOptions) {}},
		{"Key", Options{Client: c}, func(*PartitionedOptions) {}},
		{"Rate", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Rate = limiter.Rate{} }},
		{"Rate", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Rate = limiter.Per(1, -time.Second) }},
		{"Burst", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Burst = 0 }},
		{"Burst", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Burst = 3 }}, // < Partitions
		{"Partitions", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Partitions = 0 }},
		{"Partitions", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Partitions = MaxPartitions + 1 }},
		{"LeaseTTL", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.LeaseTTL = -time.Second }},
		{"LeaseTTL", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.LeaseTTL = time.Millisecond }},
		{"Burst", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Rate = limiter.Per(1, 1<<40); po.Burst = 1 << 40 }},
	} {
		po := ok
		tc.po(&po)
		_, err := NewPartitioned(tc.o, po)
		var oe *limiter.OptionError
		if !errors.As(err, &oe) || oe.Field != tc.field {
			t.Errorf("NewPartitioned(%+v, %+v): err = %v, want an OptionError for %s", tc.o, po, err, tc.field)
		}
	}
	p, err := NewPartitioned(Options{Client: c, Key: "k"}, PartitionedOptions{Rate: limiter.Per(100, time.Second), Burst: 4, Partitions: 4})
	if err != nil {
		t.Fatalf("zero LeaseTTL (the default): %v", err)
	}
	p.Close()
}

// saturate calls Acquire(ctx, 1) from g goroutines until ctx ends and
// counts the grants.
func saturate(ctx context.Context, l limiter.Limiter, g int, count *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := l.Acquire(ctx, 1); err == nil {
					count.Add(1)
				}
			}
		})
	}
	return &wg
}

// One busy process of three gets at least 90% of the global rate within a
// few lease periods: the idle ones give back the partitions they do not use.
func TestPartitionedFlowsToDemand(t *testing.T) {
	const rate = 2000
	po := PartitionedOptions{Rate: limiter.Per(rate, time.Second), Burst: 200, Partitions: 8, LeaseTTL: 300 * time.Millisecond}
	key := uniqueKey(t)
	ps := []*Partitioned{newPartitioned(t, key, po), newPartitioned(t, key, po), newPartitioned(t, key, po)}
	// All three busy for a while, so that each holds partitions.
	ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
	var counts [3]atomic.Int64
	var wgs []*sync.WaitGroup
	for i, p := range ps {
		wgs = append(wgs, saturate(ctx, p, 2, &counts[i]))
	}
	for _, wg := range wgs {
		wg.Wait()
	}
	cancel()
	for i, p := range ps {
		t.Logf("all busy: process %d holds %d partitions, %d grants", i, p.Partitions(), counts[i].Load())
	}
	// Then only the first: after three lease periods it holds (nearly) all.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	var busy atomic.Int64
	wg := saturate(ctx, ps[0], 2, &busy)
	time.Sleep(3 * po.LeaseTTL)
	before, start := busy.Load(), time.Now()
	time.Sleep(time.Second)
	got, elapsed := busy.Load()-before, time.Since(start)
	cancel()
	wg.Wait()
	share := float64(got) / (rate * elapsed.Seconds())
	t.Logf("one busy: %d grants in %v (%.1f%% of the rate); partitions held: %d, %d, %d; lease calls %d, %d, %d",
		got, elapsed, 100*share, ps[0].Partitions(), ps[1].Partitions(), ps[2].Partitions(),
		ps[0].LeaseCalls(), ps[1].LeaseCalls(), ps[2].LeaseCalls())
	if share < 0.9 {
		t.Errorf("the busy process got %.1f%% of the rate, want at least 90%%", 100*share)
	}
	if n := ps[1].Partitions() + ps[2].Partitions(); n != 0 {
		t.Errorf("the idle processes hold %d partitions, want 0", n)
	}
}

// The local decision, in a synctest bubble: partitions are installed by
// hand (as a sync would), so no round trip is made.

// holding returns a limiter that holds parts, with the given debt in
// permits, valid for an hour.
func holding(t *testing.T, po PartitionedOptions, parts []int, debtPermits int64) *Partitioned {
	t.Helper()
	p, err := NewPartitioned(Options{Client: server.Client(), Key: t.Name()}, po)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	now := p.now()
	_, old := p.lockDebt(now)
	p.parts = parts
	p.leaseDeadline = now + int64(time.Hour)
	p.install(now, p.leaseDeadline, debtPermits*p.cost, old)
	p.mu.Unlock()
	t.Cleanup(func() { p.o.Client.Close() })
	return p
}

// 100/s split into 4 partitions of 25/s, each with a burst of 10.
var unitOpts = PartitionedOptions{Rate: limiter.Per(100, time.Second), Burst: 40, Partitions: 4, LeaseTTL: time.Second}

func TestPartitionedLocalBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := holding(t, unitOpts, []int{1, 3}, 0)
		if n := p.Partitions(); n != 2 {
			t.Fatalf("Partitions() = %d, want 2", n)
		}
		// Two partitions: a burst of 20 at once, then 50/s.
		if l := p.TryAcquire(20); !l.Granted() {
			t.Fatalf("TryAcquire(20) on two full partitions: %v", l.Err())
		}
		l := p.TryAcquire(1)
		if l.Granted() || !errors.Is(l.Err(), limiter.ErrLimited) || l.RetryAfter() != 20*time.Millisecond {
			t.Fatalf("TryAcquire(1) on an empty bucket: granted %v, err %v, retry %v; want ErrLimited after 20ms", l.Granted(), l.Err(), l.RetryAfter())
		}
		time.Sleep(20 * time.Millisecond)
		if l := p.TryAcquire(1); !l.Granted() {
			t.Fatalf("TryAcquire(1) after 20ms: %v", l.Err())
		}
		// More than the held burst needs more partitions.
		if st, _ := p.take(p.now(), 21); st != ptShort {
			t.Fatalf("take(21) with a held burst of 20: status %d, want ptShort", st)
		}
		// More than the global burst is never granted.
		if l := p.TryAcquire(41); !errors.Is(l.Err(), limiter.ErrExceedsLimit) {
			t.Fatalf("TryAcquire(41) with Burst 40: %v, want ErrExceedsLimit", l.Err())
		}
		// No grant at or after the lease deadline.
		p.mu.Lock()
		deadline := p.cfg.Load().deadline
		p.mu.Unlock()
		if st, _ := p.take(deadline, 0); st != ptNoLease {
			t.Fatalf("take at the lease deadline: status %d, want ptNoLease", st)
		}
		if st, _ := p.take(deadline-1, 0); st != ptOK {
			t.Fatalf("take just before the lease deadline: status %d, want ptOK", st)
		}
	})
}

// Giving a partition back moves its share of the bucket's debt with it,
// rounded against the giver and the next holder alike.
func TestPartitionedReleaseShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := holding(t, unitOpts, []int{0, 1}, 15) // 15 of 20 permits owed
		p.mu.Lock()
		idx, debts := p.release(p.now(), 1)
		p.mu.Unlock()
		// Partition 1 owes 15·10/20 = 7.5 permits: 300 ms at 25/s.
		if len(idx) != 1 || idx[0] != 1 || debts[0] != 300_000 {
			t.Fatalf("release: %v with debts %v µs, want [1] with [300000]", idx, debts)
		}
		// Partition 0 keeps 7.5 of its 10: 2 whole permits available.
		if s := p.Stats(); s.Available != 2 || p.Partitions() != 1 {
			t.Fatalf("after the release: Available %d, Partitions %d; want 2 and 1", s.Available, p.Partitions())
		}
		time.Sleep(300 * time.Millisecond) // 7.5 permits at 25/s
		if s := p.Stats(); s.Available != 10 {
			t.Fatalf("300ms later: Available %d, want 10", s.Available)
		}
	})
}

// A sync's answer: lost partitions empty the bucket; partitions taken during
// a quarantine are used only when it ends, empty.
func TestPartitionedApply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := holding(t, unitOpts, []int{0, 1}, 0)
		p.mu.Lock()
		sendAt := p.now()
		p.apply(syncRequest{keep: []int{0, 1}}, syncReply{now: 1e15, qend: 1e15, lost: []int{1}, got: []int{2}, gotDebt: []int64{0}}, sendAt)
		p.mu.Unlock()
		if n, a := p.Partitions(), p.Stats().Available; n != 2 || a != 0 {
			t.Fatalf("after losing 1 and taking 2 (full): %d partitions, %d available; want 2 and 0 (emptied)", n, a)
		}
		// A quarantine of 500 ms (Redis lost its state).
		p.mu.Lock()
		sendAt = p.now()
		p.apply(syncRequest{keep: []int{0, 2}}, syncReply{now: 1e15, qend: 1e15 + 500_000, got: []int{3}, gotDebt: []int64{-1}}, sendAt)
		p.mu.Unlock()
		if n := p.Partitions(); n != 2 {
			t.Fatalf("a partition taken in quarantine is in use at once: %d partitions", n)
		}
		time.Sleep(500 * time.Millisecond)
		p.mu.Lock()
		p.activate(p.now())
		p.mu.Unlock()
		// Partitions 0 and 2 refilled 500ms·50/s = 25 > 20; 3 joins empty.
		if n, a := p.Partitions(), p.Stats().Available; n != 3 || a != 20 {
			t.Fatalf("after the quarantine: %d partitions, %d available; want 3 and 20", n, a)
		}
	})
}

// Acquire waits in FIFO order, and TryAcquire does not jump the queue.
func TestPartitionedAcquireQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := holding(t, unitOpts, []int{0}, 10) // empty: one permit per 40 ms
		var order []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				if _, err := p.Acquire(t.Context(), 1); err != nil {
					t.Errorf("Acquire %d: %v", i, err)
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			})
			synctest.Wait()
		}
		rejected := p.Stats().Rejected
		if l := p.TryAcquire(0); l.Granted() || !errors.Is(l.Err(), limiter.ErrLimited) || l.RetryAfter() != 0 {
			t.Errorf("TryAcquire behind three waiters: granted %v, err %v, retry %v; want ErrLimited", l.Granted(), l.Err(), l.RetryAfter())
		}
		// Behind waiters, a request over the global burst is told so.
		if l := p.TryAcquire(41); !errors.Is(l.Err(), limiter.ErrExceedsLimit) {
			t.Errorf("TryAcquire(41) with Burst 40 behind waiters: %v, want ErrExceedsLimit", l.Err())
		}
		if n := p.Stats().Rejected - rejected; n != 2 {
			t.Errorf("two refused TryAcquire calls counted %d rejections", n)
		}
		if s := p.Stats(); s.Waiters != 3 || s.Queued != 3 {
			t.Errorf("Stats with three waiters: %+v", s)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if _, err := p.Acquire(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Acquire behind three waiters with 50ms: %v, want DeadlineExceeded", err)
		}
		wg.Wait()
		if !slices.Equal(order, []int{0, 1, 2}) {
			t.Errorf("grant order %v, want FIFO", order)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Acquire(t.Context(), 1); !errors.Is(err, limiter.ErrClosed) {
			t.Errorf("Acquire after Close: %v, want ErrClosed", err)
		}
		if l := p.TryAcquire(1); !errors.Is(l.Err(), limiter.ErrClosed) {
			t.Errorf("TryAcquire after Close: %v, want ErrClosed", l.Err())
		}
	})
}

// A newcomer behind a head whose wait is known to outlast the newcomer's
// deadline fails at once, as in package limiter's queues, rather than
// wait until its deadline for nothing; one with time enough waits its turn.
func TestPartitionedQueueDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := holding(t, unitOpts, []int{0}, 10) // empty: one permit per 40 ms
		done := make(chan error, 1)
		go func() {
			_, err := p.Acquire(t.Context(), 5) // 200 ms away
			done <- err
		}()
		synctest.Wait()
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		l, err := p.Acquire(ctx, 1)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 0 {
			t.Errorf("behind a head served in 200ms, with 100ms: %v after %v; want DeadlineExceeded at once", err, time.Since(start))
		}
		if l.RetryAfter() != 200*time.Millisecond {
			t.Errorf("its RetryAfter %v, want the head's 200ms", l.RetryAfter())
		}
		ctx2, cancel2 := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel2()
		if _, err := p.Acquire(ctx2, 1); err != nil || time.Since(start) != 240*time.Millisecond {
			t.Errorf("behind that head with 300ms: %v after %v; want a grant at 240ms", err, time.Since(start))
		}
		if err := <-done; err != nil {
			t.Errorf("the head: %v", err)
		}
	})
}

// Close ends the wait of the head of the queue at once, not when the permits
// it waits for would have come.
func TestPartitionedCloseEndsHeadWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := holding(t, unitOpts, []int{0}, 10) // empty: the next permit in 40 ms
		errc := make(chan error, 1)
		go func() {
			_, err := p.Acquire(t.Context(), 5) // 200 ms away
			errc <- err
		}()
		synctest.Wait()
		start := time.Now()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, limiter.ErrClosed) {
			t.Fatalf("head waiter after Close: %v, want ErrClosed", err)
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("head waiter ended %v after Close, want at once", d)
		}
	})
}

func TestPartitionedNilContext(t *testing.T) {
	p := holding(t, unitOpts, []int{0}, 0)
	defer func() {
		if r := recover(); r != "redislimit: nil Context" {
			t.Fatalf("Acquire(nil): recovered %v", r)
		}
		if l := p.TryAcquire(1); !l.Granted() {
			t.Fatalf("the limiter is not usable after the nil Context panic: %v", l.Err())
		}
	}()
	var nilCtx context.Context
	p.Acquire(nilCtx, 1)
}

// Close gives the partitions back with their state: the next holder starts
// where the last left off (here full), while a holder that vanished without
// giving back leaves empty buckets to the next.
func TestPartitionedHandOver(t *testing.T) {
	po := PartitionedOptions{Rate: limiter.Per(1000, time.Second), Burst: 100, Partitions: 4, LeaseTTL: 200 * time.Millisecond}
	key := uniqueKey(t)
	first := newPartitioned(t, key, po)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	first.Acquire(ctx, 1) // takes partitions (after any quarantine)
	cancel()
	time.Sleep(150 * time.Millisecond) // full again: 100 permits at 1000/s
	held := first.Partitions()
	first.Close()
	second := newPartitioned(t, key, po)
	waitPartitions(t, second, held)
	if a := second.Stats().Available; a < int64(held)*25-1 {
		t.Errorf("after a Close, the next holder of %d partitions has %d permits available, want their full burst %d", held, a, held*25)
	}

	// A holder whose client goes away: its leases expire unreturned.
	lostClient := server.Client()
	third, err := NewPartitioned(Options{Client: lostClient, Key: key + "-crash"}, po)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	waitPartitions(t, third, 4)
	lostClient.Close()
	time.Sleep(po.LeaseTTL + 50*time.Millisecond)
	fourth := newPartitioned(t, key+"-crash", po)
	waitPartitions(t, fourth, 1)
	if a := fourth.Stats().Available; a >= 20 {
		t.Errorf("the holder after a crash starts with %d permits available, want an empty bucket", a)
	}
}

// waitPartitions asks p for capacity until it holds at least n partitions.
func waitPartitions(t *testing.T, p *Partitioned, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for p.Partitions() < n {
		if time.Now().After(deadline) {
			t.Fatalf("holds %d partitions after 3s, want %d", p.Partitions(), n)
		}
		p.TryAcquire(p.po.Burst) // refused: more than held, so it asks for all
		time.Sleep(5 * time.Millisecond)
	}
}

// The local decision allocates nothing, granted or refused.
func TestPartitionedTryAcquireAllocs(t *testing.T) {
	p := holding(t, PartitionedOptions{Rate: limiter.Per(1, time.Hour), Burst: 4, Partitions: 2, LeaseTTL: time.Second}, []int{0, 1}, 0)
	if a := testing.AllocsPerRun(100, func() { p.TryAcquire(1) }); a != 0 {
		t.Fatalf("TryAcquire allocates %v times per call", a)
	}
	if l := p.TryAcquire(1); l.Granted() {
		t.Fatal("the bucket should be empty after 100 calls")
	}
}

func TestPartitionedQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := holding(t, unitOpts, []int{0, 1}, 0)
		// The global policy: 40 permits per 400 ms (the time 100/s refills 40).
		want := limiter.Quota{Limit: 40, Window: 400 * time.Millisecond, Remaining: 20}
		if q := p.Quota(); q != want {
			t.Fatalf("Quota of two full partitions: %+v, want %+v", q, want)
		}
		p.TryAcquire(10)
		// 10 permits owed at 50/s: full again in 200 ms.
		want.Remaining, want.Reset = 10, 200*time.Millisecond
		if q := p.Quota(); q != want {
			t.Fatalf("Quota after 10: %+v, want %+v", q, want)
		}
	})
}

// With Redis out of reach no lease can be had: FailClosed refuses with
// ErrUnavailable, FailOpen grants, UseFallback asks the fallback.
func TestPartitionedUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	fallback, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 1})
	po := PartitionedOptions{Rate: limiter.Per(100, time.Second), Burst: 10, Partitions: 2, LeaseTTL: 100 * time.Millisecond}
	for _, tc := range []struct {
		policy ErrorPolicy
		check  func(l limiter.Lease) bool
		after  func(t *testing.T, p *Partitioned)
	}{
		{FailClosed, func(l limiter.Lease) bool { return !l.Granted() && errors.Is(l.Err(), ErrUnavailable) },
			func(t *testing.T, p *Partitioned) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				if _, err := p.Acquire(ctx, 1); !errors.Is(err, ErrUnavailable) {
					t.Fatalf("Acquire with Redis out of reach: %v, want ErrUnavailable at once", err)
				}
			}},
		{FailOpen, func(l limiter.Lease) bool { return l.Granted() }, func(*testing.T, *Partitioned) {}},
		{UseFallback, func(l limiter.Lease) bool { return l.Granted() }, // the fallback's one permit
			func(t *testing.T, p *Partitioned) {
				if l := p.TryAcquire(1); l.Granted() {
					t.Fatal("the fallback's only permit was granted twice")
				}
			}},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
			defer c.Close()
			p, err := NewPartitioned(Options{Client: c, Key: "k", OnError: tc.policy, Fallback: fallbackFor(tc.policy, fallback), Timeout: 50 * time.Millisecond}, po)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			// The first call finds no partition and starts the keeper,
			// whose sync fails.
			deadline := time.Now().Add(2 * time.Second)
			for l := p.TryAcquire(1); !tc.check(l); l = p.TryAcquire(1) {
				if time.Now().After(deadline) {
					t.Fatalf("after 2s: granted %v, err %v", l.Granted(), l.Err())
				}
				time.Sleep(5 * time.Millisecond)
			}
			tc.after(t, p)
		})
	}
}

// On a Redis Cluster the limiter's one hash lives in one slot; two limiters
// share the partitions through a ClusterClient.
func TestPartitionedCluster(t *testing.T) {
	if redistest.ServerPath() == "" {
		t.Skip("a cluster needs redis-server")
	}
	c := sharedCluster(t)
	key := "cluster {tenant} " + uniqueKey(t)
	po := PartitionedOptions{Rate: limiter.Per(1000, time.Second), Burst: 100, Partitions: 4, LeaseTTL: 200 * time.Millisecond}
	var ps []*Partitioned
	for range 2 {
		cl := c.Client()
		defer cl.Close()
		p, err := NewPartitioned(Options{Client: cl, Key: key}, po)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ps = append(ps, p)
	}
	waitPartitions(t, ps[0], 4)
	// The second wants some too: the fair level moves two over.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	var n atomic.Int64
	wg := saturate(ctx, ps[1], 1, &n)
	wg2 := saturate(ctx, ps[0], 1, &n)
	for ps[0].Partitions() != 2 || ps[1].Partitions() != 2 {
		if ctx.Err() != nil {
			t.Fatalf("after 3s the partitions are split %d / %d, want 2 / 2", ps[0].Partitions(), ps[1].Partitions())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	wg2.Wait()
}

// An idle limiter gives its partitions back and its keeper goroutine ends;
// the next call starts it again.
func TestPartitionedIdleKeeperEnds(t *testing.T) {
	po := PartitionedOptions{Rate: limiter.Per(1000, time.Second), Burst: 100, Partitions: 4, LeaseTTL: 100 * time.Millisecond}
	p := newPartitioned(t, uniqueKey(t), po)
	waitPartitions(t, p, 1)
	deadline := time.Now().Add(2 * time.Second)
	for p.keeperRunning.Load() || p.Partitions() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("2s idle: keeper running %v, %d partitions held", p.keeperRunning.Load(), p.Partitions())
		}
		time.Sleep(10 * time.Millisecond)
	}
	calls := p.LeaseCalls()
	time.Sleep(300 * time.Millisecond)
	if c := p.LeaseCalls(); c != calls {
		t.Fatalf("an idle limiter made %d lease calls in 300ms", c-calls)
	}
	waitPartitions(t, p, 1)
}

// A malformed sync reply (a proxy's, a foreign script's) is Redis unable to
// decide: its error wraps ErrUnavailable, as every other sync failure's does,
// so that FailClosed refuses with it.
func TestPartitionedMalformedReply(t *testing.T) {
	for _, reply := range []any{
		"OK",
		[]any{int64(1), int64(2)},
		[]any{int64(1), int64(0), int64(0), int64(0), int64(0), "x", int64(0)},
		[]any{int64(1), int64(0), int64(0), int64(0), int64(0), int64(5), int64(0)},
	} {
		if _, err := parseSyncReply(reply); !errors.Is(err, ErrUnavailable) {
			t.Errorf("parseSyncReply(%v): %v, want an error wrapping ErrUnavailable", reply, err)
		}
	}
	if r, err := parseSyncReply([]any{int64(7), int64(0), int64(0), int64(1500), int64(2), int64(0), int64(1), int64(3), int64(-1)}); err != nil ||
		r.now != 7 || r.level != 1.5 || r.free != 2 || len(r.got) != 1 || r.got[0] != 3 || r.gotDebt[0] != -1 {
		t.Errorf("a well-formed reply: %+v, %v", r, err)
	}
}
