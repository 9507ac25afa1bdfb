package redislimit

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
)

// Every option a constructor takes has an effect, or a value other than
// its zero value is refused with an *limiter.OptionError naming it.
func TestUnusedOptionsRefused(t *testing.T) {
	c := newClient(t)
	fb, _ := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
	tbo := limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 5}
	withQ := func(q limiter.QueueOptions) limiter.TokenBucketOptions { o := tbo; o.Queue = q; return o }
	po := PartitionedOptions{Rate: limiter.Per(10, time.Second), Burst: 5, Partitions: 1}
	cases := []struct {
		field string
		err   error
	}{
		{"Fallback", errOf(NewTokenBucket(Options{Client: c, Key: "k", Fallback: fb}, tbo))},
		{"Fallback", errOf(NewPartitioned(Options{Client: c, Key: "k", OnError: FailOpen, Fallback: fb}, po))},
		{"LeaseTTL", errOf(NewTokenBucket(Options{Client: c, Key: "k", LeaseTTL: time.Second}, tbo))},
		{"LeaseTTL", errOf(NewKeyedSlidingLog(Options{Client: c, Key: "k", LeaseTTL: time.Second}, limiter.SlidingLogOptions{Limit: 1, Window: time.Second}))},
		{"LeaseTTL", errOf(NewPartitioned(Options{Client: c, Key: "k", LeaseTTL: time.Second}, po))},
		{"Queue.Order", errOf(NewTokenBucket(Options{Client: c, Key: "k"}, withQ(limiter.QueueOptions{Order: limiter.NewestFirst})))},
		{"Queue.Order", errOf(NewKeyedConcurrency(Options{Client: c, Key: "k"}, limiter.ConcurrencyOptions{Limit: 1, Queue: limiter.QueueOptions{Order: limiter.NewestFirst}}))},
		{"Queue.Spin", errOf(NewFixedWindow(Options{Client: c, Key: "k"}, limiter.FixedWindowOptions{Limit: 1, Window: time.Second, Queue: limiter.QueueOptions{Spin: time.Millisecond}}))},
		{"Queue.Spin", errOf(NewPartitioned(Options{Client: c, Key: "k"}, PartitionedOptions{Rate: po.Rate, Burst: 5, Partitions: 1, Queue: limiter.QueueOptions{Spin: -1}}))},
		{"Queue.Limit", errOf(NewPartitioned(Options{Client: c, Key: "k"}, PartitionedOptions{Rate: po.Rate, Burst: 5, Partitions: 1, Queue: limiter.QueueOptions{Limit: -1}}))},
	}
	for i, tc := range cases {
		var oe *limiter.OptionError
		if !errors.As(tc.err, &oe) || oe.Field != tc.field {
			t.Errorf("case %d: %v, want an OptionError for %s", i, tc.err, tc.field)
		}
	}
	// What is used is taken.
	for i, err := range []error{
		errOf(NewConcurrency(Options{Client: c, Key: "k", LeaseTTL: time.Second}, limiter.ConcurrencyOptions{Limit: 1})),
		errOf(NewTokenBucket(Options{Client: c, Key: "k", OnError: UseFallback, Fallback: fb}, withQ(limiter.QueueOptions{Limit: 3}))),
		errOf(NewPartitioned(Options{Client: c, Key: "k", GuardRestarts: true}, PartitionedOptions{Rate: po.Rate, Burst: 5, Partitions: 1,
			Queue: limiter.QueueOptions{Limit: 3, Order: limiter.NewestFirst, Spin: time.Millisecond}})),
	} {
		if err != nil {
			t.Errorf("valid options %d: %v", i, err)
		}
	}
}

func errOf[L any](l L, err error) error {
	if c, ok := any(l).(interface{ Close() error }); ok && err == nil {
		c.Close()
	}
	return err
}

// A Partitioned queue takes the order, the limit and the spin of its
// QueueOptions: NewestFirst serves the newest waiter first and, full, fails
// its oldest; Limit refuses past the cap with OldestFirst.
func TestPartitionedQueueOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		po := unitOpts
		po.Queue = limiter.QueueOptions{Limit: 3, Order: limiter.NewestFirst, Spin: 3 * time.Millisecond}
		p := holding(t, po, []int{0}, 10) // empty: one permit per 40 ms
		var order []int
		var errs [4]error
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				_, errs[i] = p.Acquire(t.Context(), 1)
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			})
			synctest.Wait()
		}
		wg.Wait()
		// Waiter 0 was pushed out when 3 arrived (the queue holds 3);
		// the others were served newest first.
		if !errors.Is(errs[0], limiter.ErrQueueFull) {
			t.Errorf("the oldest waiter of a full NewestFirst queue: %v, want ErrQueueFull", errs[0])
		}
		if !slices.Equal(order, []int{0, 3, 2, 1}) {
			t.Errorf("answer order %v, want [0 3 2 1]: 0 pushed out, then newest first", order)
		}
		p.Close()

		po.Queue = limiter.QueueOptions{Limit: 2}
		q := holding(t, po, []int{0}, 10)
		for range 2 {
			wg.Go(func() { q.Acquire(t.Context(), 1) })
		}
		synctest.Wait()
		if _, err := q.Acquire(t.Context(), 1); !errors.Is(err, limiter.ErrQueueFull) {
			t.Errorf("a third waiter of an OldestFirst queue of 2: %v, want ErrQueueFull", err)
		}
		if _, err := q.Acquire(t.Context(), 3); !errors.Is(err, limiter.ErrQueueFull) {
			t.Errorf("3 permits in a queue of 2: %v, want ErrQueueFull", err)
		}
		wg.Wait()
		q.Close()
	})
}
