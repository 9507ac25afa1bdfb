package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/rategate/rategate/limiter"
)

type countingReleaser struct{ released []int }

func (c *countingReleaser) ReleasePermits(n int) { c.released = append(c.released, n) }

func TestZeroLease(t *testing.T) {
	var l Lease
	if l.Granted() {
		t.Error("zero Lease is granted")
	}
	if l.Permits() != 0 {
		t.Errorf("zero Lease Permits = %d, want 0", l.Permits())
	}
	if l.RetryAfter() != 0 {
		t.Errorf("zero Lease RetryAfter = %v, want 0", l.RetryAfter())
	}
	if !errors.Is(l.Err(), ErrLimited) {
		t.Errorf("zero Lease Err = %v, want ErrLimited", l.Err())
	}
	l.Release() // must not panic
	l.Release()
}

func TestNewLease(t *testing.T) {
	r := &countingReleaser{}
	l := NewLease(3, r)
	if !l.Granted() || l.Permits() != 3 || l.Err() != nil || l.RetryAfter() != 0 {
		t.Fatalf("NewLease(3) = granted %v permits %d err %v retry %v; want true 3 nil 0",
			l.Granted(), l.Permits(), l.Err(), l.RetryAfter())
	}
	l.Release()
	if len(r.released) != 1 || r.released[0] != 3 {
		t.Fatalf("Release gave back %v, want [3]", r.released)
	}
	// A nil releaser: Release is a no-op.
	NewLease(2, nil).Release()
}

func TestDenied(t *testing.T) {
	other := errors.New("something else")
	for _, tc := range []struct {
		err   error
		want  error
		retry time.Duration
		wantR time.Duration
	}{
		{ErrLimited, ErrLimited, time.Second, time.Second},
		{ErrClosed, ErrClosed, 0, 0},
		{ErrQueueFull, ErrQueueFull, 0, 0},
		{ErrExceedsLimit, ErrExceedsLimit, 0, 0},
		{ErrInvalidCount, ErrInvalidCount, 0, 0},
		{errors.Join(other, ErrClosed), ErrClosed, 0, 0}, // matched with errors.Is
		{ErrNoLimiter, ErrNoLimiter, 0, 0},
		{context.Canceled, context.Canceled, 0, 0},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), context.DeadlineExceeded, time.Second, time.Second},
		{other, other, 5 * time.Millisecond, 5 * time.Millisecond}, // kept intact: redislimit's ErrUnavailable
		{fmt.Errorf("redis: %w", other), other, 0, 0},
		{nil, ErrLimited, -time.Second, 0}, // negative retry clamped to 0
	} {
		l := Denied(tc.err, tc.retry)
		if l.Granted() || l.Permits() != 0 {
			t.Errorf("Denied(%v) granted=%v permits=%d", tc.err, l.Granted(), l.Permits())
		}
		if !errors.Is(l.Err(), tc.want) {
			t.Errorf("Denied(%v).Err() = %v, want %v", tc.err, l.Err(), tc.want)
		}
		if l.RetryAfter() != tc.wantR {
			t.Errorf("Denied(%v, %v).RetryAfter() = %v, want %v", tc.err, tc.retry, l.RetryAfter(), tc.wantR)
		}
		l.Release() // no-op
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in  string
		n   int64
		per time.Duration
	}{
		{"100/s", 100, time.Second},
		{"5/min", 5, time.Minute},
		{"2/1500ms", 2, 1500 * time.Millisecond},
		{"10/h", 10, time.Hour},
		{"3/2m30s", 3, 150 * time.Second},
		{" 7 / ms ", 7, time.Millisecond},
		{"1/day", 1, 24 * time.Hour},
		{"4/µs", 4, time.Microsecond},
		{"1/.5s", 1, 500 * time.Millisecond},
	} {
		r, err := ParseRate(tc.in)
		if err != nil {
			t.Errorf("ParseRate(%q): %v", tc.in, err)
			continue
		}
		if r.Events() != tc.n || r.Period() != tc.per {
			t.Errorf("ParseRate(%q) = %d/%v, want %d/%v", tc.in, r.Events(), r.Period(), tc.n, tc.per)
		}
		if r != Per(int(tc.n), tc.per) {
			t.Errorf("ParseRate(%q) = %v, want Per(%d, %v)", tc.in, r, tc.n, tc.per)
		}
		// String reads back.
		back, err := ParseRate(r.String())
		if err != nil || back != r {
			t.Errorf("ParseRate(%q.String() = %q) = %v, %v; want %v", tc.in, r.String(), back, err, r)
		}
	}
	for _, in := range []string{
		"", "100", "/s", "100/", "x/s", "0/s", "-1/s", "1.5/s", "1/0s", "1/-5s",
		"1/fortnight", "1/s/s", "99999999999999999999/s", "1/5", "1/1e3s",
	} {
		if r, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %v, nil; want an error", in, r)
		}
	}
}

func TestRateHelpers(t *testing.T) {
	if !(Rate{}).IsZero() || Per(1, time.Second).IsZero() {
		t.Error("IsZero wrong")
	}
	for r, want := range map[Rate]string{
		Per(100, time.Second): "100/s", Per(5, time.Minute): "5/min", Per(10, time.Hour): "10/h",
		Per(3, time.Millisecond): "3/ms", Per(2, 1500*time.Millisecond): "2/1.5s",
	} {
		if r.String() != want {
			t.Errorf("%#v.String() = %q, want %q", r, r.String(), want)
		}
	}
}

// A rate limiter's lease gives nothing back: Release is a no-op, so releasing
// does not make room (unlike a concurrency lease).
func TestRateLeaseReleaseIsNoOp(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		if a.concurrency {
			t.Skip("a concurrency lease gives its permits back")
		}
		lim := mustMake(t, a, 1, QueueOptions{})
		l := lim.TryAcquire(1)
		if !l.Granted() || l.Permits() != 1 || l.Err() != nil || l.RetryAfter() != 0 {
			t.Fatalf("TryAcquire(1) = %v %d %v %v", l.Granted(), l.Permits(), l.Err(), l.RetryAfter())
		}
		l.Release()
		l.Release()
		if l2 := lim.TryAcquire(1); l2.Granted() {
			t.Fatal("Release of a rate lease gave a permit back")
		}
		if st := lim.Stats(); st.Available != 0 || st.Granted != 1 || st.Rejected != 1 {
			t.Fatalf("Stats = %+v, want Available 0, Granted 1, Rejected 1", st)
		}
	})
}
