// Command ingest writes 10,000 records of 10 units each into a store that
// accepts 20,000 units per second and rejects the rest, as a database with
// provisioned throughput answers "429 Too Many Requests". Two clients write
// the same records:
//
//   - naive sends every record as fast as it can, then retries the rejected
//     ones a second later, pass after pass;
//   - rate-limited sends through iter.WeightedErr, with a token bucket just
//     under the store's rate (19,000 units a second, a burst of 500) whose
//     permits are units: each record waits for its 10 units, so the store
//     never has to reject one.
//
// It prints, per client, the records sent, the rejections, the passes and
// the time taken. The naive client sends 30,000 records to store 10,000
// (20,000 rejections); the rate-limited one sends 10,000, none rejected, in
// about 5 s: 100,000 units at 19,000 a second.
//
// Run it with (about 9 s):
//
//	go run ./examples/ingest
//	go run ./examples/ingest -records 2000 -client-rate 25000   # faster than the store: rejections
//
// With -distributed, the rate-limited client runs as -processes worker
// processes (this program, re-executed), each with a quarter of the
// records, writing over HTTP to one store that this process serves on
// loopback. No worker knows how fast the others send: they share the
// client rate through a redislimit.Partitioned limiter, whose partitions
// (16 by default) they lease in Redis and decide on locally, with no round
// trip per record. With no -redis address it starts a local redis-server
// when one is installed, else an embedded server, and says which. The
// store's own sliding log, not the clients, shows the bound: 0 rejections,
// 10,000 records sent, and at most 20,000 units in any second, in about
// 5.3 s (100,000 units at the shared 19,000 a second):
//
//	go run ./examples/ingest -distributed
//	go run ./examples/ingest -distributed -redis localhost:6379 -processes 8
//
// -processes, -redis, -partitions and -lease-ttl are for the distributed
// mode only: without -distributed they are refused.
//
// With -shared, the store is shared: from 1 s on, another tenant takes 40%
// of its units (8,000 of 20,000 a second; its share is reserved, so its
// writes always pass). Two clients write the same records at once, each into
// a store of its own: one at the fixed rate it had alone, retrying the
// rejected records a second later, and one through an adaptive.RateLimiter
// that reports on each lease whether the store took the record, which
// lowers its rate at a rejection and lets it climb while the writes pass.
// The fixed-rate client has 27% of its requests rejected; the adaptive one
// about 10 of some 10,000 (0.1%), and takes some 85% of the 12,000 units a
// second left, finishing first (about 9 s):
//
//	go run ./examples/ingest -shared
//
// Flags set the sizes; -h lists them. It takes no arguments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rategate/rategate/iter"
	"github.com/rategate/rategate/limiter"
)

// config sets the sizes, so that tests can run the program at other scales
// (on a virtual clock).
type config struct {
	Records    int           // records to store
	Units      int           // units each record costs the store
	StoreRate  int           // units the store accepts in any one second
	ClientRate int           // units per second the rate-limited client sends
	Burst      int           // the rate-limited client's token bucket capacity, in units
	Retry      time.Duration // wait before each pass over the rejected records
}

// The rate-limited client keeps 5% under the store's limit: its token bucket
// grants at most Burst + ClientRate = 19,500 units in any second, so the
// store, which counts its own second from its own clock, never sees more
// than 20,000, even when some requests reach it a few milliseconds late.
var defaultConfig = config{
	Records:    10_000,
	Units:      10,
	StoreRate:  20_000,
	ClientRate: 19_000,
	Burst:      500,
	Retry:      time.Second,
}

// maxRecords bounds -records, so that a typo cannot ask for gigabytes.
const maxRecords = 10_000_000

