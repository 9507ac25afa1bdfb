package pool_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
)

// At most 4 tasks run at once, and each start passes a token bucket of 1000
// a second (burst 10).
func Example() {
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1000, time.Second), Burst: 10})
	if err != nil {
		panic(err)
	}
	p, err := pool.New(pool.Options{Workers: 4, Limiter: lim})
	if err != nil {
		panic(err)
	}
	var sum atomic.Int64
	for i := 1; i <= 20; i++ {
		if err := p.Go(func(ctx context.Context) error {
			sum.Add(int64(i))
			return nil
		}); err != nil {
			panic(err)
		}
	}
	if err := p.Wait(); err != nil {
		panic(err)
	}
	fmt.Println("sum:", sum.Load())
	// Output: sum: 210
}

// Wait joins the tasks' errors; a panic comes back as a *PanicError.
func ExamplePool_Wait() {
	p, _ := pool.New(pool.Options{Workers: 2, FirstError: false})
	p.Go(func(ctx context.Context) error { return fmt.Errorf("task 1 failed") })
	p.Go(func(ctx context.Context) error { panic("task 2 panicked") })
	err := p.Wait()
	lines := strings.Split(err.Error(), "\n")
	slices.Sort(lines)
	fmt.Println(slices.Contains(lines, "task 1 failed"), slices.Contains(lines, "pool: task panicked: task 2 panicked"))
	fmt.Println(p.Go(func(ctx context.Context) error { return nil }))
	// Output:
	// true true
	// pool: closed (Wait or Close was called): limiter: closed
}

// Map squares numbers on 3 workers and yields the results in input order.
func ExampleMap() {
	square := func(ctx context.Context, n int) (int, error) { return n * n, nil }
	for r, err := range pool.Map(context.Background(), slices.Values([]int{1, 2, 3, 4, 5}), square, pool.MapOptions{Workers: 3}) {
		if err != nil {
			panic(err)
		}
		fmt.Print(r, " ")
	}
	fmt.Println()
	// Output: 1 4 9 16 25
}

// GoKey gives each key (here a host) its own queue and limiter: host a may
// start 2 requests per 200 ms, and its third and fourth wait for its window
// without holding up host b, although they were submitted first.
func ExamplePool_GoKey() {
	hosts, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
		return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 2, Window: 200 * time.Millisecond})
	}})
	if err != nil {
		panic(err)
	}
	p, err := pool.New(pool.Options{Workers: 4, PerKey: hosts.For})
	if err != nil {
		panic(err)
	}
	start := time.Now()
	var mu sync.Mutex
	var atOnce, later []string
	for _, url := range []string{"a/1", "a/2", "a/3", "a/4", "b/1", "b/2"} {
		host := url[:1]
		// GoKey returns at once: the task waits in its host's queue.
		if err := p.GoKey(context.Background(), host, func(ctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(start) < 100*time.Millisecond {
				atOnce = append(atOnce, url)
			} else {
				later = append(later, url)
			}
			return nil
		}); err != nil {
			panic(err)
		}
	}
	if err := p.Wait(); err != nil {
		panic(err)
	}
	slices.Sort(atOnce)
	slices.Sort(later)
	fmt.Println("at once:", atOnce)
	fmt.Println("a window later:", later)
	// Output:
	// at once: [a/1 a/2 b/1 b/2]
	// a window later: [a/3 a/4]
}
