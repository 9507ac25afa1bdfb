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
// at once. It exits with status 1 if more than the limit came through in
// any window.
//
// # Checking the bound on the real clock
//
// The limiter books each grant at an instant the loop cannot see; the loop
// body stamps its item a moment later. That moment is a few microseconds as
// a rule (stamps of demo, rangeloop and rategate came at most 0.1 ms closer
// together than their grants, in 26 runs on a busy 2-core machine), and can
// be tens of milliseconds when the goroutine waits for a CPU. A sliding log
// grants the first item of a new window exactly one window after the item
// it replaces, so counting the stamps in windows of the full length would
// see one item too many whenever the earlier stamp happened to be the later
// one. So the items are counted in windows shorter by a slack, a fifth of
// the window and at most 50 ms: if every stamp is at most slack after its
// grant, stamps within window-slack of each other were granted within one
// window, so a count over the limit is a grant over it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	stditer "iter"
	"os"
	"os/signal"
	"slices"
	"time"

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
	rate := fs.String("rate", "5/s", "the most items in any window: N/unit or N/duration, such as 5/s or 2/1500ms")
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

// maxLimit bounds the items per window.
const maxLimit = 1000

// setRate reads -rate, as limiter.ParseRate does, into Limit items per
// Window.
func (c *config) setRate(s string) error {
	r, err := limiter.ParseRate(s)
	if err != nil {
		return fmt.Errorf("bad -rate: %w", err)
	}
	if r.Events() > maxLimit {
		return fmt.Errorf("-rate must let at most %d items through per window, got %d", maxLimit, r.Events())
	}
	c.Limit, c.Window = int(r.Events()), r.Period()
	return nil
}

// validate says which setting is wrong, by its flag's name, and why.
func (c config) validate() error {
	if c.Items < 1 || c.Items > 1000 {
		return fmt.Errorf("-items must be from 1 to 1000, got %d", c.Items)
	}
	if c.Limit < 1 || c.Limit > maxLimit || c.Window <= 0 {
		return fmt.Errorf("-rate must let from 1 to %d items through per positive window, got %d per %v", maxLimit, c.Limit, c.Window)
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

	res.MaxInWindow = mostInWindow(res.Offsets, cfg.Window)
	fmt.Fprintf(w, "%d items in %.3f s; most in any %v window: %d (limit %d).\n",
		len(res.Items), time.Since(start).Seconds(), cfg.Window, res.MaxInWindow, cfg.Limit)
	if res.MaxInWindow > cfg.Limit {
		return res, fmt.Errorf("%d items in one %v window, over the limit of %d", res.MaxInWindow, cfg.Window, cfg.Limit)
	}
	return res, nil
}

// slack is how late an item may be stamped after its grant: a fifth of the
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
