package precise

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// In a synctest bubble the clock stands still while polled: every wait,
// shorter or longer than the spin, must end exactly at its instant, on the
// Go timer, and the Timer must stop spinning.
func TestUntilInBubble(t *testing.T) {
	for _, spin := range []time.Duration{0, time.Nanosecond, 50 * time.Millisecond, time.Hour} {
		synctest.Test(t, func(t *testing.T) {
			pt := Timer{Spin: spin}
			defer pt.Stop()
			for _, d := range []time.Duration{1, time.Microsecond, 900 * time.Microsecond, 3 * time.Millisecond, time.Second} {
				at := time.Now().Add(d)
				if r := pt.Until(t.Context(), nil, at, 0); r != Reached {
					t.Fatalf("Spin %v, wait %v: %v, want Reached", spin, d, r)
				}
				if now := time.Now(); !now.Equal(at) {
					t.Fatalf("Spin %v, wait %v: returned at %v, want exactly %v", spin, d, now, at)
				}
			}
			if pt.e.ch != nil {
				t.Fatalf("Spin %v: a wait in a bubble used the OS alarm", spin)
			}
		})
	}
}

// The bubble's timers fire on time: no observation reaches the estimate.
func TestBubbleObservesNothing(t *testing.T) {
	timerLate.ns.Store(int64(300 * time.Microsecond))
	defer timerLate.ns.Store(0)
	synctest.Test(t, func(t *testing.T) {
		var pt Timer
		defer pt.Stop()
		for range 10 {
			pt.Until(t.Context(), nil, time.Now().Add(10*time.Millisecond), 0)
		}
	})
	if got := Lateness(); got != 300*time.Microsecond {
		t.Fatalf("estimate moved to %v inside a bubble", got)
	}
}

// A wait ends on wake or on ctx, whichever comes first, in the timer phase
// and in the spin (the spin phase is forced with a long Spin; the waits are
// an hour long, so the test does not depend on the real clock's speed).
func TestUntilWakeAndDone(t *testing.T) {
	forEachEnd(t, testUntilWakeAndDone)
}

// forEachEnd runs test with the ends of waits on the OS alarm (where there
// is one) and spinning.
func forEachEnd(t *testing.T, test func(t *testing.T)) {
	t.Run("alarm", test)
	noAlarm = true
	defer func() { noAlarm = false }()
	t.Run("spin", test)
}

func testUntilWakeAndDone(t *testing.T) {
	for _, spin := range []time.Duration{0, 2 * time.Hour} {
		pt := Timer{Spin: spin}
		wake := make(chan struct{}, 1)
		at := time.Now().Add(time.Hour)
		go func() { wake <- struct{}{} }()
		if r := pt.Until(context.Background(), wake, at, 0); r != Woken {
			t.Fatalf("Spin %v: %v after a wake, want Woken", spin, r)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go cancel()
		if r := pt.Until(ctx, nil, at, 0); r != Done {
			t.Fatalf("Spin %v: %v after cancel, want Done", spin, r)
		}
		if r := pt.Until(ctx, nil, time.Time{}, 0); r != Done {
			t.Fatalf("Spin %v: no instant, cancelled: %v, want Done", spin, r)
		}
		pt.Stop()
	}
}

// lateness waits n times on the real clock, for 200 µs to 3 ms (spread
// over the grain, so that the timer's rounding is exercised), and returns
// the lateness of each wait, sorted; it fails the test if a wait ends early.
func lateness(t *testing.T, pt *Timer, n int) []time.Duration {
	t.Helper()
	lates := make([]time.Duration, n)
	for i := range lates {
		d := time.Duration(200+i*2800/n) * time.Microsecond
		at := time.Now().Add(d)
		if r := pt.Until(context.Background(), nil, at, 0); r != Reached {
			t.Fatalf("wait %v: %v", d, r)
		}
		if lates[i] = time.Since(at); lates[i] < 0 {
			t.Fatalf("wait %v: returned %v before its instant", d, -lates[i])
		}
	}
	slices.Sort(lates)
	return lates
}

// The bound the package documents, on the real clock: no wait ends before
// its instant (exact, every wait), and the median wait ends within 100 µs
// of it. The tolerance is for a shared machine: a wait on the alarm resumes
// within microseconds and polls the rest, so its lateness is the OS's delay
// in running the waiting goroutine. At a load average of 10 on this
// project's 2-core VM (8 test runs at once) the median stayed between
// 0.1 and 6 µs in 9 runs of 10 and reached 200 µs in one, while the 90th
// percentile reached milliseconds (other processes' time slices), so only
// the median is held to a bound, and a run is tried up to three times. A Go
// timer alone (Plain) is measured beside it and logged: on Linux its median
// is some 600 µs.
func TestLatenessBound(t *testing.T) {
	forEachEnd(t, func(t *testing.T) {
		const n = 40
		for try := 1; ; try++ {
			var pt Timer
			lates := lateness(t, &pt, n)
			pt.Stop()
			plain := Timer{Plain: true}
			pl := lateness(t, &plain, n)
			plain.Stop()
			t.Logf("precise: median %v, p90 %v, max %v; plain Go timer: median %v, p90 %v, max %v",
				lates[n/2], lates[n*9/10], lates[n-1], pl[n/2], pl[n*9/10], pl[n-1])
			if lates[n/2] <= 100*time.Microsecond {
				return
			}
			if try == 3 {
				t.Fatalf("median lateness %v, want <= 100µs; all: %v", lates[n/2], lates)
			}
		}
	})
}

// A Plain Timer waits on its Go timer alone: never on the alarm.
func TestPlain(t *testing.T) {
	pt := Timer{Plain: true}
	defer pt.Stop()
	at := time.Now().Add(300 * time.Microsecond)
	if r := pt.Until(context.Background(), nil, at, 0); r != Reached || time.Now().Before(at) {
		t.Fatalf("%v at %v before the instant", r, time.Until(at))
	}
	if pt.e.ch != nil {
		t.Fatal("a Plain wait used the OS alarm")
	}
}

// The estimate settles near the 90th percentile of what it observes, from
// above and from below, and stays within its bounds.
func TestObserveP90(t *testing.T) {
	defer timerLate.ns.Store(0)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, start := range []time.Duration{MaxSpin, minSpin} {
		timerLate.ns.Store(int64(start))
		// Uniform on [0, 1 ms): the 90th percentile is 900 µs. The
		// estimate wanders around it; its mean over many waits is close.
		var sum time.Duration
		for i := range 10000 {
			timerLate.observe(time.Duration(rng.Int64N(int64(time.Millisecond))))
			if i >= 2000 {
				sum += Lateness()
			}
		}
		if mean := sum / 8000; mean < 860*time.Microsecond || mean > 940*time.Microsecond {
			t.Errorf("from %v: mean estimate %v, want about 900µs", start, mean)
		}
	}
	timerLate.ns.Store(0)
	for range 1000 {
		timerLate.observe(time.Hour)
	}
	if got := Lateness(); got != MaxSpin {
		t.Errorf("after huge lateness: %v, want the cap %v", got, MaxSpin)
	}
	for range 5000 {
		timerLate.observe(1)
	}
	if got := Lateness(); got != minSpin {
		t.Errorf("after tiny lateness: %v, want the floor %v", got, minSpin)
	}
}
