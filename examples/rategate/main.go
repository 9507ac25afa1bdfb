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
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/rategate/rategate/internal/cliflag"
	"github.com/rategate/rategate/internal/window"
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
	readRate := cliflag.RateVar(fs, &cfg.Limit, &cfg.Window, 1000, "rate", "2/s", "the most starts in any window: N/unit or N/duration, such as 2/s or 3/1500ms")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "the parallel run's workers")
	return cliflag.Main(fs, args, usageText, stdout, stderr,
		cliflag.InOrder(readRate, func() error { return cfg.validate() }),
		func() error { _, err := run(ctx, stdout, cfg); return err })
}

// validate says which setting is wrong, by its flag's name, and why.
func (c config) validate() error {
	if c.Limit > 1000 {
		return fmt.Errorf("-rate must allow at most 1000 starts per window, got %d", c.Limit)
	}
	return errors.Join(cliflag.InRange("iterations", c.Iterations, 1, 1000), cliflag.Positive("action", c.Action), cliflag.InRange("workers", c.Workers, 1, 1000))
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
	most := window.Peak(starts, cfg.Window)
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
