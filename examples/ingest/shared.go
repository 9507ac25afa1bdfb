package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/limiter"
)

// The shared mode (-shared): the store is shared with another tenant, which
// comes during the run and from then on writes its share of the store's
// units a second, always accepted (its share is reserved), so that what is
// left for the job falls. Two clients write the same records at once, each
// into a store of its own that another tenant joins at the same moment:
//
//   - fixed sends through a token bucket at the rate the store had for the
//     job alone (ClientRate), and retries the rejected records a second
//     later, pass after pass, as the rate-limited client does;
//   - adaptive sends through an adaptive.RateLimiter that starts at the
//     same rate and reports on each lease whether the store took the
//     record: a rejection (an error wrapping limiter.ErrThrottled) brings
//     its rate down at once, successes let it climb, and a rejected record
//     is sent again when the rate allows.

// tenant is the other tenant: from At on, it writes Rate units a second,
// in writes of a hundredth of that every 10 ms.
type tenant struct {
	Rate int
	At   time.Duration
}

// defaultTenant takes 40% of the store's units from 1 s on.
func defaultTenant(cfg config) tenant {
	return tenant{Rate: cfg.StoreRate * 2 / 5, At: time.Second}
}

// join writes t's units into st from t.At on, until stop is closed.
func (t tenant) join(st *store, stop <-chan struct{}) {
	select {
	case <-time.After(t.At):
	case <-stop:
		return
	}
	st.mark()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		st.reserved(t.Rate / 100)
		select {
		case <-tick.C:
		case <-stop:
			return
		}
	}
}

// sharedRow is one client's outcome in the shared mode.
type sharedRow struct {
	row
	After float64 // units the store took from the job per second, from the tenant's arrival to the job's end
}

type sharedResult struct {
	Fixed, Adaptive sharedRow
	Left            int // units per second left for the job once the tenant came
}

func runShared(ctx context.Context, w io.Writer, cfg config) (sharedResult, error) {
	var res sharedResult
	if err := cfg.validate(); err != nil {
		return res, err
	}
	other := defaultTenant(cfg)
	res.Left = cfg.StoreRate - other.Rate
	records := makeRecords(0, cfg.Records, cfg.Units)
	fmt.Fprintf(w, "%s records of %d units (%s units) into a store that accepts %s units per second,\n",
		thousands(cfg.Records), cfg.Units, thousands(cfg.Records*cfg.Units), thousands(cfg.StoreRate))
	fmt.Fprintf(w, "shared: from %v on, another tenant takes %s units a second of it, leaving %s.\n",
		other.At, thousands(other.Rate), thousands(res.Left))
	fmt.Fprintf(w, "Both clients start at %s units a second; the adaptive one follows the rejections.\n\n", thousands(cfg.ClientRate))

	clientRate := limiter.Per(cfg.ClientRate, time.Second)
	fixed, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: clientRate, Burst: cfg.Burst})
	if err != nil {
		return res, err
	}
	defer fixed.Close()
	// The adaptive client: its permits are units, between 5% of the store's
	// rate and the client rate, which keeps under the store's rate with
	// the burst, as the fixed client's does.
	lim, err := adaptive.NewRateLimiter(adaptive.RateOptions{
		Floor:   limiter.Per(max(cfg.StoreRate/20, 1), time.Second),
		Initial: clientRate,
		Ceiling: clientRate,
		Burst:   cfg.Burst,
	})
	if err != nil {
		return res, err
	}
	defer lim.Close()

	// The two clients write at once, each into a store of its own.
	var fixedErr, adaptiveErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		res.Fixed, fixedErr = ingestShared("fixed rate", cfg, other, func(st *store) (tally, error) {
			return sendInPasses(ctx, records, fixed, cfg.Retry, st.write)
		})
	})
	wg.Go(func() {
		res.Adaptive, adaptiveErr = ingestShared("adaptive", cfg, other, func(st *store) (tally, error) {
			return sendAdaptive(ctx, records, lim, st.write)
		})
	})
	wg.Wait()
	if err := errors.Join(fixedErr, adaptiveErr); err != nil {
		return res, err
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "client\trecords sent\trejections\ttime\tunits/s taken after %v\t\n", other.At)
	for _, r := range []sharedRow{res.Fixed, res.Adaptive} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f s\t%s\t\n", r.Client, thousands(r.Sent), thousands(r.Rejected), r.Time.Seconds(), thousands(int(r.After)))
	}
	if err := tw.Flush(); err != nil {
		return res, err
	}
	for _, r := range []sharedRow{res.Fixed, res.Adaptive} {
		if r.Stored != cfg.Records {
			return res, fmt.Errorf("the %s client stored %d of %d records", r.Client, r.Stored, cfg.Records)
		}
	}
	fmt.Fprintf(w, "\nBoth stored all %s records. The store rejected %.0f%% of the fixed-rate client's\n",
		thousands(cfg.Records), 100*float64(res.Fixed.Rejected)/float64(max(res.Fixed.Sent, 1)))
	fmt.Fprintf(w, "requests, and %.1f%% of the adaptive one's, which took %.0f%% of the %s units a second left.\n",
		100*float64(res.Adaptive.Rejected)/float64(max(res.Adaptive.Sent, 1)), 100*res.Adaptive.After/float64(max(res.Left, 1)), thousands(res.Left))
	return res, nil
}

// ingestShared stores records with one client's send into a new store,
// which other joins at other.At.
func ingestShared(name string, cfg config, other tenant, send func(*store) (tally, error)) (sharedRow, error) {
	st := newStore(cfg.StoreRate)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { other.join(st, stop) })
	start := time.Now()
	t, err := send(st)
	r := sharedRow{row: row{Client: name, Sent: t.Sent, Rejected: t.Rejected, Passes: t.Passes, Time: time.Since(start), Stored: st.stored()}}
	close(stop)
	wg.Wait()
	if err != nil {
		return r, fmt.Errorf("%s client: %w", name, err)
	}
	if r.Time > other.At {
		r.After = float64(st.sinceMark()) / (r.Time - other.At).Seconds()
	}
	return r, nil
}

// sendAdaptive sends every record with write, each once lim grants its
// units, and reports on the lease what became of it: a rejection (an error
// wrapping limiter.ErrThrottled) lowers lim's rate, and the record is sent
// again when lim next allows. Any other error from write, or from lim,
// ends it.
func sendAdaptive(ctx context.Context, records []record, lim limiter.Limiter, write func(record) error) (tally, error) {
	t := tally{Passes: 1}
	pending := slices.Clone(records)
	for i := 0; i < len(pending); i++ {
		rec := pending[i]
		lease, err := lim.Acquire(ctx, rec.cost())
		if err != nil {
			return t, err
		}
		t.Sent++
		start := time.Now()
		err = write(rec)
		lease.Report(limiter.OutcomeOf(err), time.Since(start))
		switch {
		case errors.Is(err, limiter.ErrThrottled):
			t.Rejected++
			pending = append(pending, rec) // again, later
		case err != nil:
			return t, err
		}
	}
	return t, nil
}
