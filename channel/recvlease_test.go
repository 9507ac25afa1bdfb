package channel

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// outcomes counts the outcomes reported on a Concurrency's leases.
type outcomes struct {
	*limiter.Concurrency
	got []limiter.Outcome
}

func (o *outcomes) ReportOutcome(_ int, out limiter.Outcome, _ time.Duration) {
	o.got = append(o.got, out)
}

// reporting is a limiter whose leases are a Concurrency's, reported to o.
type reporting struct{ o *outcomes }

func (r reporting) TryAcquire(n int) limiter.Lease {
	return r.o.Concurrency.TryAcquire(n).WithReleaser(r.o)
}

func (r reporting) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	l, err := r.o.Concurrency.Acquire(ctx, n)
	return l.WithReleaser(r.o), err
}

// TestRecvLease: the receiver gets the item's lease, still held: with a
// Concurrency of 1 nothing more is sent until the receiver releases it,
// and what it reports on it reaches the limiter.
func TestRecvLease(t *testing.T) {
	conc, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	o := &outcomes{Concurrency: conc}
	c := New[string](reporting{o})
	defer c.Close()
	ctx := context.Background()
	if err := c.TrySend("a"); err != nil {
		t.Fatal(err)
	}
	v, lease, err := c.RecvLease(ctx)
	if err != nil || v != "a" || !lease.Granted() {
		t.Fatalf("RecvLease = %q, granted %v, %v; want a granted lease of \"a\"", v, lease.Granted(), err)
	}
	if err := c.TrySend("b"); err == nil {
		t.Fatal("a second item sent while the first one's lease is held, at a limit of 1")
	}
	lease.Report(limiter.Throttled, time.Millisecond)
	lease.Release()
	if err := c.TrySend("b"); err != nil {
		t.Fatalf("TrySend after the release: %v", err)
	}
	if len(o.got) != 1 || o.got[0] != limiter.Throttled {
		t.Fatalf("the limiter heard %v, want one throttled", o.got)
	}
	// Recv releases at once, as before.
	if v, err := c.Recv(ctx); err != nil || v != "b" {
		t.Fatalf("Recv = %q, %v", v, err)
	}
	if conc.InUse() != 0 {
		t.Fatalf("%d permits in use after Recv, want 0", conc.InUse())
	}
	c.Close()
	if _, lease, err := c.RecvLease(ctx); !errors.Is(err, ErrClosed) || lease.Granted() {
		t.Fatalf("RecvLease on a closed, empty Chan: granted %v, %v; want the zero lease and ErrClosed", lease.Granted(), err)
	}
}
