package precise

import (
	"context"
	"math/rand/v2"
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
			if !pt.virtual {
				t.Fatalf("Spin %v: the Timer did not notice the clock standing still", spin)
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

// On the real clock a wait never ends before its instant, and it ends soon
// after it: with the spin it is late by far less than a timer alone (which
// rounds a sub-millisecond wait up to a millisecond on Linux). The bound
// checked is loose (the machine is shared); the early check is exact.
func TestUntilRealClock(t *testing.T) {
	forEachEnd(t, testUntilRealClock)
}

func testUntilRealClock(t *testing.T) {
	var pt Timer
	defer pt.Stop()
	var worst time.Duration
	for i := range 20 {
		d := time.Duration(100+i*137) * time.Microsecond
		at := time.Now().Add(d)
		if r := pt.Until(context.Background(), nil, at, 0); r != Reached {
			t.Fatalf("wait %v: %v", d, r)
		}
		late := time.Since(at)
		if late < 0 {
			t.Fatalf("wait %v: returned %v before its instant", d, -late)
		}
		worst = max(worst, late)
	}
	if pt.virtual {
		t.Fatal("the real clock was taken for a virtual one")
	}
	t.Logf("worst lateness %v, estimate %v", worst, Lateness())
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
