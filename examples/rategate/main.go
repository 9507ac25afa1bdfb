// Command rategate runs an action that takes 250 ms, 10 times, with at
// most 2 starts in any 1 s window (a sliding log), first one after the other
// in a plain for loop, then in parallel on a worker pool, and prints a table
// of when each run started and finished.
//
// Run it with:
//
//	go run ./examples/rategate
//	go run ./examples/rategate -iterations 6 -rate 3/s -action 1s
//
// Sequentially, the second action of each second starts when the first
// finishes (0, 0.25, 1, 1.25, … s); in parallel, the actions start in pairs at
// 0, 1, 2, 3, 4 s and all ten are done at 4.25 s. The program exits with
// status 1 if any 1 s window saw more than 2 starts.
//
// # Checking the bound on the real clock
//
// The limiter books each grant at an instant the program cannot see; the
// program stamps a start a moment later, when Acquire has returned (or the
// pool's task has begun). That moment is a few microseconds as a rule
// (stamps of demo, rangeloop and rategate came at most 0.1 ms closer
// together than their grants, in 26 runs on a busy 2-core machine), and can
// be tens of milliseconds when the goroutine waits for a CPU. A sliding log
// grants the first start of a new window exactly one window after the start
// it replaces, so counting the stamps in windows of the full length would
// see one start too many whenever the earlier stamp happened to be the
// later one, which is often. So the starts are counted in windows shorter
// by a slack, a fifth of the window and at most 50 ms: if every stamp is at
// most slack after its grant, stamps within window-slack of each other were
// granted within one window, so a count over the bound is a grant over the
// bound.
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
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
)

// config sets the sizes, so that the test can run other ones.
type config struct {
	Iterations int           // how many times the action runs
	Action     time.Duration // how long one action takes
	Limit      int           // most starts in any Window
	Window     time.Duration
	Workers    int // the parallel run's pool size
}

var defaultConfig = config{Iterations: 10, Action: 250 * time.Millisecond, Limit: 2, Window: time.Second, Workers: 10}

// row is one action's start and finish, from the start of its run.
type row struct{ Start, Finish time.Duration }

// result holds both tables.
type result struct{ Sequential, Parallel []row }

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `Usage: rategate [flags]

Runs an action that takes -action, -iterations times, with at most -rate
starts (for example 2/s: 2 in any 1 s window), first in a for loop, then on
a pool of -workers workers, and prints when each run started and finished.

Flags:
`

// cli runs the program with the command-line arguments args (without the
// program's name) and returns its exit status: 0 done (or -h), 1 the run
// failed, 2 the command line is wrong.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig
	fs := flag.NewFlagSet("rategate", flag.ContinueOnError)
	fs.IntVar(&cfg.Iterations, "iterations", cfg.Iterations, "how many times the action runs")
	fs.DurationVar(&cfg.Action, "action", cfg.Action, "how long one action takes")
	rate := fs.String("rate", "2/s", "the most starts in any window: N/unit or N/duration, such as 2/s or 3/1500ms")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "the parallel run's workers")
	if code, ok := parseFlags(fs, args, usageText, stdout, stderr); !ok {
		return code
	}
	if err := cfg.setRate(*rate); err != nil {
		return usageError(stderr, fs.Name(), err)
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

// maxLimit bounds the starts per window.
const maxLimit = 1000

// setRate reads -rate, as limiter.ParseRate does, into Limit starts per
// Window.
func (c *config) setRate(s string) error {
	r, err := limiter.ParseRate(s)
	if err != nil {
		return fmt.Errorf("bad -rate: %w", err)
	}
	if r.Events() > maxLimit {
		return fmt.Errorf("-rate must allow at most %d starts per window, got %d", maxLimit, r.Events())
	}
	c.Limit, c.Window = int(r.Events()), r.Period()
	return nil
}

// validate says which settings are wrong, by their flags' names, and why.
func (c config) validate() error {
	var errs []error
	if c.Limit < 1 || c.Limit > maxLimit || c.Window <= 0 {
		errs = append(errs, fmt.Errorf("-rate must allow from 1 to %d starts per positive window, got %d per %v", maxLimit, c.Limit, c.Window))
	}
	if c.Iterations < 1 || c.Iterations > 1000 {
		errs = append(errs, fmt.Errorf("-iterations must be from 1 to 1000, got %d", c.Iterations))
	}
	if c.Action <= 0 {
		errs = append(errs, fmt.Errorf("-action must be a positive duration such as 100ms, got %v", c.Action))
	}
	if c.Workers < 1 || c.Workers > 1000 {
		errs = append(errs, fmt.Errorf("-workers must be from 1 to 1000, got %d", c.Workers))
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	var res result
	if err := cfg.validate(); err != nil {
		return res, err
	}
	var err error
	fmt.Fprintf(w, "%d iterations of a %v action, at most %d starts in any %v window.\n\n", cfg.Iterations, cfg.Action, cfg.Limit, cfg.Window)
	if res.Sequential, err = sequential(ctx, cfg); err != nil {
		return res, err
	}
	if err := printTable(w, "Sequential (a for loop)", cfg, res.Sequential); err != nil {
		return res, err
	}
	fmt.Fprintln(w)
	if res.Parallel, err = parallel(ctx, cfg); err != nil {
		return res, err
	}
	return res, printTable(w, fmt.Sprintf("Parallel (pool.Pool, %d workers)", cfg.Workers), cfg, res.Parallel)
}

func newLimiter(cfg config) (*limiter.SlidingLog, error) {
	return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: cfg.Limit, Window: cfg.Window})
}

