// Command demo shows three of rategate's limiters at work on the real clock,
// in about four seconds:
//
//  1. a SlidingLog admitting 5 grants per second to 20 goroutines at once,
//     and the most grants it let through in any 1 s window;
//  2. a TokenBucket refusing TryAcquire calls, and saying when to retry;
//  3. a Concurrency limiter capping the tasks in flight.
//
// Run it with:
//
//	go run ./examples/demo
//	go run ./examples/demo -limit 3 -callers 9 -slots 2    # flags change the sizes; -h lists them
//
// It exits with status 1 if any limiter went over the bound it printed.
//
// # Checking the bounds on the real clock
//
// A limiter books each grant at an instant the program cannot see; the
// program stamps a grant a moment later, when Acquire has returned. That
// moment is a few microseconds as a rule (stamps of demo, rangeloop and
// rategate came at most 0.1 ms closer together than their grants, in 26
// runs on a busy 2-core machine), and can be tens of milliseconds when the
// goroutine waits for a CPU (a goroutine whose grant another one booked
// must first be woken). The sliding log grants the first caller of a
// new window exactly one window after the grant it replaces, so counting the
// stamps in windows of the full length would see one grant too many whenever
// the earlier stamp happened to be the later one, which is often. So the
// grants are counted in windows shorter by a slack, a fifth of the window
// and at most 50 ms: if every stamp is at most slack after its grant, stamps
// within window-slack of each other were granted within one window, so a
// count over the bound is a grant over it. The token bucket's grants are
// checked against its burst plus what it refilled while they were asked
// for, and the tasks in flight are counted from after Acquire returns to
// before the lease is released, inside the span the permit is held.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/limiter"
)

// config sets the demo's sizes and durations, so that tests can run it at
// other scales (on a virtual clock).
type config struct {
	Window  time.Duration // the sliding log's window, and the token bucket's refill period
	Limit   int           // the sliding log's grants per window
	Callers int           // goroutines competing for the sliding log
	Burst   int           // the token bucket's capacity
	Refill  int           // permits the token bucket regains per Window
	Slots   int           // the concurrency limiter's limit
	Tasks   int           // tasks competing for it
	Work    time.Duration // how long each task runs
}

var defaultConfig = config{
	Window:  time.Second,
	Limit:   5,
	Callers: 20,
	Burst:   3,
	Refill:  2,
	Slots:   3,
	Tasks:   10,
	Work:    100 * time.Millisecond,
}

// result is what the demo measured; run fails if it breaks a bound.
type result struct {
	Offsets      []time.Duration // when each sliding-log grant arrived, from the start
	MaxInWindow  int             // most sliding-log grants in any window of length Window
	Burst        int             // token-bucket grants before the first refusal
	PeakInFlight int             // most concurrency-limited tasks running at once
}

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `Usage: demo [flags]

Shows three limiters at work on the real clock: a sliding log admitting
-limit grants per -window to -callers goroutines at once; a token bucket
of -burst, refilled by -refill per -window, refusing calls and saying when
to retry; a concurrency limit of -slots tasks in flight among -tasks.

Flags:
`

// cli runs the program with the command-line arguments args (without the
// program's name) and returns its exit status: 0 done (or -h), 1 the run
// failed, 2 the command line is wrong.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "the sliding log's window, and the token bucket's refill period")
	fs.IntVar(&cfg.Limit, "limit", cfg.Limit, "the sliding log's grants per window")
	fs.IntVar(&cfg.Callers, "callers", cfg.Callers, "goroutines competing for the sliding log")
	fs.IntVar(&cfg.Burst, "burst", cfg.Burst, "the token bucket's capacity")
	fs.IntVar(&cfg.Refill, "refill", cfg.Refill, "permits the token bucket regains per window")
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, "tasks allowed in flight at once")
	fs.IntVar(&cfg.Tasks, "tasks", cfg.Tasks, "tasks competing for the slots")
	fs.DurationVar(&cfg.Work, "work", cfg.Work, "how long each task runs")
	if code, ok := parseFlags(fs, args, usageText, stdout, stderr); !ok {
		return code
	}
	if err := cfg.validate(); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	if _, err := run(ctx, stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	return 0
}

