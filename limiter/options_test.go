package limiter_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// Every invalid option is an *OptionError naming the field, never a panic and
// never a limiter.
func TestInvalidOptions(t *testing.T) {
	sec := time.Second
	okRate := Per(10, sec)
	badQueues := map[string]QueueOptions{
		"Queue.Limit": {Limit: -1},
		"Queue.Order": {Order: Order(7)},
		"Queue.Spin":  {Spin: -time.Millisecond},
	}
	type ctor func() error
	tb := func(o TokenBucketOptions) ctor {
		return func() error { l, err := NewTokenBucket(o); return nilIfErr(l, err) }
	}
	fw := func(o FixedWindowOptions) ctor {
		return func() error { l, err := NewFixedWindow(o); return nilIfErr(l, err) }
	}
	sw := func(o SlidingWindowOptions) ctor {
		return func() error { l, err := NewSlidingWindow(o); return nilIfErr(l, err) }
	}
	sl := func(o SlidingLogOptions) ctor {
		return func() error { l, err := NewSlidingLog(o); return nilIfErr(l, err) }
	}
	lb := func(o LeakyBucketOptions) ctor {
		return func() error { l, err := NewLeakyBucket(o); return nilIfErr(l, err) }
	}
	cc := func(o ConcurrencyOptions) ctor {
		return func() error { l, err := NewConcurrency(o); return nilIfErr(l, err) }
	}
	type tcase struct {
		name  string
		field string
		make  ctor
	}
	cases := []tcase{
		{"TokenBucket zero Rate", "Rate", tb(TokenBucketOptions{Burst: 1})},
		{"TokenBucket zero events", "Rate", tb(TokenBucketOptions{Rate: Per(0, sec), Burst: 1})},
		{"TokenBucket negative events", "Rate", tb(TokenBucketOptions{Rate: Per(-5, sec), Burst: 1})},
		{"TokenBucket zero period", "Rate", tb(TokenBucketOptions{Rate: Per(1, 0), Burst: 1})},
		{"TokenBucket negative period", "Rate", tb(TokenBucketOptions{Rate: Per(1, -sec), Burst: 1})},
		{"TokenBucket zero Burst", "Burst", tb(TokenBucketOptions{Rate: okRate})},
		{"TokenBucket negative Burst", "Burst", tb(TokenBucketOptions{Rate: okRate, Burst: -3})},
		{"TokenBucket overflowing Burst", "Burst", tb(TokenBucketOptions{Rate: Per(1, 1000*time.Hour), Burst: math.MaxInt})},
		{"FixedWindow zero Limit", "Limit", fw(FixedWindowOptions{Window: sec})},
		{"FixedWindow negative Limit", "Limit", fw(FixedWindowOptions{Limit: -1, Window: sec})},
		{"FixedWindow zero Window", "Window", fw(FixedWindowOptions{Limit: 1})},
		{"FixedWindow negative Window", "Window", fw(FixedWindowOptions{Limit: 1, Window: -sec})},
		{"SlidingWindow zero Limit", "Limit", sw(SlidingWindowOptions{Window: sec, Segments: 2})},
		{"SlidingWindow zero Window", "Window", sw(SlidingWindowOptions{Limit: 1, Segments: 2})},
		{"SlidingWindow zero Segments", "Segments", sw(SlidingWindowOptions{Limit: 1, Window: sec})},
		{"SlidingWindow negative Segments", "Segments", sw(SlidingWindowOptions{Limit: 1, Window: sec, Segments: -2})},
		{"SlidingWindow too many Segments", "Segments", sw(SlidingWindowOptions{Limit: 1, Window: sec, Segments: 1<<20 + 1})},
		{"SlidingWindow Segments above Window ns", "Segments", sw(SlidingWindowOptions{Limit: 1, Window: 10, Segments: 11})},
		{"SlidingLog zero Limit", "Limit", sl(SlidingLogOptions{Window: sec})},
		{"SlidingLog negative Limit", "Limit", sl(SlidingLogOptions{Limit: -4, Window: sec})},
		{"SlidingLog zero Window", "Window", sl(SlidingLogOptions{Limit: 1})},
		{"LeakyBucket zero Rate", "Rate", lb(LeakyBucketOptions{})},
		{"LeakyBucket negative events", "Rate", lb(LeakyBucketOptions{Rate: Per(-1, sec)})},
		{"LeakyBucket zero period", "Rate", lb(LeakyBucketOptions{Rate: Per(1, 0)})},
		{"LeakyBucket period too long", "Rate", lb(LeakyBucketOptions{Rate: Per(1, math.MaxInt64)})},
		{"Concurrency zero Limit", "Limit", cc(ConcurrencyOptions{})},
		{"Concurrency negative Limit", "Limit", cc(ConcurrencyOptions{Limit: -1})},
	}
	for field, q := range badQueues {
		cases = append(cases,
			tcase{"TokenBucket " + field, field, tb(TokenBucketOptions{Rate: okRate, Burst: 1, Queue: q})},
			tcase{"FixedWindow " + field, field, fw(FixedWindowOptions{Limit: 1, Window: sec, Queue: q})},
			tcase{"SlidingWindow " + field, field, sw(SlidingWindowOptions{Limit: 1, Window: sec, Segments: 2, Queue: q})},
			tcase{"SlidingLog " + field, field, sl(SlidingLogOptions{Limit: 1, Window: sec, Queue: q})},
			tcase{"LeakyBucket " + field, field, lb(LeakyBucketOptions{Rate: okRate, Queue: q})},
			tcase{"Concurrency " + field, field, cc(ConcurrencyOptions{Limit: 1, Queue: q})},
		)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.make()
			var oe *OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("err = %v (%T), want an *OptionError", err, err)
			}
			if oe.Field != tc.field {
				t.Fatalf("OptionError.Field = %q, want %q (%v)", oe.Field, tc.field, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("message %q does not name %q", err.Error(), tc.field)
			}
		})
	}
}

