package redislimit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

func newPartitioned(t *testing.T, key string, po PartitionedOptions) *Partitioned {
	t.Helper()
	p, err := NewPartitioned(Options{Client: newClient(t), Key: key}, po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestPartitionedOptions(t *testing.T) {
	c := newClient(t)
	ok := PartitionedOptions{Rate: limiter.Per(100, time.Second), Burst: 10, Partitions: 4, LeaseTTL: time.Second}
	for _, tc := range []struct {
		field string
		o     Options
		po    func(*PartitionedOptions)
	}{
		{"Client", Options{Key: "k"}, func(*PartitionedOptions) {}},
		{"Key", Options{Client: c}, func(*PartitionedOptions) {}},
		{"Rate", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Rate = limiter.Rate{} }},
		{"Rate", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Rate = limiter.Per(1, -time.Second) }},
		{"Burst", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Burst = 0 }},
		{"Burst", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Burst = 3 }}, // < Partitions
		{"Partitions", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Partitions = 0 }},
		{"Partitions", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Partitions = MaxPartitions + 1 }},
		{"LeaseTTL", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.LeaseTTL = -time.Second }},
		{"LeaseTTL", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.LeaseTTL = time.Millisecond }},
		{"Burst", Options{Client: c, Key: "k"}, func(po *PartitionedOptions) { po.Rate = limiter.Per(1, 1<<40); po.Burst = 1 << 40 }},
	} {
		po := ok
		tc.po(&po)
		_, err := NewPartitioned(tc.o, po)
		var oe *limiter.OptionError
		if !errors.As(err, &oe) || oe.Field != tc.field {
			t.Errorf("NewPartitioned(%+v, %+v): err = %v, want an OptionError for %s", tc.o, po, err, tc.field)
		}
	}
	p, err := NewPartitioned(Options{Client: c, Key: "k"}, PartitionedOptions{Rate: limiter.Per(100, time.Second), Burst: 4, Partitions: 4})
	if err != nil {
		t.Fatalf("zero LeaseTTL (the default): %v", err)
	}
	p.Close()
}

// saturate calls Acquire(ctx, 1) from g goroutines until ctx ends and
// counts the grants.
func saturate(ctx context.Context, l limiter.Limiter, g int, count *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := l.Acquire(ctx, 1); err == nil {
					count.Add(1)
				}
			}
		})
	}
	return &wg
}

// One busy process of three gets at least 90% of the global rate within a
// few lease periods: the idle ones give back the partitions they do not use.
func TestPartitionedFlowsToDemand(t *testing.T) {
	const rate = 2000
	po := PartitionedOptions{Rate: limiter.Per(rate, time.Second), Burst: 200, Partitions: 8, LeaseTTL: 300 * time.Millisecond}
	key := uniqueKey(t)
	ps := []*Partitioned{newPartitioned(t, key, po), newPartitioned(t, key, po), newPartitioned(t, key, po)}
	// All three busy for a while, so that each holds partitions.
	ctx, cancel := context.WithTimeout(t.Context(), 600*time.Millisecond)
	var counts [3]atomic.Int64
	var wgs []*sync.WaitGroup
	for i, p := range ps {
		wgs = append(wgs, saturate(ctx, p, 2, &counts[i]))
	}
	for _, wg := range wgs {
		wg.Wait()
	}
	cancel()
	for i, p := range ps {
		t.Logf("all busy: process %d holds %d partitions, %d grants", i, p.Partitions(), counts[i].Load())
	}
	// Then only the first: after three lease periods it holds (nearly) all.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	var busy atomic.Int64
	wg := saturate(ctx, ps[0], 2, &busy)
	time.Sleep(3 * po.LeaseTTL)
	before, start := busy.Load(), time.Now()
	time.Sleep(time.Second)
	got, elapsed := busy.Load()-before, time.Since(start)
	cancel()
	wg.Wait()
	share := float64(got) / (rate * elapsed.Seconds())
	t.Logf("one busy: %d grants in %v (%.1f%% of the rate); partitions held: %d, %d, %d; lease calls %d, %d, %d",
		got, elapsed, 100*share, ps[0].Partitions(), ps[1].Partitions(), ps[2].Partitions(),
		ps[0].LeaseCalls(), ps[1].LeaseCalls(), ps[2].LeaseCalls())
	if share < 0.9 {
		t.Errorf("the busy process got %.1f%% of the rate, want at least 90%%", 100*share)
	}
	if n := ps[1].Partitions() + ps[2].Partitions(); n != 0 {
		t.Errorf("the idle processes hold %d partitions, want 0", n)
	}
}
