package adaptive_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rategate/rategate/adaptive"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
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

// A crawler that is told no host's limit: each host gets a RateLimiter of
// its own through the pool's PerKey, and a task whose error wraps
// limiter.ErrThrottled (a 429) slows down its own host only.
func ExampleNewKeyedRateLimiter() {
	hosts, err := adaptive.NewKeyedRateLimiter[string](adaptive.KeyedRateOptions{
		RateOptions: adaptive.RateOptions{
			Floor:   limiter.Per(1, time.Second),
			Initial: limiter.Per(100, time.Second),
			Ceiling: limiter.Per(1000, time.Second),
		},
		Forget: 10 * time.Minute, // keep what a host taught for 10 idle minutes
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer hosts.Close()
	p, err := pool.New(pool.Options{Workers: 4, PerKey: hosts.For})
	if err != nil {
		fmt.Println(err)
		return
	}

	// fetch stands for a GET: b.example answers every request with 429.
	fetch := func(host string) func(context.Context) error {
		return func(context.Context) error {
			if host == "b.example" {
				return fmt.Errorf("GET %s: 429 Too Many Requests: %w", host, limiter.ErrThrottled)
			}
			return nil
		}
	}
	for range 5 {
		for _, host := range []string{"a.example", "b.example"} {
			if err := p.GoKey(context.Background(), host, fetch(host)); err != nil {
				fmt.Println(err)
				return
			}
		}
	}
	err = p.Wait() // the 429s of b.example
	fmt.Println("throttled:", errors.Is(err, limiter.ErrThrottled))

	for _, host := range []string{"a.example", "b.example"} {
		q := hosts.Quota(host) // a bucket of one permit per Window
		if rate := 1 / q.Window.Seconds(); rate >= 100 {
			fmt.Println(host, "at 100/s or more")
		} else {
			fmt.Println(host, "backed off under 100/s")
		}
	}
	// Output:
	// throttled: true
	// a.example at 100/s or more
	// b.example backed off under 100/s
}
