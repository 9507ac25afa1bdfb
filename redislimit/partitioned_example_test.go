package redislimit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
)

// Every process that names the same Key shares 1,000 permits a second
// (burst 100), split into 4 partitions. Each process decides locally from
// the partitions it leases; here one process holds them all.
func ExampleNewPartitioned() {
	client := redis.NewClient(&redis.Options{Addr: server.Addr}) // your Redis, as in "localhost:6379"
	defer client.Close()
	lim, err := NewPartitioned(Options{Client: client, Key: "example-partitioned"}, PartitionedOptions{
		Rate:       limiter.Per(1000, time.Second),
		Burst:      100,
		Partitions: 4,
		LeaseTTL:   time.Second,
	})
	if err != nil {
		panic(err)
	}
	defer lim.Close() // gives the leases back

	// The first Acquire waits for leases (on a server started less than a
	// LeaseTTL ago, until that TTL has passed: see docs/partitioned.md).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := lim.Acquire(ctx, 10); err != nil {
		panic(err)
	}
	fmt.Println("partitions held:", lim.Partitions())

	// From here on every decision is local: no round trip.
	granted := 0
	for range 1000 {
		if lim.TryAcquire(1).Granted() {
			granted++
		}
	}
	fmt.Println("a burst of 1000 calls granted at most Burst:", granted <= 100)
	// Output:
	// partitions held: 4
	// a burst of 1000 calls granted at most Burst: true
}
