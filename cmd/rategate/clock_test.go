package main

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The real-clock checks assume that stamps come at most a slack after the
// grants they stamp. On a machine shared with other work that assumption
// sometimes fails: a process is not scheduled for tens or hundreds of
// milliseconds (on the 2-core machine these tests were written on, with a
// load average of 8, a goroutine sleeping 1 ms at a time overslept by more
// than 50 ms 13 times in 20 s, by 330 ms at worst; under go test work, with
// every package's tests and builds at once, by 260 to 750 ms in every
// attempt of a check). A stall of rategate between a permit and its write
// looks, in the stamps, like a grant over the bound, and so does a stall of
// the test's reader.
//
// So a check is an attempt, made up to maxAttempts times. It passes when an
// attempt finds nothing: a rategate that breaks its bound does so in every
// attempt, since its limiter decides the same way each time, while a stall
// rarely strikes twice at the moment that matters. When every attempt finds
// a problem, the test fails, unless in every attempt a probe goroutine (which
// sleeps 1 ms at a time and records how late it wakes) saw this process
// scheduled later than the slack: then the machine was too busy for the
// stamps to tell anything, and the test is skipped, saying why and what the
// attempts found. (The probe sees this process only; rategate's own stalls
// are what the repetition is for.)
const maxAttempts = 3

// clock collects the problems one attempt finds.
type clock struct{ problems []string }

func (c *clock) errorf(format string, a ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, a...))
}

// realClock runs attempt until one finds no problem, at most maxAttempts
// times, then fails (or skips, if every attempt was disturbed) with what
// the attempts found.
func realClock(t *testing.T, slack time.Duration, attempt func(c *clock)) {
	t.Helper()
	sound := false // some attempt that found a problem had the probe in time
	var found []string
	for i := 1; i <= maxAttempts; i++ {
		var c clock
		late := measure(func() { attempt(&c) })
		if len(c.problems) == 0 {
			return
		}
		sound = sound || late <= slack
		found = append(found, fmt.Sprintf("attempt %d (this process scheduled up to %v late; slack %v):\n\t%s",
			i, late, slack, strings.Join(c.problems, "\n\t")))
	}
	if !sound {
		t.Skipf("the machine is too busy to check a bound on the real clock: in each of %d attempts this process was scheduled later than the slack; they found:\n%s",
			maxAttempts, strings.Join(found, "\n"))
	}
	t.Errorf("every one of %d attempts found a problem:\n%s", maxAttempts, strings.Join(found, "\n"))
}

// measure runs f and returns how late this process was scheduled meanwhile.
func measure(f func()) time.Duration {
	p := startProbe()
	defer p.stop() // also when f ends the test with t.Fatal
	f()
	return p.stop()
}

// probe is a goroutine that sleeps 1 ms at a time and records how much
// later than that it woke, at worst.
type probe struct {
	worst atomic.Int64
	done  chan struct{}
	ended chan struct{}
	once  sync.Once
}

func startProbe() *probe {
	p := &probe{done: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(p.ended)
		t := time.NewTimer(time.Millisecond)
		defer t.Stop()
		for last := time.Now(); ; last = time.Now() {
			select {
			case <-p.done:
				return
			case <-t.C:
				if late := time.Since(last) - time.Millisecond; late > time.Duration(p.worst.Load()) {
					p.worst.Store(int64(late))
				}
				t.Reset(time.Millisecond)
			}
		}
	}()
	return p
}

// stop ends the probe and returns the worst lateness it saw.
func (p *probe) stop() time.Duration {
	p.once.Do(func() { close(p.done) })
	<-p.ended
	return time.Duration(p.worst.Load())
}
