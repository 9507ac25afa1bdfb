package iter_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rategate/rategate/iter"
	"github.com/rategate/rategate/limiter"
)

// reportLog is a limiter whose leases record, in order, what the loop
// body reported on them and when they were released.
type reportLog struct {
	events []string
}

func (r *reportLog) TryAcquire(n int) limiter.Lease { return limiter.NewLease(n, r) }

func (r *reportLog) Acquire(_ context.Context, n int) (limiter.Lease, error) {
	return limiter.NewLease(n, r), nil
}

func (r *reportLog) ReleasePermits(n int) { r.events = append(r.events, fmt.Sprintf("release %d", n)) }

func (r *reportLog) ReportOutcome(n int, o limiter.Outcome, latency time.Duration) {
	r.events = append(r.events, fmt.Sprintf("%v %v", o, latency))
}

// TestLeases: the body gets each value's lease, reports its outcome on it,
// and the lease is released after the body returns: the limiter hears each
// report, then the release, value by value.
func TestLeases(t *testing.T) {
	lim := &reportLog{}
	errs := []error{nil, fmt.Errorf("GET: 429: %w", limiter.ErrThrottled), errors.New("GET: 500")}
	var got []int
	seq, errf := iter.LeasesErr(context.Background(), slices.Values([]int{0, 1, 2}), lim)
	for i, lease := range seq {
		if !lease.Granted() || lease.Permits() != 1 {
			t.Fatalf("value %d: lease granted %v with %d permits, want 1 permit", i, lease.Granted(), lease.Permits())
		}
		got = append(got, i)
		lease.Report(limiter.OutcomeOf(errs[i]), time.Duration(i+1)*time.Millisecond)
	}
	if err := errf(); err != nil {
		t.Fatalf("the loop ended with %v", err)
	}
	want := []string{"succeeded 1ms", "release 1", "throttled 2ms", "release 1", "failed 3ms", "release 1"}
	if !slices.Equal(got, []int{0, 1, 2}) || !slices.Equal(lim.events, want) {
		t.Fatalf("values %v, limiter heard %q; want [0 1 2] and %q", got, lim.events, want)
	}

	// Breaking out releases the lease of the value in the body, once.
	lim.events = nil
	for range iter.Leases(context.Background(), slices.Values([]int{0, 1, 2}), lim) {
		break
	}
	if !slices.Equal(lim.events, []string{"release 1"}) {
		t.Fatalf("after a break the limiter heard %q, want one release", lim.events)
	}
}

// With a nil limiter every value passes with the zero Lease, on which a
// report does nothing; a nil sequence yields nothing and says so.
func TestLeasesNil(t *testing.T) {
	n := 0
	for _, lease := range iter.Leases(context.Background(), slices.Values([]int{1, 2}), nil) {
		if lease.Granted() {
			t.Fatal("a lease granted with no limiter")
		}
		lease.Report(limiter.Throttled, time.Millisecond)
		n++
	}
	if n != 2 {
		t.Fatalf("%d values with no limiter, want 2", n)
	}
	seq, errf := iter.LeasesErr[int](context.Background(), nil, nil)
	for range seq {
		t.Fatal("a nil sequence yielded")
	}
	if err := errf(); !errors.Is(err, iter.ErrInvalid) {
		t.Fatalf("nil sequence: %v, want ErrInvalid", err)
	}
}

// A loop over Leases that reports every value allocates per loop, not per
// value.
func TestLeasesAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	lim, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]int, 1000)
	allocs := testing.AllocsPerRun(20, func() {
		for _, lease := range iter.Leases(context.Background(), slices.Values(vals), lim) {
			lease.Report(limiter.Succeeded, time.Millisecond)
		}
	})
	if allocs > 8 {
		t.Fatalf("%v allocations for a loop of %d values, want a few per loop", allocs, len(vals))
	}
}
