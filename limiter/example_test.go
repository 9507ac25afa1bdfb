package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rategate/rategate/limiter"
)

// A token bucket grants its burst at once, then permits at its rate.
func ExampleNewTokenBucket() {
	tb, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{
		Rate:  limiter.Per(10, time.Hour), // refill: 10 permits an hour
		Burst: 3,                          // capacity: 3 permits at once
	})
	if err != nil {
		panic(err)
	}
	for i := range 4 {
		l := tb.TryAcquire(1)
		fmt.Printf("request %d: granted %v\n", i+1, l.Granted())
	}
	// A request larger than the bucket can never be granted.
	fmt.Println(tb.TryAcquire(4).Err())

	// Invalid options are errors that name the field.
	_, err = limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second)})
	var oe *limiter.OptionError
	if errors.As(err, &oe) {
		fmt.Println("invalid option:", oe.Field)
	}
	// Output:
	// request 1: granted true
	// request 2: granted true
	// request 3: granted true
	// request 4: granted false
	// limiter: request exceeds limit
	// invalid option: Burst
}

// A sliding log grants at most Limit permits in any window of length Window.
func ExampleNewSlidingLog() {
	sl, err := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 2, Window: time.Hour})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := range 2 {
		if _, err := sl.Acquire(ctx, 1); err == nil {
			fmt.Printf("job %d started\n", i+1)
		}
	}
	// A third job in the same hour would wait; TryAcquire does not.
	l := sl.TryAcquire(1)
	fmt.Println("job 3:", l.Err())
	// Nor does Acquire when its deadline comes before the permit.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = sl.Acquire(ctx, 1)
	fmt.Println("job 3 with a 1m deadline:", errors.Is(err, context.DeadlineExceeded))
	fmt.Printf("%+v\n", sl.Stats())
	// Output:
	// job 1 started
	// job 2 started
	// job 3: limiter: not enough permits available
	// job 3 with a 1m deadline: true
	// {Available:0 Queued:0 Waiters:0 Granted:2 Rejected:2}
}

// A concurrency limiter lends permits until the lease is released.
func ExampleNewConcurrency() {
	c, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 2})
	if err != nil {
		panic(err)
	}
	a := c.TryAcquire(1)
	b := c.TryAcquire(1)
	fmt.Println("a, b granted:", a.Granted(), b.Granted(), "in use:", c.InUse())
	fmt.Println("third:", c.TryAcquire(1).Granted())
	a.Release()
	third, err := c.Acquire(context.Background(), 1)
	fmt.Println("third after a released:", third.Granted(), err, "in use:", c.InUse())
	b.Release()
	third.Release()
	fmt.Println("in use:", c.InUse())
	// Output:
	// a, b granted: true true in use: 2
	// third: false
	// third after a released: true <nil> in use: 2
	// in use: 0
}

func ExampleParseRate() {
	for _, s := range []string{"100/s", "5/min", "2/1500ms", "10/h", "0/s", "3/fortnight"} {
		r, err := limiter.ParseRate(s)
		if err != nil {
			fmt.Printf("%-11s error\n", s)
			continue
		}
		fmt.Printf("%-11s %d per %v\n", s, r.Events(), r.Period())
	}
	// Output:
	// 100/s       100 per 1s
	// 5/min       5 per 1m0s
	// 2/1500ms    2 per 1.5s
	// 10/h        10 per 1h0m0s
	// 0/s         error
	// 3/fortnight error
}

// RetryAfter says how long to wait before the same request could be
// granted: what an HTTP server puts in a Retry-After header.
func ExampleLease_RetryAfter() {
	sl, _ := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 1, Window: time.Hour})
	fmt.Println("first:", sl.TryAcquire(1).RetryAfter())
	l := sl.TryAcquire(1)
	// The first grant leaves the window an hour after it was made (less
	// the instant that has passed since).
	fmt.Println("second:", l.Granted(), l.RetryAfter().Round(time.Minute))
	// Output:
	// first: 0s
	// second: false 1h0m0s
}

// A per-second and a per-day policy, chained: AppendQuotas lists both, as
// an HTTP server would in its RateLimit-Policy field.
func ExampleQuotaAppender() {
	perSecond, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 10})
	perDay, _ := limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 1000, Window: 24 * time.Hour})
	both := limiter.Chain(perSecond, perDay)
	both.TryAcquire(3)
	for _, q := range both.(limiter.QuotaAppender).AppendQuotas(nil) {
		fmt.Printf("%d per %v, %d left\n", q.Limit, q.Window, q.Remaining)
	}
	// Output:
	// 10 per 1s, 7 left
	// 1000 per 24h0m0s, 997 left
}

// A lease taken on an estimate (a 64 KiB read, 1,000 tokens of a model
// call) is settled with its actual cost once known: the permits it did not
// use go back.
func ExampleLease_Settle() {
	tb, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1000, time.Minute), Burst: 1000})
	lease := tb.TryAcquire(800) // the estimate
	lease = lease.Settle(300)   // the call used 300
	fmt.Println(lease.Permits(), tb.Stats().Available)
	// Output:
	// 300 700
}

// learner hands out a token bucket's leases with a Releaser of its own, to
// hear what became of the calls they admitted. It embeds the bucket, so
// that the leases still settle with it exactly.
type learner struct {
	*limiter.TokenBucket
	throttled int
}

func (l *learner) TryAcquire(n int) limiter.Lease { return l.TokenBucket.TryAcquire(n).WithReleaser(l) }
func (l *learner) ReleasePermits(int)             {}
func (l *learner) ReportOutcome(_ int, o limiter.Outcome, _ time.Duration) {
	if o == limiter.Throttled {
		l.throttled++
	}
}

// A limiter outside package limiter that wraps a token bucket gives its
// leases a Releaser of its own with WithReleaser: reports reach it, and
// Settle still gives the unused permits back to the bucket.
func ExampleLease_WithReleaser() {
	tb, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1000, time.Minute), Burst: 1000})
	l := &learner{TokenBucket: tb}
	lease := l.TryAcquire(800).Settle(300)
	lease.Report(limiter.Throttled, 0)
	fmt.Println(lease.Permits(), tb.Stats().Available, l.throttled)
	// Output:
	// 300 700 1
}
