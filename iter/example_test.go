package iter_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/iter"
	"github.com/rategate/rategate/limiter"
)

// A range loop that runs its body at most 3 times in any 100 ms: nine jobs
// pass in groups of three, 100 ms apart.
func Example() {
	lim, err := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 3, Window: 100 * time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	jobs := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}

	start := time.Now()
	for job := range iter.Limit(ctx, slices.Values(jobs), lim) {
		fmt.Printf("job %s at %v\n", job, time.Since(start).Truncate(100*time.Millisecond))
	}
	// Output:
	// job a at 0s
	// job b at 0s
	// job c at 0s
	// job d at 100ms
	// job e at 100ms
	// job f at 100ms
	// job g at 200ms
	// job h at 200ms
	// job i at 200ms
}

// Batches of up to 4 records, each batch costing one permit per record.
func ExampleBatch() {
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(100, time.Second), Burst: 10})
	if err != nil {
		fmt.Println(err)
		return
	}
	records := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for batch := range iter.Batch(context.Background(), slices.Values(records), lim, 4) {
		fmt.Println(batch)
	}
	// Output:
	// [1 2 3 4]
	// [5 6 7 8]
	// [9 10]
}

// Items of different costs against a budget of request units. An item that
// costs more than the limiter can ever grant ends the loop with
// limiter.ErrExceedsLimit instead of waiting forever.
func ExampleWeightedErr() {
	type query struct {
		name string
		rus  int // request units
	}
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1000, time.Second), Burst: 1000})
	if err != nil {
		fmt.Println(err)
		return
	}
	queries := []query{{"point read", 1}, {"small query", 30}, {"scan", 5000}, {"never sent", 1}}
	cost := func(q query) int { return q.rus }

	seq, errf := iter.WeightedErr(context.Background(), slices.Values(queries), lim, cost)
	for q := range seq {
		fmt.Printf("%s: %d RUs\n", q.name, q.rus)
	}
	if err := errf(); errors.Is(err, limiter.ErrExceedsLimit) {
		fmt.Println("stopped:", err)
	}
	// Output:
	// point read: 1 RUs
	// small query: 30 RUs
	// stopped: iter: value 2 (5000 permits): limiter: request exceeds limit: 5000 permits asked, at most 1000 can be granted
}

// With a Concurrency limiter, a value's lease is held while the loop body
// runs, so loops sharing the limiter run at most Limit bodies at once.
func ExampleLimit_concurrency() {
	lim, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for v := range iter.Limit(context.Background(), slices.Values([]int{1, 2}), lim) {
		fmt.Printf("body %d: %d of 2 permits in use\n", v, lim.InUse())
	}
	fmt.Printf("after the loop: %d in use\n", lim.InUse())
	// Output:
	// body 1: 1 of 2 permits in use
	// body 2: 1 of 2 permits in use
	// after the loop: 0 in use
}

// A range loop that tells an adaptive limiter what became of each call:
// the service throttles the third, and the rate falls at once.
func ExampleLeases() {
	lim, err := adaptive.NewRateLimiter(adaptive.RateOptions{
		Floor:   limiter.Per(1, time.Second),
		Initial: limiter.Per(100, time.Second),
		Ceiling: limiter.Per(1000, time.Second),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lim.Close()
	perSecond := func(r limiter.Rate) float64 { return float64(r.Events()) / r.Period().Seconds() }

	calls := 0
	fetch := func(context.Context, string) error { // stands for an HTTP GET
		calls++
		if calls == 3 {
			return fmt.Errorf("GET: 429 Too Many Requests: %w", limiter.ErrThrottled)
		}
		return nil
	}
	ctx := context.Background()
	before := perSecond(lim.Rate())
	for url, lease := range iter.Leases(ctx, slices.Values([]string{"/a", "/b", "/c", "/d"}), lim) {
		start := time.Now()
		err := fetch(ctx, url)
		lease.Report(limiter.OutcomeOf(err), time.Since(start))
		fmt.Println(url, limiter.OutcomeOf(err))
	}
	fmt.Println("the rate fell:", perSecond(lim.Rate()) < before)
	// Output:
	// /a succeeded
	// /b succeeded
	// /c throttled
	// /d succeeded
	// the rate fell: true
}
