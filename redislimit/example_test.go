package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/redislimit"
)

// redisAddr is where the examples find Redis: here, the server the tests
// started.
func redisAddr() string { return os.Getenv("REDISLIMIT_TEST_ADDR") }

// Every process that runs this with the same Key shares the limit: at most
// 2 grants in any minute, all of them together.
func ExampleNewSlidingLog() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr()}) // e.g. "localhost:6379"
	defer client.Close()
	lim, err := redislimit.NewSlidingLog(
		redislimit.Options{Client: client, Key: "example/reports"},
		limiter.SlidingLogOptions{Limit: 2, Window: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lim.Close()
	for i := range 3 {
		lease := lim.TryAcquire(1)
		switch {
		case lease.Granted():
			fmt.Printf("report %d: sent\n", i+1)
		case errors.Is(lease.Err(), limiter.ErrLimited):
			fmt.Printf("report %d: limited, retry in about %v\n", i+1, lease.RetryAfter().Round(time.Minute))
		case errors.Is(lease.Err(), redislimit.ErrUnavailable):
			fmt.Printf("report %d: Redis could not decide: %v\n", i+1, lease.Err())
		}
	}
	q := lim.Quota()
	fmt.Printf("quota: %d per %v, %d left\n", q.Limit, q.Window, q.Remaining)
	// Output:
	// report 1: sent
	// report 2: sent
	// report 3: limited, retry in about 1m0s
	// quota: 2 per 1m0s, 0 left
}

// One token bucket per API key, shared by every server of the API. Keys
// come from clients: any string is safe.
func ExampleKeyed_For() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer client.Close()
	perKey, err := redislimit.NewKeyedTokenBucket(
		redislimit.Options{Client: client, Key: "example/api"},
		limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer perKey.Close()
	// A request waits at most a second for its permit.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, key := range []string{"alice", "alice", "alice", "bob", "}{evil"} {
		lease, err := perKey.For(key).Acquire(ctx, 1)
		switch {
		case err == nil:
			fmt.Printf("%s: granted %d\n", key, lease.Permits())
		case errors.Is(err, context.DeadlineExceeded):
			// Refused at once: the permit comes back after the deadline.
			fmt.Printf("%s: refused, retry in about %v\n", key, lease.RetryAfter().Round(time.Minute))
		default:
			fmt.Printf("%s: %v\n", key, err)
		}
	}
	// Output:
	// alice: granted 1
	// alice: granted 1
	// alice: refused, retry in about 1h0m0s
	// bob: granted 1
	// }{evil: granted 1
}
