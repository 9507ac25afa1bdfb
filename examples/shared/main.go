// Command shared runs three processes that share one limit through Redis:
// a strict sliding log of at most -limit grants in any -window, kept in
// Redis by package redislimit. Each process asks as fast as it can for
// -duration; together they get the limit, not three times it.
//
// Run it with:
//
//	go run ./examples/shared
//	go run ./examples/shared -redis localhost:6379 -procs 4 -limit 20
//
// (-h lists the flags; it takes no arguments.)
//
// With no -redis address it starts a local redis-server on a free loopback
// port if one is installed, else an embedded Go server
// (github.com/alicebob/miniredis/v2), and says which. The processes are this
// program started again (with an environment variable telling it to be a
// worker); each prints the time of every grant, and the parent merges them:
// the grants per process and in all, and the most granted in any window. It
// exits with status 1 if that is over the limit.
//
// The limit is decided at Redis's clock; the workers stamp a grant with
// their own clock (the same machine's) when the answer arrives, a moment
// later. So that the count is exact where it is measured, the windows
// measured are Margin (a fifth of -window, at most 50ms) shorter than the
// limit's: two grants at least -window apart at Redis cannot be stamped
// less than -window minus Margin apart unless one answer took Margin
// longer than the other to arrive.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/internal/cliflag"
	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/internal/selfexec"
	"github.com/rategate/rategate/internal/window"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/redislimit"
)

// workerEnv, when set, makes the program a worker process; its value is
// the worker's configuration.
const workerEnv = "RATEGATE_SHARED_WORKER"

type config struct {
	Redis    string        // server address; "" starts one
	Procs    int           // worker processes
	Limit    int           // grants in any Window, shared by all
	Window   time.Duration //
	Duration time.Duration // how long the workers ask
	Key      string        // the limit's name in Redis
}

var defaultConfig = config{Procs: 3, Limit: 10, Window: time.Second, Duration: 3 * time.Second, Key: "examples/shared"}

func main() {
	if v := os.Getenv(workerEnv); v != "" {
		os.Exit(worker(context.Background(), v, os.Stdout, os.Stderr))
	}
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

const usageText = `Usage: shared [flags]

Starts -procs processes that share one limit through Redis: at most -limit
grants in any -window, all processes together. Each asks as fast as it can
for -duration. With no -redis address, it starts a local redis-server (or,
if none is installed, an embedded Go server) and says which.

Flags:
`

// cli runs the program with the command-line arguments args and returns
// its exit status: 0 done (or -h), 1 the run failed, 2 the command line is
// wrong.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig
	fs := flag.NewFlagSet("shared", flag.ContinueOnError)
	fs.StringVar(&cfg.Redis, "redis", "", "Redis address host:port (default: start a local server)")
	fs.IntVar(&cfg.Procs, "procs", cfg.Procs, "processes sharing the limit")
	fs.IntVar(&cfg.Limit, "limit", cfg.Limit, "grants in any window, all processes together")
	fs.DurationVar(&cfg.Window, "window", cfg.Window, "the window")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the processes ask")
	return cliflag.Main(fs, args, usageText, stdout, stderr, func() error { return cfg.validate() }, func() error {
		res, err := run(ctx, stdout, cfg)
		if err == nil && !res.kept(cfg.Limit) {
			err = fmt.Errorf("%d grants in one %v window, over the limit of %d", res.MaxInWindow, res.Measured, cfg.Limit)
		}
		return err
	})
}

// validate says which settings are wrong, by their flags' names, and why.
func (c config) validate() error {
	errs := []error{cliflag.InRange("procs", c.Procs, 1, 64), cliflag.InRange("limit", c.Limit, 1, 1_000_000)}
	if c.Window < time.Millisecond {
		errs = append(errs, fmt.Errorf("-window must be at least 1ms, got %v", c.Window))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("-duration must be positive, got %v", c.Duration))
	}
	return errors.Join(errs...)
}

// result is what the run saw.
type result struct {
	PerProc     []int // grants per process
	Total       int
	MaxInWindow int           // most grants stamped in any window of Measured
	Measured    time.Duration // -window less the margin
	Server      string
}