// sequential runs the actions one after the other, each after a permit.
func sequential(ctx context.Context, cfg config) ([]row, error) {
	lim, err := newLimiter(cfg)
	if err != nil {
		return nil, err
	}
	defer lim.Close()
	start := time.Now()
	rows := make([]row, cfg.Iterations)
	for i := range rows {
		if _, err := lim.Acquire(ctx, 1); err != nil {
			return nil, err
		}
		rows[i].Start = time.Since(start)
		time.Sleep(cfg.Action)
		rows[i].Finish = time.Since(start)
	}
	return rows, nil
}

// parallel submits every action to a pool whose starts pass the limiter.
func parallel(ctx context.Context, cfg config) ([]row, error) {
	lim, err := newLimiter(cfg)
	if err != nil {
		return nil, err
	}
	defer lim.Close()
	p, err := pool.New(pool.Options{Workers: cfg.Workers, Limiter: lim, Context: ctx})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rows := make([]row, cfg.Iterations)
	var mu sync.Mutex
	for i := range rows {
		err := p.Go(func(ctx context.Context) error {
			s := time.Since(start)
			time.Sleep(cfg.Action)
			mu.Lock()
			rows[i] = row{s, time.Since(start)}
			mu.Unlock()
			return nil
		})
		if err != nil {
			p.Close()
			return nil, err
		}
	}
	return rows, p.Wait()
}

func printTable(w io.Writer, title string, cfg config, rows []row) error {
	fmt.Fprintln(w, title)
	fmt.Fprintln(w, "Iteration   Start    Finish")
	starts := make([]time.Duration, len(rows))
	for i, r := range rows {
		fmt.Fprintf(w, "%9d  %6.3fs  %6.3fs\n", i+1, r.Start.Seconds(), r.Finish.Seconds())
		starts[i] = r.Start
	}
	most := mostInWindow(starts, cfg.Window)
	total := time.Duration(0)
	for _, r := range rows {
		total = max(total, r.Finish)
	}
	fmt.Fprintf(w, "Most starts in any %v window: %d (bound %d). Done at %.3fs.\n", cfg.Window, most, cfg.Limit, total.Seconds())
	if most > cfg.Limit {
		return fmt.Errorf("%d starts in one %v window, over the bound of %d", most, cfg.Window, cfg.Limit)
	}
	return nil
}

// slack is how late a start may be stamped after its grant: a fifth of the
// window, at most 50 ms. See "Checking the bound on the real clock" in the
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
