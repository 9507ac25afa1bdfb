//go:build linux

package precise

import (
	"context"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The alarm's reading goroutine ends once no wait is pending, also when the
// last one was cancelled long before its instant.
func TestAlarmGoroutineEnds(t *testing.T) {
	pt := Timer{Spin: 2 * time.Hour} // the whole hour-long wait is its end
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if r := pt.Until(ctx, nil, time.Now().Add(time.Hour), 0); r != Done {
		t.Fatalf("%v, want Done", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		alarm.mu.Lock()
		running, pending := alarm.running, len(alarm.due)
		alarm.mu.Unlock()
		if !running && pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alarm still running with %d pending waits", pending)
		}
		time.Sleep(time.Millisecond)
	}
}

// resetAlarm gives up the current alarm (ending its reading goroutine) and
// restores the real timerfd calls, so that the next wait makes a new one.
func resetAlarm(t *testing.T) {
	t.Helper()
	timerfdCreate, timerfdSettime = unix.TimerfdCreate, unix.TimerfdSettime
	alarm.mu.Lock()
	giveUp()
	alarm.mu.Unlock()
	waitAlarmIdle(t)
	alarm.once = sync.Once{}
}

// waitAlarmIdle waits for the alarm's reading goroutine to end.
func waitAlarmIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		alarm.mu.Lock()
		running := alarm.running
		alarm.mu.Unlock()
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the alarm's goroutine still runs")
		}
		time.Sleep(time.Millisecond)
	}
}

// An alarm that never fires (its timer set, so it seems, but not armed)
// holds no wait beyond its instant: the Go timer set for the instant ends
// it, Reached, never early.
func TestAlarmBackstop(t *testing.T) {
	resetAlarm(t)
	defer resetAlarm(t)
	timerfdSettime = func(int, int, *unix.ItimerSpec, *unix.ItimerSpec) error { return nil }
	pt := Timer{Spin: 50 * time.Millisecond} // the whole wait is its end, on the alarm
	defer pt.Stop()
	at := time.Now().Add(20 * time.Millisecond)
	if r := pt.Until(context.Background(), nil, at, 0); r != Reached {
		t.Fatalf("%v, want Reached", r)
	}
	if late := time.Since(at); late < 0 || late > time.Second {
		t.Fatalf("ended %v after its instant, want on the backstop, soon after", late)
	}
	alarm.mu.Lock()
	pending := len(alarm.due)
	alarm.mu.Unlock()
	if pending != 0 {
		t.Fatalf("%d waits left pending on the alarm", pending)
	}
}

// A timerfd that cannot be made, or armed, leaves no alarm: waits end by
// polling the clock, on time, and a wait pending when arming fails is woken
// to poll too.
func TestAlarmFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func()
	}{
		{"create", func() {
			timerfdCreate = func(int, int) (int, error) { return -1, unix.EMFILE }
		}},
		{"settime", func() {
			timerfdSettime = func(int, int, *unix.ItimerSpec, *unix.ItimerSpec) error { return unix.EINVAL }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resetAlarm(t)
			defer resetAlarm(t)
			tc.set()
			pt := Timer{Spin: 50 * time.Millisecond}
			defer pt.Stop()
			at := time.Now().Add(5 * time.Millisecond)
			if r := pt.Until(context.Background(), nil, at, 0); r != Reached || time.Now().Before(at) {
				t.Fatalf("%v, %v before the instant", r, time.Until(at))
			}
			alarm.mu.Lock()
			gone := alarm.fd < 0
			alarm.mu.Unlock()
			if !gone {
				t.Fatal("the alarm was kept after its timerfd failed")
			}
		})
	}
}

// A wait pending on the alarm when the alarm is given up is woken at once,
// and finishes by polling.
func TestGiveUpWakesPending(t *testing.T) {
	resetAlarm(t)
	defer resetAlarm(t)
	pt := Timer{Spin: 2 * time.Hour}
	defer pt.Stop()
	at := time.Now().Add(200 * time.Millisecond)
	done := make(chan Result, 1)
	go func() { done <- pt.Until(context.Background(), nil, at, 0) }()
	for {
		alarm.mu.Lock()
		n := len(alarm.due)
		if n > 0 {
			giveUp()
		}
		alarm.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	if r := <-done; r != Reached || time.Now().Before(at) {
		t.Fatalf("%v, %v before the instant", r, time.Until(at))
	}
}

// A wait that ends on the alarm allocates nothing, also when it starts the
// reading goroutine, as every wait after an idle spell does.
func TestAlarmWaitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	pt := Timer{Spin: 2 * time.Millisecond} // the whole wait is its end: on the alarm
	wait := func() {
		if r := pt.Until(context.Background(), nil, time.Now().Add(200*time.Microsecond), 0); r != Reached {
			t.Fatalf("%v, want Reached", r)
		}
	}
	wait() // the channel, the timer and the heap's array
	if a := testing.AllocsPerRun(100, func() {
		waitAlarmIdle(t)
		wait()
	}); a != 0 {
		t.Errorf("%v allocations per wait", a)
	}
}
