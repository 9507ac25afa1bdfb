package limiter_test

import (
	"errors"
	"testing"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// TokenBucket.SetRate: the deficit owed at the change is repaid at the new
// rate, and a queued waiter is served at the new instant.
func TestTokenBucketSetRate(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 1})
		tb.TryAcquire(1)
		r := newRecorder(t)
		r.acquire(t.Context(), tb, 1, 1, 0) // would be served at 1s
		time.Sleep(ms(100))
		// 0.9 permit owed, at 10/s: 90 ms more.
		if err := tb.SetRate(Per(10, time.Second)); err != nil {
			t.Fatal(err)
		}
		if tb.Rate() != Per(10, time.Second) {
			t.Fatalf("Rate = %v", tb.Rate())
		}
		time.Sleep(time.Second)
		if o := r.find(t, 1); o.err != nil || o.at != ms(190) {
			t.Fatalf("waiter: %v at %v, want granted at 190ms", o.err, o.at)
		}
		// The new rate holds: one per 100 ms, from the last grant.
		wantTimes(t, loop(t, tb, 1, 3, 0), 0, 100, 200)
		// Slowing down: the waiter is served later.
		r.acquire(t.Context(), tb, 2, 1, 0) // would be served at +100ms
		time.Sleep(ms(50))                  // half a permit owed
		if err := tb.SetRate(Per(1, time.Second)); err != nil {
			t.Fatal(err)
		}
		start := r.since()
		time.Sleep(time.Second)
		if o := r.find(t, 2); o.err != nil || o.at != start+ms(500) {
			t.Fatalf("waiter after slowing down: %v at %v, want %v", o.err, o.at, start+ms(500))
		}
	})
}

// TokenBucket.SetBurst: a larger bucket serves a waiter at once (it is
// filled up to the deficit it had), a smaller one fails waiters asking more
// than the new Burst with ErrExceedsLimit and keeps its deficit.
func TestTokenBucketSetBurst(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 2})
		tb.TryAcquire(2)
		r := newRecorder(t)
		r.acquire(t.Context(), tb, 1, 2, 0) // would be served at 2s
		r.acquire(t.Context(), tb, 2, 1, 0) // behind it
		time.Sleep(ms(500))
		if err := tb.SetBurst(1); err != nil {
			t.Fatal(err)
		}
		synctestWait()
		o := r.find(t, 1)
		if !errors.Is(o.err, ErrExceedsLimit) || !errors.Is(o.lease.Err(), ErrExceedsLimit) || o.at != ms(500) {
			t.Fatalf("waiter for 2 after SetBurst(1): %v (lease %v) at %v; want ErrExceedsLimit at 500ms", o.err, o.lease.Err(), o.at)
		}
		if tb.Burst() != 1 {
			t.Fatalf("Burst = %d", tb.Burst())
		}
		// The deficit stays: 1.5 permits owed, and a bucket of 1 has room again
		// when they are repaid, at 2 s.
		time.Sleep(2 * time.Second)
		if o := r.find(t, 2); o.err != nil || o.at != ms(2000) {
			t.Fatalf("waiter 2: %v at %v, want granted at 2s", o.err, o.at)
		}
		if l := tb.TryAcquire(2); !errors.Is(l.Err(), ErrExceedsLimit) {
			t.Fatalf("TryAcquire(2) with Burst 1: %v", l.Err())
		}
		// Raising the burst: the deficit carries over, the room is there at once.
		time.Sleep(10 * time.Second) // full: 1 of 1
		if err := tb.SetBurst(5); err != nil {
			t.Fatal(err)
		}
		if l := tb.TryAcquire(5); !l.Granted() {
			t.Fatalf("TryAcquire(5) right after SetBurst(5) on a full bucket: %v, retry %v", l.Err(), l.RetryAfter())
		}
		r.acquire(t.Context(), tb, 3, 3, 0)
		if err := tb.SetBurst(3); err != nil { // 5 owed, bucket of 3: 3 free after 5 s
			t.Fatal(err)
		}
		start := r.since()
		time.Sleep(10 * time.Second)
		if o := r.find(t, 3); o.err != nil || o.at != start+5*time.Second {
			t.Fatalf("waiter 3: %v at %v, want granted at %v", o.err, o.at, start+5*time.Second)
		}
	})
}

// A new bucket whose settings change before any grant is still full.
func TestTokenBucketSetBeforeFirstGrant(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 2})
		if err := tb.SetBurst(4); err != nil {
			t.Fatal(err)
		}
		if l := tb.TryAcquire(4); !l.Granted() {
			t.Fatalf("TryAcquire(4) after SetBurst(4) on a new bucket: %v, retry %v", l.Err(), l.RetryAfter())
		}
		tb2, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 2})
		if err := tb2.SetRate(Per(5, time.Second)); err != nil {
			t.Fatal(err)
		}
		if l := tb2.TryAcquire(2); !l.Granted() {
			t.Fatalf("TryAcquire(2) after SetRate on a new bucket: %v, retry %v", l.Err(), l.RetryAfter())
		}
		lb, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(1, time.Second)})
		if err := lb.SetRate(Per(2, time.Second)); err != nil {
			t.Fatal(err)
		}
		if l := lb.TryAcquire(1); !l.Granted() {
			t.Fatalf("TryAcquire(1) after SetRate on a new pacer: %v, retry %v", l.Err(), l.RetryAfter())
		}
	})
}

