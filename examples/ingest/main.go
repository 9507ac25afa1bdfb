// Command ingest is the seed's rate-limiting-pattern case: 10,000 records
// of 10 units each go into a store that accepts 20,000 units per second and
// rejects the rest (as a database with provisioned throughput answers "429
// Too Many Requests"). Two clients write the same records:
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
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if _, err := run(ctx, os.Stdout, defaultConfig); err != nil {
		fmt.Fprintln(os.Stderr, "ingest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, w io.Writer, cfg config) (result, error) {
	var res result
	if cfg.Records < 0 || cfg.Units <= 0 || cfg.StoreRate <= 0 || cfg.ClientRate <= 0 || cfg.Burst < cfg.Units {
		return res, fmt.Errorf("invalid config %+v", cfg)
	}
	records := make([]record, cfg.Records)
	for i := range records {
		records[i] = record{ID: i, Units: cfg.Units}
	}
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

// ingest stores records with one client: pass after pass, it sends every
// record not yet stored (through lim, when lim is set) and keeps the
// rejected ones for the next pass, cfg.Retry later. Each client writes to a
// new store.
func ingest(ctx context.Context, name string, records []record, cfg config, lim limiter.Limiter) (row, error) {
	st := newStore(cfg.StoreRate)
	r := row{Client: name}
	start := time.Now()
	pending := records
	for len(pending) > 0 {
		if r.Passes > 0 {
			if err := sleep(ctx, cfg.Retry); err != nil {
				return r, err
			}
		}
		r.Passes++
		var rejected []record
		// With lim nil, WeightedErr passes every record at once: the naive
		// client is the same loop without a limit.
		seq, errf := iter.WeightedErr(ctx, slices.Values(pending), lim, record.cost)
		for rec := range seq {
			r.Sent++
			if err := st.write(rec); err != nil {
				r.Rejected++
				rejected = append(rejected, rec)
			}
		}
		if err := errf(); err != nil {
			return r, fmt.Errorf("%s client, pass %d: %w", name, r.Passes, err)
		}
		pending = rejected
	}
	r.Time = time.Since(start)
	r.Stored = st.stored()
	return r, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// record is one record to store; Units is what writing it costs the store.
type record struct {
	ID    int
	Units int
}

func (r record) cost() int { return r.Units }

// errThrottled is the store's refusal: its units for the last second are
// spent.
var errThrottled = errors.New("store: throttled (429): retry later")

// store simulates a store with provisioned throughput: it accepts at most
// rate units in any one-second window (t-1s, t] and rejects a write that
// would go over (a rejection costs it nothing). It keeps its own exact
// account, as a real service would, independent of any client's limiter: a
// log of the writes it accepted in the last second.
type store struct {
	mu     sync.Mutex
	origin time.Time
	rate   int
	log    []write // accepted writes of the last second, oldest first
	inLog  int     // their units
	ids    map[int]bool
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
	s.ids[rec.ID] = true
	return nil
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
