package channel_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rategate/rategate/channel"
	"github.com/rategate/rategate/limiter"
)

// Four producers share one Chan throttled to 100 items per second in total;
// one consumer ranges over it. 40 items take 0.39 s: the token bucket (burst
// 1) grants one every 10 ms, however many producers ask.
func Example() {
	rate, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(100, time.Second), Burst: 1})
	if err != nil {
		panic(err)
	}
	c := channel.New[string](rate)
	ctx := context.Background()
	start := time.Now()

	var producers sync.WaitGroup
	for p := range 4 {
		producers.Go(func() {
			for i := range 10 {
				if err := c.Send(ctx, fmt.Sprintf("p%d-%d", p, i)); err != nil {
					panic(err)
				}
			}
		})
	}
	go func() { producers.Wait(); c.Close() }()

	n := 0
	for range c.All(ctx) { // one consumer: ends when closed and drained
		n++
	}
	elapsed := time.Since(start)
	fmt.Printf("received %d items\n", n)
	fmt.Println("no faster than 100/s:", elapsed >= 390*time.Millisecond)
	// Output:
	// received 40 items
	// no faster than 100/s: true
}

// A Concurrency limiter makes a bounded channel whose bound is shared: here
// two Chans hold at most 3 items between them. TrySend's error says why it
// was refused.
func ExampleChan_TrySend() {
	budget, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 3})
	if err != nil {
		panic(err)
	}
	a, b := channel.New[int](budget), channel.New[int](budget)
	fmt.Println(a.TrySend(1), a.TrySend(2), b.TrySend(3))
	err = b.TrySend(4)
	fmt.Println(errors.Is(err, limiter.ErrLimited), err)

	v, _ := a.Recv(context.Background()) // releases a's oldest item's permit
	fmt.Println("received", v, "- permits in use:", budget.InUse())
	fmt.Println(b.TrySend(4))
	// Output:
	// <nil> <nil> <nil>
	// true channel: send refused: limiter: not enough permits available
	// received 1 - permits in use: 2
	// <nil>
}

// A rate limiter's refusal carries the wait after which the send would be
// granted.
func ExampleLimitError() {
	rate, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(2, time.Second), Burst: 1})
	if err != nil {
		panic(err)
	}
	c := channel.New[string](rate)
	fmt.Println(c.TrySend("first"))
	err = c.TrySend("second")
	var le *channel.LimitError
	if errors.As(err, &le) {
		fmt.Println("retry after about", le.RetryAfter().Round(100*time.Millisecond))
	}
	// Output:
	// <nil>
	// retry after about 500ms
}

// Out gives a Go channel to select on. Close, then Drain, ends its goroutine
// and releases every lease, including the item the view held.
func ExampleChan_Out() {
	budget, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 10})
	if err != nil {
		panic(err)
	}
	c := channel.New[int](budget)
	ctx := context.Background()
	for i := range 5 {
		c.Send(ctx, i)
	}
	out := c.Out(ctx)
	timeout := time.After(time.Second)
	for range 2 {
		select {
		case v := <-out:
			fmt.Println("got", v)
		case <-timeout:
			fmt.Println("timeout")
		}
	}
	c.Close()
	c.Drain()
	for range out { // wait for the view to end
	}
	fmt.Println("buffered:", c.Len(), "permits in use:", budget.InUse())
	// Output:
	// got 0
	// got 1
	// buffered: 0 permits in use: 0
}

// A worker that takes each job with its lease and reports how the work
// went: the Chan's limiter, a Concurrency of 2 here, counts a job until its
// work is done, and an adaptive limiter in its place (package adaptive)
// would learn from the reports how many jobs the work can take at once.
func ExampleChan_RecvLease() {
	lim, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	jobs := channel.New[string](lim)
	defer jobs.Close()
	fmt.Println(jobs.TrySend("a"), jobs.TrySend("b"))
	fmt.Println("third sent:", jobs.TrySend("c") == nil)

	job, lease, err := jobs.RecvLease(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("working on", job, "- third sent:", jobs.TrySend("c") == nil)
	start := time.Now()
	err = nil // the work on job
	lease.Report(limiter.OutcomeOf(err), time.Since(start))
	lease.Release()
	fmt.Println("done - third sent:", jobs.TrySend("c") == nil)
	// Output:
	// <nil> <nil>
	// third sent: false
	// working on a - third sent: false
	// done - third sent: true
}
