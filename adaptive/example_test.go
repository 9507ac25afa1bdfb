package adaptive_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/limiter"
)

// A client of a service that publishes no limit: the rate climbs while calls
// succeed and falls at once when one is throttled.
func Example() {
	lim, err := adaptive.NewRateLimiter(adaptive.RateOptions{
		Floor:   limiter.Per(1, time.Second),
		Initial: limiter.Per(100, time.Second),
		Ceiling: limiter.Per(1000, time.Second),
		Burst:   10,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lim.Close()

	// fetch stands for a request to the service, which answers its fourth
	// with 429 Too Many Requests.
	calls := 0
	fetch := func(context.Context) error {
		calls++
		if calls == 4 {
			return fmt.Errorf("GET /items: 429 Too Many Requests: %w", limiter.ErrThrottled)
		}
		return nil
	}

	for range 6 {
		lease, err := lim.Acquire(context.Background(), 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		start := time.Now()
		err = fetch(context.Background())
		lease.Report(limiter.OutcomeOf(err), time.Since(start))
		r := lim.Rate()
		fmt.Printf("%-9v then %.0f/s\n", limiter.OutcomeOf(err), float64(r.Events())/r.Period().Seconds())
	}
	// Output:
	// succeeded then 102/s
	// succeeded then 103/s
	// succeeded then 105/s
	// throttled then 85/s
	// succeeded then 85/s
	// succeeded then 85/s
}

// A client that keeps the calls in flight to a dependency near what it
// serves without queueing: report each call's latency.
func ExampleConcurrencyLimiter() {
	lim, err := adaptive.NewConcurrencyLimiter(adaptive.ConcurrencyOptions{Initial: 8, Ceiling: 256})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lim.Close()

	query := func(context.Context) error { return nil } // stands for a call to the dependency
	for range 3 {
		lease, err := lim.Acquire(context.Background(), 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		start := time.Now()
		err = query(context.Background())
		lease.Report(limiter.OutcomeOf(err), time.Since(start))
		lease.Release()
	}
	fmt.Println("limit:", lim.Limit())

	_, err = adaptive.NewConcurrencyLimiter(adaptive.ConcurrencyOptions{Floor: 10, Ceiling: 5})
	var oe *limiter.OptionError
	fmt.Println(errors.As(err, &oe), err)
	// Output:
	// limit: 8
	// true limiter: invalid option Floor: 10 is above Ceiling 5
}
