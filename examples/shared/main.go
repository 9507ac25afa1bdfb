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
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/redislimit"
)

// workerEnv, when set, makes the program a worker process; its value is
// the worker's configuration.
const workerEnv = "RATEGATE_SHARED_WORKER"

// startLead is how long after the workers are started they begin asking.
const startLead = 250 * time.Millisecond

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
	if code, ok := parseFlags(fs, args, usageText, stdout, stderr); !ok {
		return code
	}
	if err := cfg.validate(); err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	res, err := run(ctx, stdout, cfg)
	if err == nil && !res.kept(cfg.Limit) {
		err = fmt.Errorf("%d grants in one %v window, over the limit of %d", res.MaxInWindow, res.Measured, cfg.Limit)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	return 0
}

// validate says which settings are wrong, by their flags' names, and why.
func (c config) validate() error {
	var errs []error
	if c.Procs < 1 || c.Procs > 64 {
		errs = append(errs, fmt.Errorf("-procs must be from 1 to 64, got %d", c.Procs))
	}
	if c.Limit < 1 || c.Limit > 1_000_000 {
		errs = append(errs, fmt.Errorf("-limit must be from 1 to 1000000, got %d", c.Limit))
	}
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
		var stop func()
		var err error
		if addr, stop, res.Server, err = startRedis(); err != nil {
			return res, err
		}
		defer stop()
	} else {
		res.Server = "the Redis server you named"
	}
	fmt.Fprintf(w, "Redis: %s at %s\n", res.Server, addr)
	fmt.Fprintf(w, "%d processes share one limit: at most %d grants in any %v, for %v.\n\n",
		cfg.Procs, cfg.Limit, cfg.Window, cfg.Duration)
	// A fresh key for this run, so that earlier runs do not count.
	cfg.Key += "/" + strconv.FormatInt(time.Now().UnixNano(), 36)
	grants, err := runWorkers(ctx, w, addr, cfg)
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

// runWorkers runs cfg.Procs workers (this program, re-executed), prints
// each grant as a worker reports it, and returns them all.
func runWorkers(ctx context.Context, w io.Writer, addr string, cfg config) ([]grant, error) {
	var all []grant
	// The workers begin together, at start, however long each takes to
	// start: none takes the first window's permits before the others are
	// up.
	start := time.Now().Add(startLead).UnixNano()
	spec := fmt.Sprintf("%s|%s|%d|%s|%s|%d", addr, cfg.Key, cfg.Limit, cfg.Window, cfg.Duration, start)
	// The workers' stderr goes to w too, serialized with the grants printed
	// here.
	err := startWorkers(ctx, cfg.Procs, spec, w, func(i int, line string) {
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
	res.MaxInWindow = peak(ats, res.Measured)
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
	if len(f) != 6 {
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
	begin, _ := strconv.ParseInt(f[5], 10, 64)
	time.Sleep(time.Until(time.Unix(0, begin)))
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

// startRedis starts a Redis server for the run: a redis-server on a free
// loopback port when one is installed (on PATH), else an embedded server
// (github.com/alicebob/miniredis/v2). It returns the server's address, how
// to stop it, and which it is.
func startRedis() (addr string, stop func(), which string, err error) {
	if path, err := exec.LookPath("redis-server"); err == nil {
		addr, stop, err := startRedisServer(path)
		return addr, stop, "a local redis-server", err
	}
	m, err := miniredis.Run()
	if err != nil {
		return "", nil, "", err
	}
	return m.Addr(), m.Close, "the embedded Go server (redis-server is not installed)", nil
}

// startRedisServer runs the redis-server at path on a free loopback port,
// keeping nothing on disk, and returns its address once it answers PING.
// It tries three ports, in case another program takes one first.
func startRedisServer(path string) (addr string, stop func(), err error) {
	for range 3 {
		if addr, stop, err = tryRedisServer(path); err == nil {
			return addr, stop, nil
		}
	}
	return "", nil, err
}

// tryRedisServer is one try of startRedisServer.
func tryRedisServer(path string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port, for redis-server to take
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() { cmd.Process.Kill(); <-exited }
	if err := awaitPong(addr, exited); err != nil {
		stop()
		return "", nil, err
	}
	return addr, stop, nil
}

// awaitPong waits, for up to 10 s, until the server at addr answers PING,
// or until it has exited.
func awaitPong(addr string, exited <-chan struct{}) error {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			var reply string
			if _, err = io.WriteString(c, "PING\r\n"); err == nil {
				reply, err = bufio.NewReader(c).ReadString('\n')
			}
			c.Close()
			if reply == "+PONG\r\n" {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %s exited at start", addr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer: %v", addr, err)
		}
	}
}

// startWorkers starts n copies of this program, with workerEnv set to
// spec, passes each line that copy i writes to its stdout to line(i, text),
// and waits until they have all exited. What they write to their stderr goes
// to stderr, never at once with a call of line, so that line may write to
// it too. Ending ctx kills the copies still running.
// It returns nil when every copy exited with status 0, else the failures,
// each naming its process from 1.
func startWorkers(ctx context.Context, n int, spec string, stderr io.Writer, line func(i int, text string)) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, n)
	var mu sync.Mutex // serializes the calls of line and the writes to stderr
	stderr = lockedWriter{&mu, stderr}
	var wg sync.WaitGroup
	for i := range n {
		cmd := exec.CommandContext(ctx, exe)
		cmd.Env = append(os.Environ(), workerEnv+"="+spec)
		cmd.Stderr = stderr
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			cancel() // the copies already started stop
			wg.Wait()
			return fmt.Errorf("start process %d: %w", i+1, err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				mu.Lock()
				line(i, sc.Text())
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				errs[i] = fmt.Errorf("process %d: %w", i+1, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lockedWriter serializes the writes to w under mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
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