// validate says which setting is wrong, by its flag's name, and why.
func (c config) validate() error {
	switch {
	case c.Records < 1 || c.Records > maxRecords:
		return fmt.Errorf("-records must be from 1 to %s, got %d", thousands(maxRecords), c.Records)
	case c.Units < 1:
		return fmt.Errorf("-units must be at least 1, got %d", c.Units)
	case c.StoreRate < c.Units:
		return fmt.Errorf("-store-rate must be at least a record's -units (%d), or the store could never take one; got %d", c.Units, c.StoreRate)
	case c.ClientRate < 1:
		return fmt.Errorf("-client-rate must be at least 1 unit a second, got %d", c.ClientRate)
	case c.Burst < c.Units:
		return fmt.Errorf("-burst must be at least a record's -units (%d), or the rate-limited client could never send one; got %d", c.Units, c.Burst)
	case c.Retry <= 0:
		return fmt.Errorf("-retry must be a positive duration such as 1s, got %v", c.Retry)
	}
	return nil
}

// row is one client's outcome.
type row struct {
	Client   string
	Sent     int // write requests, retries included
	Rejected int // requests the store refused
	Stored   int // records the store holds at the end
	Passes   int // passes over the records still to store
	Time     time.Duration
}

type result struct {
	Naive, Limited row
}

