// Command producers shows a channel.Chan throttling many producers to one
// rate in total, and bounding the items buffered for one consumer.
//
// Four producers send as fast as the Chan lets them, through
// limiter.Chain(buffer, rate): a token bucket of 100 items per second (for
// all producers together) and a concurrency limiter of 20 permits, one held
// by each buffered item until the consumer receives it. For the first half
// of the run the consumer is fast (2 ms an item), so the rate is the limit:
// 100 items a second, the buffer nearly empty. Then it slows to 20 ms an
// item: the buffer fills up to its 20 items and stays full, and the
// producers are held to the consumer's 50 a second. Each second it prints
// the items received and sent and the buffer's occupancy.
//
// Run it with:
//
//	go run ./examples/producers
//	go run ./examples/producers -producers 8 -rate 50/s -buffer 5   # flags change the sizes; -h lists them
//
// It exits with status 1 if the rate or the buffer bound was ever exceeded.
//
// # Checking the bounds on the real clock
//
// The token bucket (a burst of 1) grants at most 1 + Rate·t sends in any
// interval of length t. A producer stamps its send a moment after the grant,
// when Send has returned: a few microseconds as a rule, tens of
// milliseconds when it waits for a CPU (often another goroutine books its
// grant, and it must first be woken). So the sends stamped in any period
// were granted in an interval a slack longer (a fifth of the period, at
// most 50 ms), and the check allows the sends that interval can hold: 1 +
// Rate + Rate·slack/period, 106 for 100/s. The count printed is over the
// period itself. The buffer's bound needs no slack: Len counts items still
// holding their permits.
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

	"github.com/rategate/rategate/channel"
	"github.com/rategate/rategate/limiter"
)

// config sets the run's sizes and durations, so that tests can run it at
// other scales (on a virtual clock).
type config struct {
	Producers int
	Rate      int           // items per Period for all producers together
	Period    time.Duration // the rate's period, and the report interval
	Buffer    int           // most items buffered at once
	Duration  time.Duration // how long the producers run
	FastWork  time.Duration // the consumer's time per item in the first half
	SlowWork  time.Duration // ... and in the second half
}

var defaultConfig = config{
	Producers: 4,
	Rate:      100,
	Period:    time.Second,
	Buffer:    20,
	Duration:  4 * time.Second,
	FastWork:  2 * time.Millisecond,
	SlowWork:  20 * time.Millisecond,
}

// item is what the producers send.
type item struct {
	producer int
	seq      int
}

// result is what the run measured.
type result struct {
	Sent        []time.Duration // when each send was granted, from the start
	Received    []time.Duration // when the consumer received each item
	PerProducer []int           // items sent by each producer
	PeakBuffer  int             // most items buffered at once (Len right after a send)
	MaxInPeriod int             // most sends in any [t, t+Period)
	Drained     int             // items discarded at the end (none: the consumer drains)
}

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `Usage: producers [flags]

Runs -producers producers that send as fast as a channel.Chan lets them:
at most -rate items in all (for example 100/s), and at most -buffer items
waiting for the consumer. The consumer takes -fast an item for the first
half of -duration, then -slow. Prints, each period of the rate, the items
received and sent and the buffer's occupancy.

Flags:
`

// cli runs the program with the command-line arguments args (without the
// program's name) and returns its exit status: 0 done (or -h), 1 the run
// failed, 2 the command line is wrong.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig
	fs := flag.NewFlagSet("producers", flag.ContinueOnError)
	fs.IntVar(&cfg.Producers, "producers", cfg.Producers, "producers sending at once")
	rate := fs.String("rate", "100/s", "the most items sent in any period, by all producers together: N/unit or N/duration; the period is also the report interval")
	fs.IntVar(&cfg.Buffer, "buffer", cfg.Buffer, "the most items buffered at once")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the producers run")
	fs.DurationVar(&cfg.FastWork, "fast", cfg.FastWork, "the consumer's time per item in the first half")
	fs.DurationVar(&cfg.SlowWork, "slow", cfg.SlowWork, "the consumer's time per item in the second half")
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

