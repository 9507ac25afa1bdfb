// Command rangeloop is the seed's LimitRate example: a range loop over 20
// items that runs its body no more than 5 times a second, printing when
// each item comes through. The items arrive in groups of 5 at 0, 1, 2 and
// 3 s: a sliding log lets 5 through in any 1 s window, and no more.
//
// Run it with:
//
//	go run ./examples/rangeloop
//
// The loop is an ordinary range loop over an iter.Seq wrapped by
// iter.LimitErr; breaking out of it, or cancelling ctx (Ctrl-C), stops it
// at once.
package main

import (
	"context"
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
	defer stop()
	if _, err := run(ctx, os.Stdout, defaultConfig); err != nil {
		fmt.Fprintln(os.Stderr, "rangeloop:", err)
		os.Exit(1)
	}
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

	res.MaxInWindow = maxInWindow(res.Offsets, cfg.Window)
	fmt.Fprintf(w, "%d items in %.3f s; most in any %v window: %d (limit %d).\n",
		len(res.Items), time.Since(start).Seconds(), cfg.Window, res.MaxInWindow, cfg.Limit)
	if res.MaxInWindow > cfg.Limit {
		return res, fmt.Errorf("%d items in one %v window, over the limit of %d", res.MaxInWindow, cfg.Window, cfg.Limit)
	}
	return res, nil
}

// maxInWindow returns the most offsets that fall in any window [t, t+win).
func maxInWindow(offsets []time.Duration, win time.Duration) int {
	ts := slices.Sorted(slices.Values(offsets))
	most, j := 0, 0
	for i := range ts {
		for j < len(ts) && ts[j] < ts[i]+win {
			j++
		}
		most = max(most, j-i)
	}
	return most
}