// LeakyBucket.SetRate converts the wait owed to the new pace.
func TestLeakyBucketSetRate(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		lb, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(1, time.Second)})
		lb.TryAcquire(1)
		r := newRecorder(t)
		r.acquire(t.Context(), lb, 1, 1, 0) // would be served at 1s
		time.Sleep(ms(200))
		if err := lb.SetRate(Per(4, time.Second)); err != nil { // 0.8 slot owed: 200 ms at 4/s
			t.Fatal(err)
		}
		if lb.Rate() != Per(4, time.Second) {
			t.Fatalf("Rate = %v", lb.Rate())
		}
		time.Sleep(time.Second)
		if o := r.find(t, 1); o.err != nil || o.at != ms(400) {
			t.Fatalf("waiter: %v at %v, want granted at 400ms", o.err, o.at)
		}
		wantTimes(t, loop(t, lb, 1, 3, 0), 0, 250, 500)
	})
}

type limitSetter interface {
	testLimiter
	SetLimit(int) error
	Limit() int
}

// SetLimit on the windows, the log and the semaphore: raising it serves a
// queued waiter at once; lowering it fails waiters asking more than the new
// limit with ErrExceedsLimit and counts what was already granted.
func TestSetLimit(t *testing.T) {
	forEach(t, func(t *testing.T, a algo) {
		if a.name == "TokenBucket" || a.pacer {
			t.Skip("no SetLimit")
		}
		lim := mustMake(t, a, 2, QueueOptions{}).(limitSetter)
		held := lim.TryAcquire(2)
		r := newRecorder(t)
		r.acquire(t.Context(), lim, 1, 1, ms(700)) // a semaphore's lease comes back at 1s
		time.Sleep(ms(300))
		if err := lim.SetLimit(3); err != nil {
			t.Fatal(err)
		}
		synctestWait()
		if o := r.find(t, 1); o.err != nil || o.at != ms(300) {
			t.Fatalf("waiter after raising the limit: %v at %v, want granted at 300ms", o.err, o.at)
		}
		if lim.Limit() != 3 {
			t.Fatalf("Limit = %d", lim.Limit())
		}
		// The bound holds with the new limit: 3 used, nothing more now.
		if l := lim.TryAcquire(1); l.Granted() {
			t.Fatal("granted a 4th permit with a limit of 3")
		}
		r.acquire(t.Context(), lim, 2, 3, 0)
		r.acquire(t.Context(), lim, 3, 2, time.Hour)
		time.Sleep(ms(100))
		if err := lim.SetLimit(2); err != nil {
			t.Fatal(err)
		}
		synctestWait()
		o := r.find(t, 2)
		if !errors.Is(o.err, ErrExceedsLimit) || !errors.Is(o.lease.Err(), ErrExceedsLimit) || o.at != ms(400) {
			t.Fatalf("waiter for 3 after SetLimit(2): %v at %v; want ErrExceedsLimit at 400ms", o.err, o.at)
		}
		if r.done(3) {
			t.Fatal("waiter for 2 failed or was granted with 3 of 2 in use")
		}
		if l := lim.TryAcquire(3); !errors.Is(l.Err(), ErrExceedsLimit) {
			t.Fatalf("TryAcquire(3) with a limit of 2: %v", l.Err())
		}
		// Waiter 3 gets its 2 once the 3 granted earlier no longer count
		// against 2: all of them, since it asks for the whole limit.
		time.Sleep(ms(600))
		held.Release()
		time.Sleep(ms(400))
		want := map[string]time.Duration{
			"FixedWindow":   time.Second, // the next window
			"SlidingWindow": ms(1250),    // the segment of the grant at 300 ms leaves
			"SlidingLog":    ms(1300),    // the grant at 300 ms leaves
			"Concurrency":   time.Second, // both leases released
		}[a.name]
		if o := r.find(t, 3); o.err != nil || o.at != want {
			t.Fatalf("waiter 3: %v at %v, want granted at %v", o.err, o.at, want)
		}
		if l := lim.TryAcquire(1); l.Granted() {
			t.Fatal("granted beyond the lowered limit")
		}
		if c, ok := lim.(*Concurrency); ok && c.InUse() != 2 {
			t.Fatalf("InUse = %d, want 2", c.InUse())
		}
	})
}

// Lowering a semaphore's limit below the permits in use grants nothing more
// until enough are released.
func TestConcurrencySetLimitBelowInUse(t *testing.T) {
	synctestRun(t, func(t *testing.T) {
		c, _ := NewConcurrency(ConcurrencyOptions{Limit: 4})
		a, b := c.TryAcquire(2), c.TryAcquire(2)
		if err := c.SetLimit(1); err != nil {
			t.Fatal(err)
		}
		if c.InUse() != 4 || c.Stats().Available != 0 {
			t.Fatalf("InUse %d Available %d, want 4 and 0", c.InUse(), c.Stats().Available)
		}
		r := newRecorder(t)
		r.acquire(t.Context(), c, 1, 1, 0)
		a.Release()
		synctestWait()
		if r.done(1) || c.TryAcquire(0).Granted() {
			t.Fatal("granted with 2 in use and a limit of 1")
		}
		b.Release()
		synctestWait()
		if o := r.find(t, 1); o.err != nil {
			t.Fatal(o.err)
		}
		if c.InUse() != 0 || c.Stats().Available != 1 {
			t.Fatalf("InUse %d Available %d, want 0 and 1", c.InUse(), c.Stats().Available)
		}
	})
}
