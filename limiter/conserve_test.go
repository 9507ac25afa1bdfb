package limiter_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// script drives a limiter made with limit 3 through a fixed sequence of
// TryAcquire and Acquire calls and sleeps, releasing every lease, and
// returns a transcript of the decisions and their instants (relative to its
// start).
func script(t *testing.T, lim Limiter) []string {
	var out []string
	start := time.Now()
	note := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("%v ", time.Since(start))+fmt.Sprintf(format, args...))
	}
	for i, n := range []int{1, 2, 0, 3, 1, 1, 2} {
		l := lim.TryAcquire(n)
		note("try%d(%d) %v %v", i, n, l.Granted(), l.RetryAfter())
		time.Sleep(time.Duration(i) * 90 * time.Millisecond)
		if i == 3 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			l2, err := lim.Acquire(ctx, 2)
			note("acquire(2) %v", err)
			l2.Release()
			cancel()
		}
		l.Release()
	}
	return out
}

// Permits are conserved: after every lease is released (or, for a rate
// limiter, the window has passed) a limiter that was used, refused, queued,
// canceled and timed out behaves exactly as a new one.
func TestConservation(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		fresh := mustMake(t, a, 3, QueueOptions{})
		want := script(t, fresh)

		used := mustMake(t, a, 3, QueueOptions{})
		made := time.Now()
		// Heavy use: grants, queued waiters, one canceled, one timed out.
		held := used.TryAcquire(3)
		r := newRecorder(t)
		ctx, cancel := context.WithCancel(t.Context())
		r.acquire(t.Context(), used, 1, 2, ms(100))
		r.acquire(ctx, used, 2, 3, 0)
		short, cancelShort := context.WithTimeout(t.Context(), ms(50))
		r.acquire(short, used, 3, 1, 0)
		r.acquire(t.Context(), used, 4, 1, ms(300))
		time.Sleep(ms(20))
		cancel()
		time.Sleep(ms(500))
		held.Release()
		time.Sleep(5 * time.Second)
		cancelShort()
		for id, wantOK := range map[int]bool{1: true, 2: false, 3: false, 4: true} {
			if o := r.find(t, id); (o.err == nil) != wantOK {
				t.Fatalf("waiter %d: %v", id, o.err)
			}
		}
		wantAvail := mustMake(t, a, 3, QueueOptions{}).Stats().Available // as a new one
		if st := used.Stats(); st.Available != wantAvail || st.Waiters != 0 || st.Queued != 0 {
			t.Fatalf("used limiter's Stats = %+v", st)
		}
		// Windows are aligned to the limiter's creation: compare from an
		// aligned instant, as the fresh limiter's script started at 0.
		time.Sleep(time.Second - time.Since(made)%time.Second)
		if got := script(t, used); !slices.Equal(got, want) {
			t.Fatalf("a used limiter behaves differently from a new one:\n got %q\nwant %q", got, want)
		}
	})
}

// After its burst is spent and the bucket has refilled, a token bucket
// grants the full burst again, not more.
func TestTokenBucketRefillsToBurst(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(5, time.Second), Burst: 5})
		for round := range 3 {
			if l := tb.TryAcquire(5); !l.Granted() {
				t.Fatalf("round %d: full burst refused (%v)", round, l.RetryAfter())
			}
			if l := tb.TryAcquire(1); l.Granted() || l.RetryAfter() != ms(200) {
				t.Fatalf("round %d: granted %v retry %v", round, l.Granted(), l.RetryAfter())
			}
			time.Sleep(time.Second + time.Duration(round)*time.Hour)
		}
	})
}
