package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/rategate/rategate/pool"
)

const runUsage = `Usage: rategate run [-j N] [-rate N/PERIOD] [-window smooth|strict] [-burst N]
                    [-per-key FIELD] [-joblog FILE] [-u] [-redis ADDR -key NAME] -- COMMAND [ARG...]

Runs COMMAND once per line of stdin, as xargs -I {} does: every "{}" in
COMMAND and its ARGs is replaced by the line (without its newline); with no
"{}" anywhere, the line is added as the last argument. COMMAND is run
directly, not by a shell: use sh -c 'SCRIPT' sh {} to run a script, and read
the line as "$1" in it. Jobs get no stdin.

At most -j jobs run at once (default: the number of CPUs), and jobs start in
input order at most at -rate (-window and -burst as for rategate lines; no
-rate: no limit on starts). With -per-key FIELD the rate is per key instead:
FIELD is N (the Nth whitespace-separated field of the line, from 1) or host
(the host of the first field that is a URL, as in https://HOST/...); a line
without the field has the empty key. A key at its rate holds up only its own
lines: each key's lines start in input order, the keys' in turn.

The output of each job is written when it ends, its stdout to stdout and its
stderr to stderr, so outputs never mix (-u: as it comes). -joblog FILE writes a
line per finished job as GNU parallel's --joblog does (Seq, Host, Starttime,
JobRuntime, Send, Receive, Exitval, Signal, Command), to a new FILE ("-":
stderr); an existing FILE is never written over.

Interrupt (Ctrl-C, SIGINT, or SIGTERM): no more jobs start; the running ones
are waited for (they run in their own process group, so Ctrl-C reaches
rategate only); then the jobs that did not run are listed on stderr. A second
interrupt passes the signal on to the running jobs, a third kills them.

Exit status, as GNU parallel's: 0 when every job succeeded; 1 to 100, the
number of jobs that failed (exited non-zero, were killed by a signal, or could
not be started); 101 when more than 100 failed; 128+N after signal N
interrupted the run (130 for Ctrl-C); 255 for another error (reading stdin,
Redis). 2 is also bad input (a flag, a rate, a -joblog FILE that exists),
found before any job starts.
`

// runConfig is what run's flags say.
type runConfig struct {
	jobs    int
	limit   limit
	limited bool
	perKey  keyFunc
	joblog  string
	ungroup bool
	argv    []string
	sh      shared
}

func parseRun(args []string) (*runConfig, error) {
	fs := newFlags("run")
	cfg := &runConfig{}
	var ev eventFlags
	ev.add(fs, "job starts")
	fs.IntVar(&cfg.jobs, "j", runtime.NumCPU(), "run at most `N` jobs at once")
	field := fs.String("per-key", "", "a rate per key: `FIELD` is N (the Nth field of the line) or host (of its first URL)")
	fs.StringVar(&cfg.joblog, "joblog", "", "write a GNU parallel joblog line per finished job to the new `FILE` (- for stderr)")
	fs.BoolVar(&cfg.ungroup, "u", false, "pass the jobs' output on as it comes, not a job's whole output at once")
	cfg.sh.add(fs)
	if err := parseFlags(fs, runUsage, args); err != nil {
		return nil, err
	}
	cfg.argv = fs.Args()
	if len(cfg.argv) == 0 {
		return nil, usagef("no COMMAND: rategate run [flags] -- COMMAND [ARG...]")
	}
	if cfg.jobs < 1 {
		return nil, usagef("-j %d: must be at least 1", cfg.jobs)
	}
	var err error
	if cfg.limit, cfg.limited, err = ev.parse(); err != nil {
		return nil, err
	}
	if *field != "" {
		if cfg.perKey, err = parseKeyFunc(*field); err != nil {
			return nil, err
		}
		if !cfg.limited {
			return nil, usagef("-per-key needs -rate, the rate of each key")
		}
	}
	return cfg, cfg.sh.check()
}

func runCmd(args []string) int {
	cfg, err := parseRun(args)
	if err != nil {
		return finish("run", err)
	}
	joblog, err := openJoblog(cfg.joblog)
	if err != nil {
		return finish("run", err)
	}
	r := newRunner(cfg, joblog)
	defer r.closeLog()
	opts, err := cfg.poolOptions()
	if code := finish("run", err); err != nil {
		if code == exitError {
			code = exitOther
		}
		return code
	}
	p, err := pool.New(opts)
	if err != nil {
		return finish("run", optionErr(err))
	}
	stopSignals := r.handleSignals()
	read := r.submitAll(p, os.Stdin)
	werr := p.Wait()
	stopSignals()
	return r.report(read, werr)
}