// validate says which settings are wrong, by their flags' names, and why.
func (c config) validate() error {
	return errors.Join(
		positive("window", c.Window),
		inRange("limit", c.Limit, 1, 1000),
		inRange("callers", c.Callers, 1, 10_000),
		inRange("burst", c.Burst, 1, 1000),
		inRange("refill", c.Refill, 1, 1000),
		inRange("slots", c.Slots, 1, 1000),
		inRange("tasks", c.Tasks, 1, 10_000),
		positive("work", c.Work),
	)
}

// inRange returns an error naming the flag unless lo <= v <= hi.
func inRange(flagName string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fmt.Errorf("-%s must be from %d to %d, got %d", flagName, lo, hi, v)
	}
	return nil
}

// positive returns an error naming the flag unless d > 0.
func positive(flagName string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("-%s must be a positive duration such as 100ms, got %v", flagName, d)
	}
	return nil
}

func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	var res result
	if err := cfg.validate(); err != nil {
		return res, err
	}
	var err error
	if res.Offsets, res.MaxInWindow, err = slidingLog(ctx, w, cfg); err != nil {
		return res, err
	}
	fmt.Fprintln(w)
	if res.Burst, err = tokenBucket(ctx, w, cfg); err != nil {
		return res, err
	}
	fmt.Fprintln(w)
	if res.PeakInFlight, err = concurrency(ctx, w, cfg); err != nil {
		return res, err
	}
	return res, nil
}

// slidingLog lets cfg.Callers goroutines Acquire one permit each from a
// SlidingLog of cfg.Limit per cfg.Window, and prints when each grant arrives.
func slidingLog(ctx context.Context, w io.Writer, cfg config) ([]time.Duration, int, error) {
	lim, err := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: cfg.Limit, Window: cfg.Window})
	if err != nil {
		return nil, 0, err
	}
	defer lim.Close()

	fmt.Fprintf(w, "1. SlidingLog: at most %d grants in ANY %v window.\n", cfg.Limit, cfg.Window)
	fmt.Fprintf(w, "   %d goroutines call Acquire at once; %d get through, the rest wait in line.\n", cfg.Callers, cfg.Limit)

	var (
		mu      sync.Mutex
		offsets []time.Duration
		errs    []error
		wg      sync.WaitGroup
	)
	start := time.Now()
	for range cfg.Callers {
		wg.Go(func() {
			_, err := lim.Acquire(ctx, 1)
			at := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			offsets = append(offsets, at)
			fmt.Fprintf(w, "   grant %2d at %5d ms\n", len(offsets), at.Milliseconds())
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, err
	}

	most := mostInWindow(offsets, cfg.Window)
	fmt.Fprintf(w, "   Most grants in any %v window: %d (bound %d).", cfg.Window, most, cfg.Limit)
	fmt.Fprintf(w, " All %d took %d ms: the bound is reached, never passed.\n", len(offsets), time.Since(start).Milliseconds())
	if most > cfg.Limit {
		return offsets, most, fmt.Errorf("sliding log granted %d in one %v window, over its bound of %d", most, cfg.Window, cfg.Limit)
	}
	return offsets, most, nil
}

// tokenBucket drains a TokenBucket with TryAcquire, shows a refusal's
// RetryAfter and an Acquire that fails at once because its deadline is too
// near, then waits as told and is granted.
func tokenBucket(ctx context.Context, w io.Writer, cfg config) (int, error) {
	rate := limiter.Per(cfg.Refill, cfg.Window)
	made := time.Now() // no later than the bucket's own start, full
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: rate, Burst: cfg.Burst})
	if err != nil {
		return 0, err
	}
	defer lim.Close()

	fmt.Fprintf(w, "2. TokenBucket: a burst of %d, refilled at %v. TryAcquire never waits.\n", cfg.Burst, rate)
	granted, seen := 0, false
	var refused limiter.Lease // the first refusal
	for i := 1; i <= cfg.Burst+2; i++ {
		lease := lim.TryAcquire(1)
		if lease.Granted() {
			granted++
			fmt.Fprintf(w, "   TryAcquire #%d: granted\n", i)
			continue
		}
		if !seen {
			refused, seen = lease, true
		}
		fmt.Fprintf(w, "   TryAcquire #%d: refused (%v); retry after %v\n", i, lease.Err(), lease.RetryAfter().Round(time.Millisecond))
	}
	// The bound: the burst, plus what the bucket refilled while it was
	// asked (none, unless the machine stalled this loop for a refill period).
	refilled := int(time.Since(made) * time.Duration(cfg.Refill) / cfg.Window)
	if granted > cfg.Burst+refilled {
		return granted, fmt.Errorf("token bucket granted %d at once, over its burst of %d (and %d refilled)", granted, cfg.Burst, refilled)
	}

	short, cancel := context.WithTimeout(ctx, refused.RetryAfter()/5)
	t0 := time.Now()
	_, err = lim.Acquire(short, 1)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		return granted, fmt.Errorf("acquire with a deadline shorter than the wait: got %v, want a deadline error", err)
	}
	fmt.Fprintf(w, "   Acquire with a %v deadline: fails after %d ms, without waiting: %v\n",
		(refused.RetryAfter() / 5).Round(time.Millisecond), time.Since(t0).Milliseconds(), err)

	time.Sleep(refused.RetryAfter())
	if lease := lim.TryAcquire(1); !lease.Granted() {
		return granted, fmt.Errorf("TryAcquire after waiting RetryAfter was refused: %v", lease.Err())
	}
	fmt.Fprintf(w, "   Slept the first refusal's RetryAfter (%v); TryAcquire: granted\n", refused.RetryAfter().Round(time.Millisecond))
	return granted, nil
}

