// Package properties_test proves, with property-based tests
// (pgregory.net/rapid), that every limiter in package limiter keeps the
// N-per-M bound of docs/design.md, reaches it under saturation, conserves its
// permits, and decides exactly as a plain reference model does.
//
// # What is proved
//
// For each of the six limiters (token bucket, leaky bucket / pacer, fixed
// window, segmented sliding window, sliding log, concurrency), rapid draws a
// configuration (rates with odd periods such as 3/s or 7 per 1000ns, bursts,
// limits, windows and segment counts that do not divide evenly, queue caps
// and orders, occasionally QueueOptions.Spin to check it falls back to timers
// in a bubble) and one of these:
//
//   - Schedule (TestSchedule<Limiter>): 1-6 goroutines each run a drawn list
//     of Acquire(n) (plain, with a deadline, cancelled after a delay, or with
//     a context already done), TryAcquire(n) and sleeps; a concurrency lease
//     is held for a drawn time and released; Close runs at a drawn instant or
//     never. Every call's start and end instants, result, error and
//     RetryAfter are recorded. Checked afterwards:
//     safety: the algorithm's bound holds over every window of the run, with
//     exact integer arithmetic: token bucket, every pair of grants i <= j:
//     permits in [t_i, t_j] <= Burst + Rate*(t_j-t_i); pacer, consecutive
//     grants t_j >= t_i + k_i/Rate; fixed window, <= Limit per aligned window
//     [kW, (k+1)W) from the limiter's creation; sliding window, <= Limit in
//     every run of Segments consecutive segments whose boundaries are at
//     ceil(i*Window/Segments) ns; sliding log, <= Limit in ANY [t, t+Window);
//     concurrency, permits in use <= Limit at every instant (a grant counts
//     from the return of Acquire, a release until the call of Release, so the
//     recorded count never exceeds the real one);
//     errors: every failure is classified with errors.Is and allowed by what
//     happened (ErrExceedsLimit exactly for n > max, ErrInvalidCount for
//     n < 0, ErrQueueFull only with a queue cap, ErrClosed only from the
//     Close instant on and always after it, context errors exactly at the
//     cancel or deadline instant or, for a deadline, at once), a grant never
//     comes after its deadline or cancellation, RetryAfter is never negative
//     nor longer than a full recovery;
//     a failed Acquire's Lease.Err() matches its error (errors.Is);
//     queueing: no TryAcquire (and, in OldestFirst order, no Acquire) is
//     granted while an earlier Acquire is still waiting; OldestFirst grants
//     waiters in arrival order; NewestFirst never grants a waiter while a
//     newer one still waits, and pushes out the oldest waiter first;
//     counters: Stats().Granted and Rejected equal the recorded outcomes and
//     nothing is left queued;
//     conservation: every TryAcquire, and every Acquire's "granted at once
//     or not", made at an instant where the order of events cannot matter (no
//     other grant, release or queued waiter at that instant) is decided
//     exactly as the reference model decides from the grants recorded before
//     it, RetryAfter included; after the run, drawn TryAcquire probes are
//     checked the same way; so cancelled and failed waiters consumed nothing.
//     After a full window with every lease released, Stats().Available is the
//     full capacity and TryAcquire(capacity) is granted: the limiter is as
//     if new. After Close, every probe fails with ErrClosed.
//     Every goroutine must end: a waiter that is never woken makes the bubble
//     deadlock, which fails the check; a goroutine that never blocks (so
//     virtual time cannot advance) is reported as a livelock after 60 s of
//     real time, with the counterexample and every goroutine's stack.
//   - Liveness (TestLiveness<Limiter>): 1-8 goroutines saturate the limiter
//     with Acquire(1) (a concurrency lease is held for a drawn time) for a
//     drawn run length D of several windows. The grants in [0, D] must reach
//     99% of the most the bound allows in [0, D], computed exactly (for the
//     token bucket by the greedy earliest schedule under the pairwise bound,
//     which is optimal). TestLivenessCheckDetectsStarvation shows that a
//     limiter that never grants, or grants at half the rate, fails it.
//   - Model (TestModel<Limiter>): a rapid state machine (rapid.T.Repeat)
//     runs TryAcquire(n), sleeps (including exactly the last RetryAfter and
//     one nanosecond either side of it), Acquire(n) with a deadline, Release
//     (concurrency) and Close on the limiter and on a reference model kept
//     as an explicit log of grants (model_test.go), and compares every
//     decision, error, RetryAfter, the completion instant of every Acquire,
//     and Stats (Granted, Rejected, Available) after every step.
//
// Fuzz targets (fuzz_test.go): FuzzParseRate and one per constructor
// (FuzzNewTokenBucket, FuzzNewLeakyBucket, FuzzNewFixedWindow,
// FuzzNewSlidingWindow, FuzzNewSlidingLog, FuzzNewConcurrency). A constructor
// must return (non-nil limiter, nil) or (nil, *limiter.OptionError naming a
// field); it must reject what the contract calls invalid, never panic or hang,
// never clamp silently (getters return what was asked), and a limiter it
// returns grants TryAcquire(1) when fresh. The seed corpus is in
// testdata/fuzz/<Target>/ plus the f.Add seeds.
//
// # How to run
//
//	go test ./properties_test/                       # about 100 checks per property
//	go test -race ./properties_test/
//	go test ./properties_test/ -rapid.checks=10000   # the deep run
//	go test ./properties_test/ -run TestModelSlidingLog -rapid.checks=10000 -rapid.steps=200
//	go test ./properties_test/ -run '^$' -fuzz FuzzNewSlidingWindow -fuzztime 1m
//
// A failure prints the shrunk counterexample (every draw) and a
// -rapid.failfile / -rapid.seed to replay it (rapid writes fail files under
// testdata/rapid/; do not commit them). The default run takes about a
// second (a few with -race); -rapid.checks=10000 about half a minute on two
// cores, -rapid.checks=100000 about six minutes.
//
// The suite was itself checked against deliberately broken copies of
// package limiter (a sliding log expiring a nanosecond early or late, a token
// bucket one scaled unit too lenient, retry hints off by one, segment
// boundaries shifted, TryAcquire barging, a cancelled waiter charged or not
// re-dispatching the queue, Close failing only the head, NewestFirst serving
// or pushing out in the wrong order, a lease error disagreeing with
// Acquire's): each is caught by the default run.
//
// # How a bubble and rapid fit together
//
// testing/synctest runs a bubble's function on another goroutine, and a
// *rapid.T must report failures from the goroutine running the property.
// Two patterns are used, both verified to shrink counterexamples normally:
//
//  1. Draw first, run, check outside (schedules, liveness). The property
//     draws the whole configuration and schedule with rt, then runBubble
//     calls synctest.Test(t, ...) with the outer *testing.T from the test
//     goroutine (synctest.Test may be called any number of times in sequence
//     with the same t). Inside the bubble nothing touches rt or t: the run is
//     recorded into plain data (grant instants, results, panics). runBubble
//     recovers both a panic in the bubble and the panic synctest raises when
//     the bubble deadlocks, and returns it. Back on the test goroutine, every
//     property is checked and reported with rt.Fatalf, so rapid shrinks the
//     drawn schedule as usual.
//  2. rapid.SyncTest (state machines). rapid.T.Repeat draws interactively, so
//     the whole Repeat must run inside the bubble, where virtual time is.
//     rapid.SyncTest (rapid >= 1.3) runs the property body in a bubble with
//     a single goroutine, captures a failure there and re-raises it on the
//     property's goroutine for rapid to shrink.
//
// Grant instants are time.Since(start), where start := time.Now() is read
// in the bubble right before the limiter is constructed: in a bubble no
// virtual time passes between two statements that do not block, so start is
// the limiter's origin and an Acquire's grant instant is the instant it
// returned.
package properties_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