// run starts (or connects to) Redis, runs the workers and reports.
func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	var res result
	addr := cfg.Redis
	if addr == "" {
		s, err := redistest.Start()
		if err != nil {
			return res, err
		}
		defer s.Close()
		addr = s.Addr
		if s.Embedded {
			res.Server = "the embedded Go server (redis-server is not installed)"
		} else {
			res.Server = "a local redis-server"
		}
	} else {
		res.Server = "the Redis server you named"
	}
	fmt.Fprintf(w, "Redis: %s at %s\n", res.Server, addr)
	fmt.Fprintf(w, "%d processes share one limit: at most %d grants in any %v, for %v.\n\n",
		cfg.Procs, cfg.Limit, cfg.Window, cfg.Duration)
	// A fresh key for this run, so that earlier runs do not count.
	cfg.Key += "/" + strconv.FormatInt(time.Now().UnixNano(), 36)
	grants, err := startWorkers(ctx, w, addr, cfg)
	if err != nil {
		return res, err
	}
	return report(w, cfg, grants), nil
}

// grant is one worker's grant, stamped by the worker (Unix ns).
type grant struct {
	proc int
	at   int64
}

// startWorkers runs cfg.Procs workers (this program, re-executed), prints
// each grant as a worker reports it, and returns them all.
func startWorkers(ctx context.Context, w io.Writer, addr string, cfg config) ([]grant, error) {
	var all []grant
	start := time.Now().UnixNano()
	spec := fmt.Sprintf("%s|%s|%d|%s|%s", addr, cfg.Key, cfg.Limit, cfg.Window, cfg.Duration)
	// The workers' stderr goes to w too: selfexec.Run serializes it with the
	// grants printed here.
	err := selfexec.Run(ctx, cfg.Procs, workerEnv, func(int) string { return spec }, w, func(i int, line string) {
		at, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			return
		}
		all = append(all, grant{proc: i, at: at})
		fmt.Fprintf(w, "  %7.3fs  process %d: granted\n", float64(at-start)/1e9, i+1)
	})
	return all, err
}

func report(w io.Writer, cfg config, grants []grant) result {
	margin := min(cfg.Window/5, 50*time.Millisecond)
	res := result{PerProc: make([]int, cfg.Procs), Total: len(grants), Measured: cfg.Window - margin}
	ats := make([]time.Duration, len(grants))
	for i, g := range grants {
		res.PerProc[g.proc]++
		ats[i] = time.Duration(g.at)
	}
	res.MaxInWindow = window.Peak(ats, res.Measured)
	fmt.Fprintln(w)
	for i, n := range res.PerProc {
		fmt.Fprintf(w, "process %d: %d grants\n", i+1, n)
	}
	fmt.Fprintf(w, "all together: %d grants in %v; the most in any %v: %d, limit %d: %s\n",
		res.Total, cfg.Duration, res.Measured, res.MaxInWindow, cfg.Limit, verdict(res.kept(cfg.Limit)))
	return res
}

func verdict(ok bool) string {
	if ok {
		return "kept"
	}
	return "BROKEN"
}

// worker is one process: it asks the shared limit as fast as it can and
// prints a line per grant.
func worker(ctx context.Context, spec string, stdout, stderr io.Writer) int {
	f := strings.Split(spec, "|")
	if len(f) != 5 {
		fmt.Fprintln(stderr, "shared worker: bad configuration", spec)
		return 2
	}
	limit, _ := strconv.Atoi(f[2])
	window, _ := time.ParseDuration(f[3])
	dur, _ := time.ParseDuration(f[4])
	client := redis.NewClient(&redis.Options{Addr: f[0]})
	defer client.Close()
	lim, err := redislimit.NewSlidingLog(redislimit.Options{Client: client, Key: f[1]},
		limiter.SlidingLogOptions{Limit: limit, Window: window})
	if err != nil {
		fmt.Fprintln(stderr, "shared worker:", err)
		return 1
	}
	defer lim.Close()
	ctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	for {
		_, err := lim.Acquire(ctx, 1)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return 0 // the run is over, or the next grant would come after it
		case err != nil:
			fmt.Fprintln(stderr, "shared worker:", err)
			return 1
		}
		fmt.Fprintln(out, time.Now().UnixNano())
		out.Flush()
	}
}

// kept reports whether the run kept the limit.
func (r result) kept(limit int) bool { return r.MaxInWindow <= limit }