// nilIfErr checks the constructor's contract: a nil limiter with an error,
// a usable one without.
func nilIfErr[T comparable](l T, err error) error {
	var zero T
	if err != nil && l != zero {
		return errors.New("constructor returned both a limiter and an error")
	}
	if err == nil && l == zero {
		return errors.New("constructor returned neither a limiter nor an error")
	}
	return err
}

// Valid edge options are accepted.
func TestValidEdgeOptions(t *testing.T) {
	if _, err := NewSlidingWindow(SlidingWindowOptions{Limit: 1, Window: 10, Segments: 10}); err != nil {
		t.Errorf("10 segments in 10ns: %v", err)
	}
	if _, err := NewSlidingWindow(SlidingWindowOptions{Limit: 1, Window: time.Hour, Segments: 1 << 20}); err != nil {
		t.Errorf("1<<20 segments: %v", err)
	}
	if _, err := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 1,
		Queue: QueueOptions{Limit: 0, Order: NewestFirst, Spin: time.Millisecond}}); err != nil {
		t.Errorf("NewestFirst with Spin: %v", err)
	}
}

// Runtime setters validate like the constructors and leave the limiter unchanged.
func TestInvalidSetters(t *testing.T) {
	tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(2, time.Second), Burst: 3})
	lb, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(2, time.Second)})
	fw, _ := NewFixedWindow(FixedWindowOptions{Limit: 3, Window: time.Second})
	sw, _ := NewSlidingWindow(SlidingWindowOptions{Limit: 3, Window: time.Second, Segments: 2})
	sl, _ := NewSlidingLog(SlidingLogOptions{Limit: 3, Window: time.Second})
	cc, _ := NewConcurrency(ConcurrencyOptions{Limit: 3})
	for _, tc := range []struct {
		name, field string
		err         error
	}{
		{"TokenBucket.SetRate zero", "Rate", tb.SetRate(Rate{})},
		{"TokenBucket.SetRate negative period", "Rate", tb.SetRate(Per(1, -time.Second))},
		{"TokenBucket.SetBurst zero", "Burst", tb.SetBurst(0)},
		{"TokenBucket.SetBurst negative", "Burst", tb.SetBurst(-1)},
		{"LeakyBucket.SetRate zero", "Rate", lb.SetRate(Per(0, time.Second))},
		{"FixedWindow.SetLimit zero", "Limit", fw.SetLimit(0)},
		{"SlidingWindow.SetLimit negative", "Limit", sw.SetLimit(-2)},
		{"SlidingLog.SetLimit zero", "Limit", sl.SetLimit(0)},
		{"Concurrency.SetLimit zero", "Limit", cc.SetLimit(0)},
	} {
		var oe *OptionError
		if !errors.As(tc.err, &oe) || oe.Field != tc.field {
			t.Errorf("%s = %v, want *OptionError for %s", tc.name, tc.err, tc.field)
		}
	}
	if tb.Rate() != Per(2, time.Second) || tb.Burst() != 3 || lb.Rate() != Per(2, time.Second) ||
		fw.Limit() != 3 || sw.Limit() != 3 || sl.Limit() != 3 || cc.Limit() != 3 {
		t.Error("a rejected setter changed the limiter")
	}
}