// setRate reads -rate, as limiter.ParseRate does, into Rate items per
// Period.
func (c *config) setRate(s string) error {
	r, err := limiter.ParseRate(s)
	if err != nil {
		return fmt.Errorf("bad -rate: %w", err)
	}
	if r.Events() > maxRate {
		return fmt.Errorf("-rate must allow from 1 to %d items per period, got %d", maxRate, r.Events())
	}
	c.Rate, c.Period = int(r.Events()), r.Period()
	return nil
}

// maxRate bounds the items per period, and maxPeriods the report lines.
const maxRate, maxPeriods = 100_000, 1000

// validate says which settings are wrong, by their flags' names, and why.
func (c config) validate() error {
	var errs []error
	if c.Rate < 1 || c.Rate > maxRate {
		errs = append(errs, fmt.Errorf("-rate must allow from 1 to %d items per period, got %d", maxRate, c.Rate))
	}
	if c.Period < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("-rate's period must be at least 10ms (it is also the report interval), got %v", c.Period))
	}
	if c.Period > 0 && c.Duration/c.Period > maxPeriods {
		errs = append(errs, fmt.Errorf("-duration must be at most %d periods of -rate (%v), got %v", maxPeriods, c.Period, c.Duration))
	}
	if c.FastWork < 0 || c.SlowWork < 0 {
		errs = append(errs, fmt.Errorf("-fast and -slow must not be negative, got %v and %v", c.FastWork, c.SlowWork))
	}
	if c.Producers < 1 || c.Producers > 1000 {
		errs = append(errs, fmt.Errorf("-producers must be from 1 to 1000, got %d", c.Producers))
	}
	if c.Buffer < 1 || c.Buffer > 100_000 {
		errs = append(errs, fmt.Errorf("-buffer must be from 1 to 100000, got %d", c.Buffer))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("-duration must be a positive duration such as 100ms, got %v", c.Duration))
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	if err := cfg.validate(); err != nil {
		return result{}, err
	}
	rate, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(cfg.Rate, cfg.Period), Burst: 1})
	if err != nil {
		return result{}, err
	}
	defer rate.Close()
	buffer, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: cfg.Buffer})
	if err != nil {
		return result{}, err
	}
	defer buffer.Close()
	// A send takes a permit from both, or from neither: limiter.Chain
	// grants all or nothing, so either order means the same bounds.
	c := channel.New[item](limiter.Chain(buffer, rate))

	fmt.Fprintf(w, "%d producers share %d items per %v, at most %d items buffered.\n", cfg.Producers, cfg.Rate, cfg.Period, cfg.Buffer)
	fmt.Fprintf(w, "The consumer takes %v an item, then %v from %v on.\n", cfg.FastWork, cfg.SlowWork, cfg.Duration/2)

	start := time.Now()
	k := &counts{start: start, res: result{PerProducer: make([]int, cfg.Producers)}}
	runCtx, stop := context.WithTimeout(ctx, cfg.Duration)
	defer stop()
	var producers sync.WaitGroup
	errs := make([]error, cfg.Producers)
	for p := range cfg.Producers {
		producers.Go(func() { errs[p] = produce(runCtx, c, p, k) })
	}
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		consume(ctx, c, cfg, k)
	}()
	report(runCtx, w, cfg, c, k)

	// Shut down: close the Chan (producers still waiting fail with
	// ErrClosed), let the consumer drain it, and discard anything left.
	c.Close()
	producers.Wait()
	<-consumed
	res := k.res // the producers and the consumer are done with it
	res.Drained = c.Drain()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}

	res.MaxInPeriod = peak(res.Sent, cfg.Period)
	fmt.Fprintf(w, "Sent %d, received %d in %v. Per producer: %v.\n", len(res.Sent), len(res.Received), time.Since(start).Round(time.Millisecond), res.PerProducer)
	fmt.Fprintf(w, "Most sends in any %v: %d (limit %d). Peak buffer: %d (limit %d). Permits still held: %d.\n",
		cfg.Period, res.MaxInPeriod, cfg.Rate, res.PeakBuffer, cfg.Buffer, buffer.InUse())
	switch {
	case res.MaxInPeriod > cfg.mostInPeriod():
		return res, fmt.Errorf("%d sends in one %v, over the %d the rate of %d allows there", res.MaxInPeriod, cfg.Period, cfg.mostInPeriod(), cfg.Rate)
	case res.PeakBuffer > cfg.Buffer:
		return res, fmt.Errorf("%d items buffered, over the bound of %d", res.PeakBuffer, cfg.Buffer)
	case buffer.InUse() != 0:
		return res, fmt.Errorf("%d permits still held after the Chan was drained", buffer.InUse())
	}
	return res, nil
}

