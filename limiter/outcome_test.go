package limiter

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// outcomeRecorder is a limiter outside the package's algorithms whose leases
// record what Report and Settle tell them.
type outcomeRecorder struct {
	reports  []Outcome
	latency  time.Duration
	permits  int
	settled  [][2]int
	released int
}

func (r *outcomeRecorder) TryAcquire(n int) Lease { return NewLease(n, r) }
func (r *outcomeRecorder) Acquire(_ context.Context, n int) (Lease, error) {
	return NewLease(n, r), nil
}
func (r *outcomeRecorder) ReleasePermits(n int) { r.released += n }
func (r *outcomeRecorder) ReportOutcome(n int, o Outcome, latency time.Duration) {
	r.reports = append(r.reports, o)
	r.latency, r.permits = latency, n
}
func (r *outcomeRecorder) SettlePermits(granted, actual int) {
	r.settled = append(r.settled, [2]int{granted, actual})
}

func TestOutcomeOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Outcome
	}{
		{nil, Succeeded},
		{ErrThrottled, Throttled},
		{fmt.Errorf("GET /: %w", ErrThrottled), Throttled},
		{errors.Join(errors.New("429"), ErrThrottled), Throttled},
		{context.Canceled, Unknown},
		{fmt.Errorf("body: %w", context.Canceled), Unknown},
		{context.DeadlineExceeded, Failed},
		{errors.New("404"), Failed},
	} {
		if got := OutcomeOf(c.err); got != c.want {
			t.Errorf("OutcomeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	for o, name := range map[Outcome]string{Unknown: "unknown", Succeeded: "succeeded", Throttled: "throttled", Failed: "failed", 99: "unknown"} {
		if o.String() != name {
			t.Errorf("Outcome(%d).String() = %q, want %q", o, o.String(), name)
		}
	}
}

func TestReportReachesReporter(t *testing.T) {
	r := &outcomeRecorder{}
	l := r.TryAcquire(3)
	l.Report(Throttled, 40*time.Millisecond)
	if len(r.reports) != 1 || r.reports[0] != Throttled || r.latency != 40*time.Millisecond || r.permits != 3 {
		t.Fatalf("reporter saw %v latency %v permits %d, want [throttled] 40ms 3", r.reports, r.latency, r.permits)
	}
	// Refused leases, the zero Lease and leases of limiters that do not
	// learn ignore Report.
	Denied(ErrLimited, 0).Report(Succeeded, 0)
	Lease{}.Report(Succeeded, 0)
	NewLease(1, nil).Report(Succeeded, 0)
	if len(r.reports) != 1 {
		t.Fatalf("reports after refused and foreign leases: %v", r.reports)
	}
	if n := testing.AllocsPerRun(100, func() { l.Report(Succeeded, time.Millisecond) }); n != 0 {
		t.Errorf("Report allocates %v times per call, want 0", n)
	}
}

func TestSettle(t *testing.T) {
	r := &outcomeRecorder{}
	l := r.TryAcquire(1000)
	s := l.Settle(640)
	if s.Permits() != 640 || len(r.settled) != 1 || r.settled[0] != [2]int{1000, 640} {
		t.Fatalf("Settle(640): permits %d, settled %v", s.Permits(), r.settled)
	}
	s.Release()
	if r.released != 640 {
		t.Errorf("the settled lease released %d permits, want 640", r.released)
	}
	// Nothing to settle: same cost, negative cost, refused lease, a
	// limiter that cannot settle.
	for _, c := range []struct {
		l      Lease
		actual int
	}{{l, 1000}, {l, -1}, {Denied(ErrLimited, 0), 5}, {NewLease(4, nil), 2}} {
		if got := c.l.Settle(c.actual); got != c.l {
			t.Errorf("Settle(%d) of %+v changed the lease to %+v", c.actual, c.l, got)
		}
	}
	if len(r.settled) != 1 {
		t.Errorf("settled %v, want only the first", r.settled)
	}
}

func TestChainForwardsReportAndSettle(t *testing.T) {
	a, b := &outcomeRecorder{}, &outcomeRecorder{}
	tb, err := NewTokenBucket(TokenBucketOptions{Rate: Per(10, time.Second), Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	c := Chain(a, tb, b)
	l := c.TryAcquire(2)
	if !l.Granted() {
		t.Fatal("chain refused")
	}
	l.Report(Succeeded, time.Millisecond)
	l = l.Settle(1)
	l.Release()
	for name, r := range map[string]*outcomeRecorder{"first": a, "last": b} {
		if len(r.reports) != 1 || r.reports[0] != Succeeded {
			t.Errorf("%s member saw reports %v, want [succeeded]", name, r.reports)
		}
		if len(r.settled) != 1 || r.settled[0] != [2]int{2, 1} {
			t.Errorf("%s member settled %v, want [[2 1]]", name, r.settled)
		}
		if r.released != 1 {
			t.Errorf("%s member released %d, want the settled 1", name, r.released)
		}
	}
}

func TestLeaseHolds(t *testing.T) {
	tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(10, time.Second), Burst: 10})
	sem, _ := NewConcurrency(ConcurrencyOptions{Limit: 4})
	keyed, _ := NewKeyed(KeyedOptions[string]{New: func(string) (Limiter, error) {
		return NewConcurrency(ConcurrencyOptions{Limit: 2})
	}})
	rates, _ := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(10, time.Second), Burst: 10})
	defer tb.Close()
	defer sem.Close()
	for _, c := range []struct {
		name string
		l    Lease
		want bool
	}{
		{"token bucket", tb.TryAcquire(1), false},
		{"concurrency", sem.TryAcquire(1), true},
		{"chain of rates", Chain(tb, rates.For("a")).TryAcquire(1), false},
		{"chain holding a concurrency", Chain(tb, sem).TryAcquire(1), true},
		{"chain with a foreign member holding one", Chain(tb, &outcomeRecorder{}).TryAcquire(1), true},
		{"keyed concurrency", keyed.For("a").TryAcquire(1), true},
		{"keyed token bucket", rates.For("b").TryAcquire(1), false},
		{"foreign with a Releaser", NewLease(1, &outcomeRecorder{}), true},
		{"foreign without one", NewLease(1, nil), false},
		{"refused", sem.TryAcquire(5), false},
		{"zero", Lease{}, false},
	} {
		if got := c.l.Holds(); got != c.want {
			t.Errorf("%s: Holds() = %v, want %v", c.name, got, c.want)
		}
		c.l.Release()
	}
}