// concurrency runs cfg.Tasks tasks, each holding a Concurrency lease for
// cfg.Work, and reports the most that ran at once.
func concurrency(ctx context.Context, w io.Writer, cfg config) (int, error) {
	lim, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: cfg.Slots})
	if err != nil {
		return 0, err
	}
	defer lim.Close()

	fmt.Fprintf(w, "3. Concurrency: at most %d tasks in flight.\n", cfg.Slots)
	fmt.Fprintf(w, "   %d tasks of %v each start at once; each holds a lease while it runs.\n", cfg.Tasks, cfg.Work)

	var (
		inFlight, peak atomic.Int64
		mu             sync.Mutex
		errs           []error
		wg             sync.WaitGroup
	)
	start := time.Now()
	for i := 1; i <= cfg.Tasks; i++ {
		wg.Go(func() {
			lease, err := lim.Acquire(ctx, 1)
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			defer lease.Release()
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			mu.Lock()
			fmt.Fprintf(w, "   task %2d starts at %5d ms (in flight: %d)\n", i, time.Since(start).Milliseconds(), n)
			mu.Unlock()
			time.Sleep(cfg.Work)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}

	most := int(peak.Load())
	fmt.Fprintf(w, "   Peak in flight: %d (bound %d). All %d took %d ms.\n", most, cfg.Slots, cfg.Tasks, time.Since(start).Milliseconds())
	if most > cfg.Slots {
		return most, fmt.Errorf("concurrency limiter let %d tasks run at once, over its bound of %d", most, cfg.Slots)
	}
	return most, nil
}

// slack is how late a grant may be stamped after its grant: a fifth of the
// window, at most 50 ms. See "Checking the bounds on the real clock" in the
// package comment.
func slack(window time.Duration) time.Duration { return min(window/5, 50*time.Millisecond) }

// mostInWindow returns the most stamps in any window of length
// window-slack(window), which is the most grants in any window of length
// window as long as no stamp is more than the slack late.
func mostInWindow(stamps []time.Duration, window time.Duration) int {
	return peak(stamps, window-slack(window))
}

// peak returns the most instants that fall in any one window [t, t+width):
// the largest group less than width apart from first to last.
func peak(instants []time.Duration, width time.Duration) int {
	ts := slices.Sorted(slices.Values(instants))
	most, j := 0, 0
	for i := range ts {
		for j < len(ts) && ts[j] < ts[i]+width { // ts[i:j] lie in [ts[i], ts[i]+width)
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// parseFlags parses args with fs, for a program that takes only flags. With
// ok false the program stops with exit status code: 0 after -h (the usage
// goes to stdout), 2 after an unknown flag, a bad value or an argument.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(stderr) // the flag package says there what is wrong
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return 0, false
	case err != nil:
		return usageError(stderr, fs.Name(), nil), false
	case fs.NArg() > 0:
		return usageError(stderr, fs.Name(), fmt.Errorf("unexpected argument %q: it takes only flags", fs.Arg(0))), false
	}
	return 0, true
}

// usageError prints err (if not nil) and where to find the usage, and
// returns exit status 2.
func usageError(stderr io.Writer, name string, err error) int {
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	fmt.Fprintf(stderr, "Run '%s -h' for usage.\n", name)
	return 2
}