// counts is what the producers and the consumer record, under mu: the
// result, and, since the last report line, the sends, the receives and the
// peak occupancy.
type counts struct {
	start time.Time // the run's

	mu                 sync.Mutex
	res                result
	sentN, recvN, peak int
}

// produce sends producer p's items as fast as c takes them, until runCtx
// ends or c is closed.
func produce(runCtx context.Context, c *channel.Chan[item], p int, k *counts) error {
	for seq := 0; ; seq++ {
		err := c.Send(runCtx, item{p, seq})
		at := time.Since(k.start) // as soon after the grant as can be
		if err != nil {
			// The run ends with runCtx's deadline (a wait the limiter
			// knows would outlast it fails at once) or with Close.
			if errors.Is(err, channel.ErrClosed) || errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		}
		n := c.Len()
		k.mu.Lock()
		k.res.Sent = append(k.res.Sent, at)
		k.res.PerProducer[p]++
		k.res.PeakBuffer = max(k.res.PeakBuffer, n)
		k.peak = max(k.peak, n)
		k.sentN++
		k.mu.Unlock()
	}
}

// consume receives every item until c is closed and drained, taking
// cfg.FastWork an item for the first half of the run, then cfg.SlowWork.
func consume(ctx context.Context, c *channel.Chan[item], cfg config, k *counts) {
	for range c.All(ctx) {
		at := time.Since(k.start)
		k.mu.Lock()
		k.res.Received = append(k.res.Received, at)
		k.recvN++
		k.mu.Unlock()
		if at < cfg.Duration/2 {
			time.Sleep(cfg.FastWork)
		} else {
			time.Sleep(cfg.SlowWork)
		}
	}
}

// report prints a line once a period until runCtx ends.
func report(runCtx context.Context, w io.Writer, cfg config, c *channel.Chan[item], k *counts) {
	tick := time.NewTicker(cfg.Period)
	defer tick.Stop()
	fmt.Fprintf(w, "%8s %10s %10s %14s\n", "time", "received", "sent", "buffer (peak)")
	for done := false; !done; {
		select {
		case <-tick.C:
		case <-runCtx.Done():
			done = true
		}
		k.mu.Lock()
		if k.sentN > 0 || k.recvN > 0 || !done {
			fmt.Fprintf(w, "%8v %10d %10d %7d (%d)\n", time.Since(k.start).Round(time.Millisecond), k.recvN, k.sentN, c.Len(), k.peak)
		}
		k.sentN, k.recvN, k.peak = 0, 0, c.Len()
		k.mu.Unlock()
	}
}

// slack is how late a send may be stamped after its grant: a fifth of the
// period, at most 50 ms.
func (c config) slack() time.Duration { return min(c.Period/5, 50*time.Millisecond) }

// mostInPeriod is the most sends that may be stamped in one period: those
// that the token bucket (a burst of 1) can grant in an interval one slack
// longer, 1 + Rate·(Period+slack)/Period. See "Checking the bounds on the
// real clock" in the package comment.
func (c config) mostInPeriod() int {
	return 1 + c.Rate + int(int64(c.Rate)*int64(c.slack())/int64(c.Period))
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
