package limiter_test

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	. "github.com/rategate/rategate/limiter"
)

// Close fails every queued waiter with ErrClosed at once, later calls fail
// with ErrClosed, a second Close returns nil, and no goroutine is left.
func TestClose(t *testing.T) {
	for _, order := range []Order{OldestFirst, NewestFirst} {
		forEach(t, func(t *testing.T, a algo) {
			lim := mustMake(t, a, 1, QueueOptions{Order: order})
			held := lim.TryAcquire(1)
			r := newRecorder(t)
			for id := 1; id <= 3; id++ {
				r.acquire(t.Context(), lim, id, 1, 0)
			}
			time.Sleep(ms(200))
			if err := lim.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			synctestWait()
			for id := 1; id <= 3; id++ {
				o := r.find(t, id)
				if !errors.Is(o.err, ErrClosed) || o.at != ms(200) {
					t.Fatalf("waiter %d: %v at %v; want ErrClosed at 200ms", id, o.err, o.at)
				}
				if o.lease.Granted() || !errors.Is(o.lease.Err(), ErrClosed) {
					t.Fatalf("waiter %d lease: granted %v err %v", id, o.lease.Granted(), o.lease.Err())
				}
			}
			if st := lim.Stats(); st.Waiters != 0 || st.Queued != 0 || st.Rejected != 3 || st.Granted != 1 {
				t.Fatalf("Stats after Close = %+v", st)
			}
			// Later calls fail with ErrClosed, also once permits are free.
			time.Sleep(time.Hour)
			held.Release() // a lease granted before Close may still be released
			for _, n := range []int{0, 1} {
				if l := lim.TryAcquire(n); l.Granted() || !errors.Is(l.Err(), ErrClosed) || l.RetryAfter() != 0 {
					t.Fatalf("TryAcquire(%d) after Close: granted %v err %v", n, l.Granted(), l.Err())
				}
				before := time.Now()
				if l, err := lim.Acquire(t.Context(), n); !errors.Is(err, ErrClosed) || !errors.Is(l.Err(), ErrClosed) || time.Since(before) != 0 {
					t.Fatalf("Acquire(%d) after Close = %v", n, err)
				}
			}
			if err := lim.Close(); err != nil {
				t.Fatalf("second Close = %v", err)
			}
			if st := lim.Stats(); st.Rejected != 7 || st.Granted != 1 {
				t.Fatalf("Stats = %+v, want 7 rejected", st)
			}
		})
	}
	goleak.VerifyNone(t)
}

// Close of a limiter nobody waits on, and Close racing with waiters arriving.
func TestCloseRacingAcquire(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		lim := mustMake(t, a, 1, QueueOptions{})
		lim.TryAcquire(1)
		errs := make(chan error, 20)
		for range 20 {
			go func() {
				l, err := lim.Acquire(t.Context(), 1)
				if err == nil {
					l.Release()
				}
				errs <- err
			}()
		}
		lim.Close()
		closed := 0
		for range 20 {
			err := <-errs
			if errors.Is(err, ErrClosed) {
				closed++
			} else if err != nil {
				t.Fatalf("Acquire racing Close: %v", err)
			}
		}
		if closed != 20 {
			t.Fatalf("%d of 20 waiters failed with ErrClosed; no time passed, so none could be granted", closed)
		}
	})
}
