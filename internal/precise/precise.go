// Package precise waits until an instant of the monotonic clock, on time,
// without an OS thread or a spinning core per wait.
//
// Go's timers wake late: on Linux the runtime sleeps in epoll_wait, whose
// timeout is whole milliseconds, so a timer fires up to a millisecond after
// its instant, plus the kernel's and the scheduler's own delay
// (golang/go#47084). A waiter that must act at the instant (a pacer granting
// its next permit) would lose that lateness on every wait. A Timer
// therefore sleeps on a Go timer until a little before the instant (by how
// late the process's Go timers have fired: a running estimate of their 90th
// percentile, capped at MaxSpin; on Linux, for a whole number of
// milliseconds, the grain of the runtime's sleeps), and waits the rest, the
// end, precisely:
//
//   - On Linux, on the alarm: one timerfd (golang.org/x/sys/unix) for the
//     whole process, which the kernel fires within microseconds, read by one
//     goroutine (one OS thread, blocked in read) that runs only while some
//     wait is pending and wakes the waits that are due. It wakes a wait
//     shortly before its instant (by how late such wake-ups have been), and
//     the wait polls the clock for the last microseconds. Each wait on the
//     alarm also keeps its Go timer set for the instant itself, a backstop:
//     should the alarm never fire, the wait ends when that timer does. If the
//     timerfd cannot be made, armed or read, the alarm is given up for the
//     life of the process and waits fall back to polling.
//   - Elsewhere, by polling the clock, yielding the processor between polls
//     (runtime.Gosched), for the whole end: precise, at the cost of a busy
//     core while it lasts.
//
// Either way a wait that reports Reached returns at its instant or after,
// never before. On Linux half of the waits end within 100 µs of their
// instant, most within microseconds (TestLatenessBound checks the median on
// the real clock), where a Go timer alone fires some 600 µs late at the
// median and up to a millisecond late, plus what the OS adds on a loaded
// machine, which no wait escapes. A
// caller that can absorb some lateness at no cost (a token bucket whose
// spare burst keeps filling) says so with a slack, which shortens the end or
// removes it; a caller that would rather not spend the end's CPU sets
// Timer.Plain, and waits on its Go timer alone.
//
// Where time.Now carries no monotonic reading, as inside a testing/synctest
// bubble (whose clock advances only when every goroutine is blocked), a
// Timer waits on its Go timer alone, so virtual time stays deterministic;
// the alarm, which runs on real time, is never used there. Telling costs a
// comparison of the clock reading Until takes anyway.
package precise

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"
)

const (
	// MaxSpin caps the end: past it, a late timer costs the waiter its
	// lateness rather than more CPU.
	MaxSpin = 2 * time.Millisecond
	// minSpin is the smallest estimate: the cost of a wake-up itself.
	minSpin = 20 * time.Microsecond
	// initialSpin is the estimate before any timer was observed: the cap,
	// so that the first waits are precise while the estimate comes down to
	// what this machine shows (an estimate that starts low makes its first
	// waits late until it has climbed).
	initialSpin = MaxSpin
	// tight is how close to the instant the spin stops yielding and polls
	// the clock alone, so that a goroutine run by Gosched cannot make it late.
	tight = 20 * time.Microsecond
)

// estimate is a running estimate of the 90th percentile of a lateness,
// between lo and hi; initial before the first observation.
type estimate struct {
	ns              atomic.Int64 // 0: no observation yet
	initial, lo, hi time.Duration
}

var (
	// timerLate is how late a Go timer fires: its 90th percentile, so that
	// one wait in ten finds its timer later than the end began and is late
	// by the difference.
	timerLate = estimate{initial: initialSpin, lo: minSpin, hi: MaxSpin}
	// alarmLate is how late a wait on the OS alarm resumes: its 90th
	// percentile too (a higher one spins longer, and on a busy machine a
	// spinning thread is the first the OS preempts).
	alarmLate = estimate{initial: 50 * time.Microsecond, lo: time.Microsecond, hi: 500 * time.Microsecond}
)

// Lateness returns the current estimate of how late a Go timer fires (the
// 90th percentile, between minSpin and MaxSpin).
func Lateness() time.Duration { return timerLate.get() }

func (e *estimate) get() time.Duration {
	if v := e.ns.Load(); v > 0 {
		return time.Duration(v)
	}
	return e.initial
}

// observe updates the estimate with one lateness. The estimate moves up by
// 9 steps when late is above it and down by one step otherwise, so it
// settles where 10% of the observations lie above it; a step is 1/128 of the
// estimate, so it follows the lateness within a few hundred waits, in
// either direction, whatever its scale.
func (e *estimate) observe(late time.Duration) {
	raw := e.ns.Load()
	old := time.Duration(raw)
	if raw == 0 {
		old = e.initial
	}
	step := max(old>>7, 1)
	next := old - step
	if late > old {
		next = old + 9*step
	}
	next = min(max(next, e.lo), e.hi)
	// A lost race drops this observation: it is an estimate.
	e.ns.CompareAndSwap(raw, int64(next))
}

// Result says why a wait ended.
type Result int

const (
	// Reached: the clock reached the instant.
	Reached Result = iota
	// Woken: a value arrived on the wake channel.
	Woken
	// Done: the context ended.
	Done
)

