package otellimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
)

// must panics on err: the calls it wraps cannot fail in these tests.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestRateLimiter scripts every result of a token bucket of 10/s, burst 2,
// queue of 2 permits, and checks every instrument after it.
func TestRateLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t, otellimit.Options{})
		tb := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{
			Rate: limiter.Per(10, time.Second), Burst: 2, Queue: limiter.QueueOptions{Limit: 2},
		}))
		w := m.Wrap(tb, "api")
		ctx := context.Background()

		// t=0: the burst, then refusals.
		l1, l2 := w.TryAcquire(1), w.TryAcquire(1)
		if !l1.Granted() || !l2.Granted() || l1.Permits() != 1 {
			t.Fatalf("burst: %v %v", l1, l2)
		}
		if l := w.TryAcquire(1); !errors.Is(l.Err(), limiter.ErrLimited) {
			t.Fatalf("third TryAcquire: %v", l.Err())
		}
		if l := w.TryAcquire(3); !errors.Is(l.Err(), limiter.ErrExceedsLimit) {
			t.Fatalf("TryAcquire(3): %v", l.Err())
		}
		l1.Report(limiter.Succeeded, 0)
		l2.Report(limiter.Throttled, 0)
		l1.Release() // a rate limiter's lease: nothing to give back, not timed

		// Granted at t=0.1, after 100ms in the queue.
		if _, err := w.Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}

		// A waiter for 2 permits fills the queue until t=0.3.
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := w.Acquire(ctx, 2); err != nil {
				t.Error(err)
			}
		})
		synctest.Wait()
		c := collect(t, r)
		c.want(t, "queued_requests", "policy=api 1")
		c.want(t, "queued_permits", "policy=api 2")
		c.want(t, "rate", "policy=api 10")
		c.want(t, "active_request_leases")
		c.want(t, "limit")
		if _, err := w.Acquire(ctx, 1); !errors.Is(err, limiter.ErrQueueFull) {
			t.Fatalf("Acquire behind a full queue: %v", err)
		}
		wg.Wait()

		// t=0.3: the next permit comes at 0.4, after this deadline.
		short, cancelShort := context.WithTimeout(ctx, 10*time.Millisecond)
		if _, err := w.Acquire(short, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire past its deadline: %v", err)
		}
		cancelShort()
		// A waiter cancelled after 50ms.
		cctx, cancel := context.WithCancel(ctx)
		wg.Go(func() {
			if _, err := w.Acquire(cctx, 1); !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled Acquire: %v", err)
			}
		})
		time.Sleep(50 * time.Millisecond)
		cancel()
		wg.Wait()

		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if l := w.TryAcquire(1); !errors.Is(l.Err(), limiter.ErrClosed) {
			t.Fatalf("TryAcquire after Close: %v", l.Err())
		}
		if _, err := w.Acquire(ctx, 1); !errors.Is(err, limiter.ErrClosed) {
			t.Fatalf("Acquire after Close: %v", err)
		}

		c = collect(t, r)
		c.want(t, "requests",
			"policy=api,result=granted 4",
			"policy=api,result=limited 1",
			"policy=api,result=exceeds_limit 1",
			"policy=api,result=queue_full 1",
			"policy=api,result=deadline_exceeded 1",
			"policy=api,result=canceled 1",
			"policy=api,result=closed 2",
		)
		c.want(t, "request.time_in_queue",
			"policy=api,result=granted n=2 sum=0.3 le0.1:1 le0.25:1",
			"policy=api,result=queue_full n=1 sum=0 le0.005:1",
			"policy=api,result=deadline_exceeded n=1 sum=0 le0.005:1",
			"policy=api,result=canceled n=1 sum=0.05 le0.05:1",
			"policy=api,result=closed n=1 sum=0 le0.005:1",
		)
		// A rate limiter's leases are passed through as they are: their
		// outcomes reach the limiter, not the counter.
		c.want(t, "outcomes")
		// Closed: its state is no longer observed.
		c.want(t, "queued_requests")
		c.want(t, "queued_permits")
		c.want(t, "rate")
		c.want(t, "request_lease.duration")
		c.want(t, "active_request_leases")
		c.want(t, "redis.decisions")
	})
}

