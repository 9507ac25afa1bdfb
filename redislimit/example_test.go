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

// Each tenant may make 2 calls a second and 3 a day. One script call
// decides both at once: a call the daily quota refuses takes nothing from
// the per-second bucket.
func ExampleChain() {
	client := redis.NewClient(&redis.Options{Addr: redisAddr()})
	defer client.Close()
	perSecond, _ := redislimit.NewKeyedTokenBucket(
		redislimit.Options{Client: client, Key: "example/per-second"},
		limiter.TokenBucketOptions{Rate: limiter.Per(2, time.Second), Burst: 2})
	perDay, _ := redislimit.NewKeyedSlidingLog(
		redislimit.Options{Client: client, Key: "example/per-day"},
		limiter.SlidingLogOptions{Limit: 3, Window: 24 * time.Hour})
	defer perSecond.Close()
	defer perDay.Close()
	lim, err := redislimit.Chain(perSecond.For("acme"), perDay.For("acme"))
	if err != nil {
		fmt.Println(err)
		return
	}
	// Three calls within a second: the bucket's burst of 2, then a wait.
	for i := range 3 {
		if _, err := lim.Acquire(context.Background(), 1); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("call %d: granted\n", i+1)
	}
	lease := lim.TryAcquire(1)
	var refused *redislimit.ChainRefusal
	if errors.As(lease.Err(), &refused) {
		fmt.Printf("call 4: refused by member %d, retry in about %v\n", refused.Index, lease.RetryAfter().Round(time.Hour))
	}
	// Output:
	// call 1: granted
	// call 2: granted
	// call 3: granted
	// call 4: refused by member 1, retry in about 24h0m0s
}
