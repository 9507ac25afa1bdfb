// Command rangeloop runs an ordinary range loop over 20 items no more than
// 5 times a second, printing when each item comes through. The items arrive
// in groups of 5 at 0, 1, 2 and 3 s: a sliding log lets 5 through in any
// 1 s window, and no more.
//
// Run it with:
//
//	go run ./examples/rangeloop
//	go run ./examples/rangeloop -items 12 -rate 4/500ms
//
// The loop is an ordinary range loop over an iter.Seq wrapped by
// iter.LimitErr; breaking out of it, or cancelling ctx (Ctrl-C), stops it
// at once.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	stditer "iter"
	"os"
	"os/signal"
	"time"

	"github.com/rategate/rategate/internal/cliflag"
	"github.com/rategate/rategate/internal/window"
	"github.com/rategate/rategate/iter"
	"github.com/rategate/rategate/limiter"
)

// config sets the loop's size and limit, so that tests can run it at other
// scales (on a virtual clock).
type config struct {
	Items  int           // items in the sequence
	Limit  int           // items let through in any window
	Window time.Duration // the window
}

var defaultConfig = config{Items: 20, Limit: 5, Window: time.Second}

// result is what the loop measured.
type result struct {
	Items       []int           // the items, in the order the loop saw them
	Offsets     []time.Duration // when each came through, from the start
	MaxInWindow int             // most items in any window of length Window
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usageText = `Usage: rangeloop [flags]

Runs a range loop over -items items, letting at most -rate of them through
(for example 5/s: 5 in any 1 s window), and prints when each comes through.

Flags:
`

// cli runs the program with the command-line arguments args (without the
// program's name) and returns its exit status: 0 done (or -h), 1 the run
// failed, 2 the command line is wrong.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig
	fs := flag.NewFlagSet("rangeloop", flag.ContinueOnError)
	fs.IntVar(&cfg.Items, "items", cfg.Items, "items in the loop")
	readRate := cliflag.RateVar(fs, &cfg.Limit, &cfg.Window, 1000, "rate", "5/s", "the most items in any window: N/unit or N/duration, such as 5/s or 2/1500ms")
	return cliflag.Main(fs, args, usageText, stdout, stderr,
		cliflag.InOrder(readRate, func() error { return cfg.validate() }),
		func() error { _, err := run(ctx, stdout, cfg); return err })
}

// validate says which setting is wrong, by its flag's name, and why.
func (c config) validate() error {
	if err := cliflag.InRange("items", c.Items, 1, 1000); err != nil {
		return err
	}
	if c.Limit > 1000 {
		return fmt.Errorf("-rate must let at most 1000 items through per window, got %d", c.Limit)
	}
	return nil
}

// numbers is the upstream sequence: 1, 2, …, n, as any iter.Seq could be.
func numbers(n int) stditer.Seq[int] {
	return func(yield func(int) bool) {
		for i := 1; i <= n; i++ {
			if !yield(i) {
				return
			}
		}
	}
}

func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	var res result
	if err := cfg.validate(); err != nil {
		return res, err
	}
	lim, err := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: cfg.Limit, Window: cfg.Window})
	if err != nil {
		return res, err
	}
	defer lim.Close()

	fmt.Fprintf(w, "%d items through iter.LimitErr with a sliding log of %d per %v:\n", cfg.Items, cfg.Limit, cfg.Window)
	// iter.Limit would do as well; LimitErr also says why a loop ended
	// early: ctx ended, its deadline would pass before the next item's turn
	// (ctx.Err() is still nil then), or the limiter refused.
	items, errf := iter.LimitErr(ctx, numbers(cfg.Items), lim)
	start := time.Now()
	for item := range items {
		at := time.Since(start)
		res.Items = append(res.Items, item)
		res.Offsets = append(res.Offsets, at)
		fmt.Fprintf(w, "  item %2d at %6.3f s\n", item, at.Seconds())
	}
	if err := errf(); err != nil {
		return res, fmt.Errorf("stopped after %d items: %w", len(res.Items), err)
	}

	res.MaxInWindow = window.Peak(res.Offsets, cfg.Window)
	fmt.Fprintf(w, "%d items in %.3f s; most in any %v window: %d (limit %d).\n",
		len(res.Items), time.Since(start).Seconds(), cfg.Window, res.MaxInWindow, cfg.Limit)
	if res.MaxInWindow > cfg.Limit {
		return res, fmt.Errorf("%d items in one %v window, over the limit of %d", res.MaxInWindow, cfg.Window, cfg.Limit)
	}
	return res, nil
}