// TestConcurrencyLimiter scripts the leases of a concurrency limiter of 2:
// leases held and their durations, a waiter, outcomes, a change of limit.
func TestConcurrencyLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t, otellimit.Options{})
		cl := must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 2}))
		w := m.Wrap(cl, "workers")
		defer w.Close()
		ctx := context.Background()

		a := w.TryAcquire(1)
		b := must(w.Acquire(ctx, 1))
		var c limiter.Lease
		var wg sync.WaitGroup
		wg.Go(func() { c = must(w.Acquire(ctx, 1)) })
		synctest.Wait()
		got := collect(t, r)
		got.want(t, "requests", "policy=workers,result=granted 2")
		got.want(t, "active_request_leases", "policy=workers 2")
		got.want(t, "queued_requests", "policy=workers 1")
		got.want(t, "queued_permits", "policy=workers 1")
		got.want(t, "limit", "policy=workers 2")
		got.want(t, "request_lease.duration")
		if s := w.Stats(); s.Waiters != 1 || s.Granted != 2 {
			t.Errorf("Stats passed through: %+v", s)
		}

		time.Sleep(3 * time.Second)
		a.Report(limiter.Succeeded, 0)
		a.Release() // held 3s; c is granted at t=3
		wg.Wait()
		time.Sleep(time.Second)
		b.Report(limiter.Throttled, 0)
		b.Release() // held 4s
		time.Sleep(500 * time.Millisecond)
		c.Report(limiter.Failed, 0)
		c.Release() // held 1.5s
		if cl.InUse() != 0 {
			t.Fatalf("%d permits in use after every release", cl.InUse())
		}
		if err := cl.SetLimit(3); err != nil {
			t.Fatal(err)
		}

		got = collect(t, r)
		got.want(t, "requests", "policy=workers,result=granted 3")
		got.want(t, "request.time_in_queue", "policy=workers,result=granted n=2 sum=3 le0.005:1 le5:1")
		got.want(t, "request_lease.duration", "policy=workers n=3 sum=8.5 le2.5:1 le5:2")
		got.want(t, "active_request_leases", "policy=workers 0")
		got.want(t, "queued_requests", "policy=workers 0")
		got.want(t, "queued_permits", "policy=workers 0")
		got.want(t, "limit", "policy=workers 3")
		got.want(t, "outcomes",
			"outcome=succeeded,policy=workers 1",
			"outcome=throttled,policy=workers 1",
			"outcome=failed,policy=workers 1",
		)
	})
}

// settling is a limiter of another package whose leases report outcomes and
// settle: it records what reaches it through the wrapped leases.
type settling struct {
	reports  []string
	settled  [][2]int
	released []int
}

func (s *settling) TryAcquire(n int) limiter.Lease { return limiter.NewLease(n, s) }
func (s *settling) Acquire(_ context.Context, n int) (limiter.Lease, error) {
	return s.TryAcquire(n), nil
}
func (s *settling) ReleasePermits(n int) { s.released = append(s.released, n) }
func (s *settling) ReportOutcome(n int, o limiter.Outcome, latency time.Duration) {
	s.reports = append(s.reports, o.String()+" "+latency.String())
}
func (s *settling) SettlePermits(granted, actual int) {
	s.settled = append(s.settled, [2]int{granted, actual})
}

// TestLeasePassThrough checks that Report and Settle reach the wrapped
// limiter's lease, and that the settled lease releases what it holds.
func TestLeasePassThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t, otellimit.Options{})
		s := &settling{}
		w := m.Wrap(s, "llm")
		l := w.TryAcquire(1000)
		l.Report(limiter.Succeeded, 5*time.Millisecond)
		settled := l.Settle(400)
		if settled.Permits() != 400 {
			t.Fatalf("settled lease holds %d permits, want 400", settled.Permits())
		}
		time.Sleep(2 * time.Second)
		settled.Release()
		if len(s.reports) != 1 || s.reports[0] != "succeeded 5ms" {
			t.Errorf("reports %q", s.reports)
		}
		if len(s.settled) != 1 || s.settled[0] != [2]int{1000, 400} {
			t.Errorf("settled %v", s.settled)
		}
		if len(s.released) != 1 || s.released[0] != 400 {
			t.Errorf("released %v, want [400]", s.released)
		}
		c := collect(t, r)
		c.want(t, "requests", "policy=llm,result=granted 1")
		c.want(t, "outcomes", "outcome=succeeded,policy=llm 1")
		c.want(t, "request_lease.duration", "policy=llm n=1 sum=2 le2.5:1")
		c.want(t, "active_request_leases", "policy=llm 0")
		// A limiter with no Stats, Limit or Rate has no gauges.
		c.want(t, "queued_requests")
	})
}

// TestSharedPolicy checks that limiters wrapped under one policy add up.
func TestSharedPolicy(t *testing.T) {
	m, r := newMetrics(t, otellimit.Options{})
	a := m.Wrap(must(limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 5, Window: time.Hour})), "shard")
	b := m.Wrap(must(limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 7, Window: time.Hour})), "")
	c := m.Wrap(must(limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 1, Window: time.Hour})), "shard")
	defer a.Close()
	defer b.Close()
	defer c.Close()
	a.TryAcquire(5)
	c.TryAcquire(1)
	c.TryAcquire(1)
	b.TryAcquire(1)
	got := collect(t, r)
	got.want(t, "requests",
		"policy=shard,result=granted 2",
		"policy=shard,result=limited 1",
		"policy=default,result=granted 1",
	)
	got.want(t, "limit", "policy=shard 6", "policy=default 7")
}

func TestNewRejectsNegativeMaxKeyValues(t *testing.T) {
	_, err := otellimit.New(otellimit.Options{MaxKeyValues: -1})
	var oe *limiter.OptionError
	if !errors.As(err, &oe) || oe.Field != "MaxKeyValues" {
		t.Fatalf("New: %v, want an OptionError for MaxKeyValues", err)
	}
}

func TestWrapNilPanics(t *testing.T) {
	m, _ := newMetrics(t, otellimit.Options{})
	defer func() {
		if recover() == nil {
			t.Error("Wrap(nil) did not panic")
		}
	}()
	m.Wrap(nil, "x")
}