// exitOther is run's exit status for an error other than a failed job.
const exitOther = 255

// poolOptions returns the pool's options, with the limit in the -redis
// server if one was given (its connection lasts as long as the process).
func (cfg *runConfig) poolOptions() (pool.Options, error) {
	opts := pool.Options{Workers: cfg.jobs}
	if !cfg.limited {
		return opts, nil
	}
	c, err := cfg.sh.connect()
	if err != nil {
		return opts, err
	}
	if cfg.perKey != nil {
		opts.PerKey, err = cfg.limit.perKey(&cfg.sh, c)
	} else {
		opts.Limiter, err = cfg.limit.limiter(&cfg.sh, c)
	}
	return opts, optionErr(err)
}

func openJoblog(name string) (io.WriteCloser, error) {
	switch name {
	case "":
		return nil, nil
	case "-":
		return nopCloser{os.Stderr}, nil
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil, usagef("-joblog %s: the file exists; rategate writes only a new one", name)
	}
	if err != nil {
		return nil, &usageError{err}
	}
	_, err = io.WriteString(f, "Seq\tHost\tStarttime\tJobRuntime\tSend\tReceive\tExitval\tSignal\tCommand\n")
	return f, err
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// submitAll reads jobs from in and submits them until in ends, the run is
// interrupted or a job cannot be submitted. It returns how many lines it
// read (and so whether it read them all).
func (r *runner) submitAll(p *pool.Pool, in io.Reader) readResult {
	lines := make(chan string)
	var res readResult
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(lines)
		res.err = readLines(r.stop, in, lines)
	}()
	n := 0
	for {
		if r.stop.Err() != nil { // before any line that may be ready
			return readResult{lines: n, err: r.fatal()}
		}
		select {
		case <-r.stop.Done():
			return readResult{lines: n, err: r.fatal()}
		case line, ok := <-lines:
			if !ok {
				<-readDone
				res.lines, res.all = n, res.err == nil
				if res.err != nil {
					r.fail(fmt.Errorf("reading stdin: %w", res.err))
				}
				return res
			}
			n++
			r.submit(p, n, line)
		}
	}
}

type readResult struct {
	lines int   // lines read
	all   bool  // stdin was read to its end
	err   error // why not
}

// readLines sends in's lines, without their newline, until in ends or ctx
// is done.
func readLines(ctx context.Context, in io.Reader, lines chan<- string) error {
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			select {
			case lines <- strings.TrimSuffix(line, "\n"):
			case <-ctx.Done():
				return nil
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (r *runner) submit(p *pool.Pool, seq int, line string) {
	j := r.queue(seq, line)
	var err error
	if r.cfg.perKey != nil {
		err = p.GoKey(r.stop, r.cfg.perKey(line), r.task(j))
	} else {
		err = p.GoContext(r.stop, r.task(j))
	}
	if err != nil && r.stop.Err() == nil {
		r.fail(err)
	}
}

func (r *runner) task(j *job) func(context.Context) error {
	return func(context.Context) error {
		r.runJob(j)
		return nil
	}
}

// handleSignals makes SIGINT and SIGTERM stop the run: the first stops
// starting jobs, the second passes the signal on to the running jobs, the
// third kills them. It returns a function that stops the handling.
func (r *runner) handleSignals() (stop func()) {
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for n := 1; ; n++ {
			select {
			case s := <-sigs:
				r.interrupted(s.(syscall.Signal), n)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		<-ended
	}
}

func (r *runner) interrupted(s syscall.Signal, n int) {
	switch n {
	case 1:
		r.mu.Lock()
		r.signal = s
		running := len(r.running)
		r.mu.Unlock()
		r.cancel()
		fmt.Fprintf(os.Stderr, "rategate run: %v: starting no more jobs, waiting for the %d running (interrupt again to pass the signal on to them)\n", s, running)
	case 2:
		fmt.Fprintf(os.Stderr, "rategate run: %v: passing it on to the running jobs (interrupt again to kill them)\n", s)
		r.signalJobs(s)
	default:
		fmt.Fprintf(os.Stderr, "rategate run: %v: killing the running jobs\n", s)
		r.signalJobs(syscall.SIGKILL)
	}
}
