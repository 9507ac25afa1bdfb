// Command copy copies a file, or stdin, no faster than a given rate, and
// shows a progress line: bytes so far, current and average rate, ETA.
//
//	go run ./examples/copy                              # a 3 MiB demo at 1 MiB/s, about 3 s
//	go run ./examples/copy -rate 512KiB/s -o out.iso in.iso
//	cat big.log | go run ./examples/copy -rate 2MB/s -o copy.log
//
// The input is the file named by the argument (stdin if it is "-"); the
// output is -o (stdout if "-"; discarded if empty). Progress goes to stderr.
// The rate and the burst take B, KB, MB, GB (powers of 1000) or KiB, MiB,
// GiB (powers of 1024), and the rate an optional "/s".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
)

// config is one copy: what to copy where, how fast, and how often to report.
type config struct {
	In    io.Reader
	Size  int64 // In's size if known, for the percentage and the ETA; 0 if not
	Out   io.Writer
	Rate  int64         // bytes per second
	Burst int           // bytes the copy may move at once
	Every time.Duration // between progress lines
}

// result is what the copy did.
type result struct {
	Bytes   int64
	Elapsed time.Duration
	Lines   []pipe.Progress // one per progress line printed, the last at the end
}

// demoSize is the demo's synthetic input when no file is given.
const demoSize = 3 << 20

func main() {
	rate := flag.String("rate", "1MiB/s", "the most bytes per second")
	burst := flag.String("burst", "64KiB", "the most bytes moved at once")
	out := flag.String("o", "", `output file ("-": stdout; empty: discard)`)
	every := flag.Duration("every", 250*time.Millisecond, "time between progress lines")
	flag.Parse()

	cfg := config{Every: *every, Out: io.Discard}
	var err error
	if cfg.Rate, err = parseBytes(strings.TrimSuffix(*rate, "/s")); err != nil {
		fail(fmt.Errorf("-rate: %w", err))
	}
	b, err := parseBytes(*burst)
	if err != nil {
		fail(fmt.Errorf("-burst: %w", err))
	}
	cfg.Burst = int(b)

	switch name := flag.Arg(0); name {
	case "":
		fmt.Fprintf(os.Stderr, "no input named: copying %s of demo data at %s/s\n", pipe.FormatBytes(demoSize), pipe.FormatBytes(cfg.Rate))
		cfg.In, cfg.Size = io.LimitReader(zeros{}, demoSize), demoSize
	case "-":
		cfg.In = os.Stdin
	default:
		f, err := os.Open(name)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			cfg.Size = st.Size()
		}
		cfg.In = f
	}
	switch *out {
	case "":
	case "-":
		cfg.Out = os.Stdout
	default:
		f, err := os.Create(*out)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		cfg.Out = f
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, os.Stderr, cfg); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "copy:", err)
	os.Exit(1)
}

// run copies cfg.In to cfg.Out at cfg.Rate, printing a progress line to w
// every cfg.Every and once at the end. It stops early when ctx ends.
func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	var res result
	if cfg.Rate <= 0 || cfg.Burst <= 0 || cfg.Every <= 0 {
		return res, errors.New("rate, burst and progress interval must be positive")
	}
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(int(cfg.Rate), time.Second), Burst: cfg.Burst})
	if err != nil {
		return res, err
	}
	mon := pipe.NewMonitor(cfg.Size)
	r, err := pipe.NewReaderOptions(cfg.In, lim, pipe.Options{Context: ctx, Monitor: mon})
	if err != nil {
		return res, err
	}
	line := func() {
		p := mon.Progress()
		res.Lines = append(res.Lines, p)
		fmt.Fprintln(w, p)
	}

	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(cfg.Out, r)
		done <- err
	}()
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			line()
		case err := <-done:
			res.Elapsed = time.Since(start)
			res.Bytes = mon.Bytes()
			line()
			return res, err
		}
	}
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// parseBytes reads a size: "1500", "64KiB", "2.5MB", "1GiB".
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	num, mult := strings.TrimSpace(s), 1.0
	for _, u := range units {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f*mult < 1 || f*mult > 1<<50 {
		return 0, fmt.Errorf("%q is not a size from 1 B to 1 PiB", s)
	}
	return int64(f * mult), nil
}