func main() {
	if spec := os.Getenv(workerEnv); spec != "" {
		// A worker of the distributed mode, started by this program.
		if err := workerMain(spec, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "ingest worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usageText = `Usage: ingest [flags]

Writes the same records into a simulated store that rejects what goes over
its rate, twice: naively (send everything, retry the rejected records a
second later), and rate-limited (each record waits for its units from a
token bucket under the store's rate). Prints, per client, the records sent,
the rejections, the passes and the time.

With -distributed, the rate-limited client runs as -processes worker
processes sharing the client rate through redislimit.Partitioned (Redis at
-redis, or a local server started for the run), writing to one store.

With -shared, another tenant takes 60% of the store's units from 1 s on: a
client at a fixed rate, retrying the rejected records a second later, and
one with an adaptive rate limiter that follows the rejections, write the
same records, each into a store of its own.

Flags:
`

// cli runs the program with the command-line arguments args (without the
// program's name) and returns its exit status: 0 done (or -h), 1 the run
// failed, 2 the command line is wrong.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.IntVar(&cfg.Records, "records", cfg.Records, "records to store")
	fs.IntVar(&cfg.Units, "units", cfg.Units, "units each record costs the store")
	fs.IntVar(&cfg.StoreRate, "store-rate", cfg.StoreRate, "units the store accepts in any one second")
	fs.IntVar(&cfg.ClientRate, "client-rate", cfg.ClientRate, "units per second the rate-limited client sends")
	fs.IntVar(&cfg.Burst, "burst", cfg.Burst, "units the rate-limited client may send at once")
	fs.DurationVar(&cfg.Retry, "retry", cfg.Retry, "wait before each pass over the rejected records")
	dist := defaultDist
	distributed := fs.Bool("distributed", false, "run the distributed mode: -processes worker processes share the client rate through redislimit.Partitioned")
	shared := fs.Bool("shared", false, "run the shared mode: another tenant takes 60% of the store's units from 1 s on; a fixed-rate client against an adaptive one")
	fs.IntVar(&dist.Processes, "processes", dist.Processes, "worker processes in the distributed mode")
	fs.StringVar(&dist.Redis, "redis", dist.Redis, "Redis address for the distributed mode (default: start a local redis-server, or an embedded server when none is installed)")
	fs.IntVar(&dist.Partitions, "partitions", dist.Partitions, "partitions the client rate is split into in the distributed mode")
	fs.DurationVar(&dist.LeaseTTL, "lease-ttl", dist.LeaseTTL, "lease TTL of the partitions in the distributed mode")
	if code, ok := parseFlags(fs, args, usageText, stdout, stderr); !ok {
		return code
	}
	err := cfg.validate()
	switch {
	case err != nil:
	case *distributed && *shared:
		err = errors.New("-distributed and -shared are two modes: choose one")
	case *distributed:
		err = dist.validate(cfg)
	default:
		err = distributedOnly(fs)
	}
	if err != nil {
		return usageError(stderr, fs.Name(), err)
	}
	switch {
	case *distributed:
		_, err = runDistributed(ctx, stdout, cfg, dist)
	case *shared:
		_, err = runShared(ctx, stdout, cfg)
	default:
		_, err = run(ctx, stdout, cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
		return 1
	}
	return 0
}

// distributedOnly returns an error naming the flags set on fs that only the
// distributed mode reads, if there are any.
func distributedOnly(fs *flag.FlagSet) error {
	var set []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "processes", "redis", "partitions", "lease-ttl":
			set = append(set, "-"+f.Name)
		}
	})
	switch len(set) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s is for the distributed mode only: add -distributed", set[0])
	}
	return fmt.Errorf("%s are for the distributed mode only: add -distributed", strings.Join(set, " and "))
}

func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	var res result
	if err := cfg.validate(); err != nil {
		return res, err
	}
	records := makeRecords(0, cfg.Records, cfg.Units)
	fmt.Fprintf(w, "%s records of %d units (%s units) into a store that accepts %s units per second.\n",
		thousands(cfg.Records), cfg.Units, thousands(cfg.Records*cfg.Units), thousands(cfg.StoreRate))
	fmt.Fprintf(w, "The rate-limited client sends through iter.WeightedErr: a token bucket of %s units a second, burst %s.\n\n",
		thousands(cfg.ClientRate), thousands(cfg.Burst))

	var err error
	// The naive client: no limiter. Every record is sent at once.
	if res.Naive, err = ingest(ctx, "naive", records, cfg, nil); err != nil {
		return res, err
	}
	// The rate-limited client: a token bucket just under the store's rate,
	// whose permits are the store's units.
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(cfg.ClientRate, time.Second), Burst: cfg.Burst})
	if err != nil {
		return res, err
	}
	defer lim.Close()
	if res.Limited, err = ingest(ctx, "rate-limited", records, cfg, lim); err != nil {
		return res, err
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\trecords sent\trejections\tpasses\ttime\t")
	for _, r := range []row{res.Naive, res.Limited} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.2f s\t\n", r.Client, thousands(r.Sent), thousands(r.Rejected), r.Passes, r.Time.Seconds())
	}
	if err := tw.Flush(); err != nil {
		return res, err
	}
	for _, r := range []row{res.Naive, res.Limited} {
		if r.Stored != cfg.Records {
			return res, fmt.Errorf("the %s client stored %d of %d records", r.Client, r.Stored, cfg.Records)
		}
	}
	fmt.Fprintf(w, "\nBoth stored all %s records. The naive client sent %.1fx as many requests as needed; "+
		"the rate-limited one %.1fx.\n", thousands(cfg.Records),
		float64(res.Naive.Sent)/float64(max(cfg.Records, 1)), float64(res.Limited.Sent)/float64(max(cfg.Records, 1)))
	return res, nil
}

// ingest stores records with one client, in passes (see sendInPasses),
// into a new store. Each client writes to a new store.
func ingest(ctx context.Context, name string, records []record, cfg config, lim limiter.Limiter) (row, error) {
	st := newStore(cfg.StoreRate)
	start := time.Now()
	t, err := sendInPasses(ctx, records, lim, cfg.Retry, st.write)
	r := row{Client: name, Sent: t.Sent, Rejected: t.Rejected, Passes: t.Passes, Time: time.Since(start), Stored: st.stored()}
	if err != nil {
		return r, fmt.Errorf("%s client: %w", name, err)
	}
	return r, nil
}

// tally is what sendInPasses did.
type tally struct {
	Sent     int // write calls, retries included
	Rejected int // of them, those the store refused
	Passes   int // passes over the records still to store
}

// sendInPasses is every client's loop, in one process or many: pass after
// pass, it sends with write every record not yet stored, through lim when
// lim is set (each record waits for its units), and keeps the records that
// write refuses with errThrottled for the next pass, retry later. Any other
// error from write, or from lim, ends it.
func sendInPasses(ctx context.Context, records []record, lim limiter.Limiter, retry time.Duration, write func(record) error) (tally, error) {
	var t tally
	for pending := records; len(pending) > 0; {
		if t.Passes > 0 {
			select {
			case <-time.After(retry):
			case <-ctx.Done():
				return t, ctx.Err()
			}
		}
		t.Passes++
		var rejected []record
		// With lim nil, WeightedErr passes every record at once: the naive
		// client is the same loop without a limit.
		seq, errf := iter.WeightedErr(ctx, slices.Values(pending), lim, record.cost)
		for rec := range seq {
			t.Sent++
			if err := write(rec); errors.Is(err, errThrottled) {
				t.Rejected++
				rejected = append(rejected, rec)
			} else if err != nil {
				return t, fmt.Errorf("pass %d: %w", t.Passes, err)
			}
		}
		if err := errf(); err != nil {
			return t, fmt.Errorf("pass %d: %w", t.Passes, err)
		}
		pending = rejected
	}
	return t, nil
}

// record is one record to store; Units is what writing it costs the store.
type record struct {
	ID    int
	Units int
}

func (r record) cost() int { return r.Units }

// makeRecords returns the records with IDs lo to hi-1, of units each.
func makeRecords(lo, hi, units int) []record {
	rs := make([]record, 0, max(hi-lo, 0))
	for id := lo; id < hi; id++ {
		rs = append(rs, record{ID: id, Units: units})
	}
	return rs
}

// errThrottled is the store's refusal: its units for the last second are
// spent. It wraps limiter.ErrThrottled, so that limiter.OutcomeOf takes it
// for throttling.
var errThrottled = fmt.Errorf("store: throttled (429): retry later: %w", limiter.ErrThrottled)

// store simulates a store with provisioned throughput: it accepts at most
// rate units in any one-second window (t-1s, t] and rejects a write that
// would go over (a rejection costs it nothing). It keeps its own exact
// account, as a real service would, independent of any client's limiter: a
// log of the writes it accepted in the last second.
type store struct {
	mu        sync.Mutex
	maxInLog  int           // most units in the log at once: in any one second
	first     time.Duration // since origin: the first accepted write
	last      time.Duration // and the last
	origin    time.Time
	rate      int
	log       []write // accepted writes of the last second, oldest first
	inLog     int     // their units
	ids       map[int]bool
	afterMark int // units accepted from the job since mark
}

type write struct {
	at    time.Duration // since origin
	units int
}

func newStore(rate int) *store {
	return &store{origin: time.Now(), rate: rate, ids: make(map[int]bool)}
}

func (s *store) write(rec record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Since(s.origin)
	drop := 0
	for drop < len(s.log) && s.log[drop].at <= now-time.Second {
		s.inLog -= s.log[drop].units
		drop++
	}
	s.log = s.log[drop:]
	if s.inLog+rec.Units > s.rate {
		return errThrottled
	}
	s.log = append(s.log, write{at: now, units: rec.Units})
	s.inLog += rec.Units
	s.afterMark += rec.Units
	s.maxInLog = max(s.maxInLog, s.inLog)
	if len(s.ids) == 0 {
		s.first = now
	}
	s.last = now
	s.ids[rec.ID] = true
	return nil
}

// reserved records a write of units by another tenant, whose share of the
// store is reserved: it is always accepted, and counts in the last second's
// units like any write.
func (s *store) reserved(units int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Since(s.origin)
	s.log = append(s.log, write{at: now, units: units})
	s.inLog += units
}

// mark starts counting the units the store accepts from the job anew.
func (s *store) mark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterMark = 0
}

// sinceMark returns the units accepted from the job since mark.
func (s *store) sinceMark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.afterMark
}

// span returns the time from the first accepted write to the last.
func (s *store) span() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last - s.first
}

// busiest returns the most units the store accepted in any one second.
func (s *store) busiest() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInLog
}

func (s *store) stored() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// thousands formats n with commas: 30000 as "30,000".
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
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