// Timer waits precisely. The zero Timer is ready for use. A Timer is not
// safe for concurrent use; reuse one per waiter to wait without allocating.
type Timer struct {
	// Spin, when positive, is the end's length, in place of the estimate.
	Spin time.Duration
	// Plain waits on a Go timer alone: no end on the alarm or polling the
	// clock, so no CPU beyond the wake-up, at the cost of the timer's
	// lateness on every wait.
	Plain bool

	t *time.Timer
	e entry // this Timer's wait on the OS alarm
}

// Stop releases the Timer's Go timer, if it runs.
func (t *Timer) Stop() {
	if t.t != nil {
		t.t.Stop()
	}
}

// virtual reports whether now, a reading of time.Now, lacks a monotonic
// reading: inside a testing/synctest bubble (whose clock does not move
// while goroutines run) or on a platform without a monotonic clock.
func virtual(now time.Time) bool { return now == now.Round(0) }

// Until waits until the clock reaches at, a value arrives on wake (a nil
// wake never does), or ctx ends, and says which came first. A zero at means
// no instant: only wake or ctx end the wait. slack is how late past at the
// caller may be woken at no cost: the end is shortened by it, and a slack of
// at least the estimated lateness waits on a Go timer alone.
//
// When it returns Reached, the clock reads at or later, never earlier.
func (t *Timer) Until(ctx context.Context, wake <-chan struct{}, at time.Time, slack time.Duration) Result {
	if at.IsZero() {
		select {
		case <-wake:
			return Woken
		case <-ctx.Done():
			return Done
		}
	}
	now := time.Now()
	plain := t.Plain || virtual(now)
	for {
		left := at.Sub(now)
		if left <= 0 {
			return Reached
		}
		end := time.Duration(0)
		if !plain {
			end = t.end(slack)
		}
		d := left
		if end > 0 {
			d = (left - end).Truncate(grain)
		}
		if d <= 0 {
			return t.finish(ctx, wake, at)
		}
		if r := t.sleep(ctx, wake, d); r != Reached {
			return r
		}
		armed := now
		now = time.Now()
		if end > 0 {
			timerLate.observe(now.Sub(armed) - d)
		}
	}
}

// end is how long before the instant the Go timer should end and the
// precise end begin.
func (t *Timer) end(slack time.Duration) time.Duration {
	w := t.Spin
	if w <= 0 {
		w = timerLate.get()
	}
	return max(w-slack, 0)
}

// arm sets the Go timer to fire in d.
func (t *Timer) arm(d time.Duration) {
	if t.t == nil {
		t.t = time.NewTimer(d)
	} else {
		t.t.Reset(d)
	}
}

// sleep waits d on the Go timer, or until wake or ctx.
func (t *Timer) sleep(ctx context.Context, wake <-chan struct{}, d time.Duration) Result {
	t.arm(d)
	select {
	case <-t.t.C:
		return Reached
	case <-wake:
		t.t.Stop()
		return Woken
	case <-ctx.Done():
		t.t.Stop()
		return Done
	}
}

// noAlarm makes waits spin rather than use the OS alarm (for tests).
var noAlarm bool

// finish waits the last stretch before at, shorter than a Go timer can
// wait precisely: on the OS alarm where there is one, until shortly before
// at, then by spinning.
func (t *Timer) finish(ctx context.Context, wake <-chan struct{}, at time.Time) Result {
	if !noAlarm {
		if r, ok := t.alarm(ctx, wake, at); ok && r != Reached {
			return r
		}
	}
	return t.spin(ctx, wake, at)
}

// alarm waits on the OS alarm until shortly before at (by how late it has
// resumed waits so far), or until wake or ctx, with the Go timer set for at
// as a backstop; ok is false when there is no alarm.
func (t *Timer) alarm(ctx context.Context, wake <-chan struct{}, at time.Time) (r Result, ok bool) {
	if t.e.ch == nil {
		t.e.ch = make(chan struct{}, 1)
	}
	select {
	case <-t.e.ch: // a signal left from an earlier wait
	default:
	}
	t.e.at = at.Add(-alarmLate.get())
	if !alarmAdd(&t.e) {
		return Reached, false
	}
	t.arm(time.Until(at))
	defer t.t.Stop()
	select {
	case <-t.e.ch:
		alarmLate.observe(time.Since(t.e.at))
		return Reached, true
	case <-t.t.C: // the backstop: the alarm did not fire in time
		alarmRemove(&t.e)
		return Reached, true
	case <-wake:
		alarmRemove(&t.e)
		return Woken, true
	case <-ctx.Done():
		alarmRemove(&t.e)
		return Done, true
	}
}

// spin polls the clock until at, yielding between polls while the instant
// is more than tight away. It checks wake and ctx on every yielding poll and
// every 64th tight one.
func (t *Timer) spin(ctx context.Context, wake <-chan struct{}, at time.Time) Result {
	for i := 0; ; i++ {
		left := time.Until(at)
		if left <= 0 {
			return Reached
		}
		if left > tight || i%64 == 0 {
			select {
			case <-wake:
				return Woken
			case <-ctx.Done():
				return Done
			default:
			}
		}
		if left > tight {
			runtime.Gosched()
		}
	}
}
