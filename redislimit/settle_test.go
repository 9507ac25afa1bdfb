package redislimit

import (
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// A lease settled with a smaller actual cost gives the rest back; with a
// larger one, books the overuse; for every rate algorithm, plain and keyed,
// and for a chain.
func TestSettle(t *testing.T) {
	c := newClient(t)
	o := func() Options { return Options{Client: c, Key: uniqueKey(t)} }
	tbo := limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 10}
	fwo := limiter.FixedWindowOptions{Limit: 10, Window: time.Hour}
	slo := limiter.SlidingLogOptions{Limit: 10, Window: time.Hour}
	kt, _ := NewKeyedTokenBucket(o(), tbo)
	ks, _ := NewKeyedSlidingLog(o(), slo)
	defer kt.Close()
	defer ks.Close()
	ls := map[string]limiter.Limiter{
		"tb":       must(NewTokenBucket(o(), tbo)),
		"fw":       must(NewFixedWindow(o(), fwo)),
		"sl":       must(NewSlidingLog(o(), slo)),
		"keyed-tb": kt.For("u"),
		"keyed-sl": ks.For("u"),
	}
	ls["chain"] = must(Chain(must(NewTokenBucket(o(), tbo)), must(NewSlidingLog(o(), slo))))
	for name, l := range ls {
		// 10 granted on an estimate, 4 used: 6 come back.
		lease := l.TryAcquire(10)
		if !lease.Granted() {
			t.Fatalf("%s: %v", name, lease.Err())
		}
		if s := lease.Settle(4); s.Permits() != 4 {
			t.Errorf("%s: the settled lease holds %d permits", name, s.Permits())
		}
		if g := l.TryAcquire(6); !g.Granted() {
			t.Errorf("%s: the 6 permits given back: %v", name, g.Err())
		} else if l.TryAcquire(1).Granted() {
			t.Errorf("%s: an 11th permit after a settlement of 4", name)
		}
	}
	// Overuse: 2 granted, 5 used: 3 more owed.
	for name, l := range map[string]limiter.Limiter{
		"tb": must(NewTokenBucket(o(), tbo)), "fw": must(NewFixedWindow(o(), fwo)), "sl": must(NewSlidingLog(o(), slo)),
	} {
		l.TryAcquire(2).Settle(5)
		if !l.TryAcquire(5).Granted() || l.TryAcquire(1).Granted() {
			t.Errorf("%s: after an overuse of 3, not exactly 5 permits left", name)
		}
	}
}

// A token bucket gives back only what it has not refilled since the grant:
// 5 taken and unused, 3 refilled, 8 taken: settling the 5 gives back 2, not
// 5 (which would allow 13 at one instant, over the burst of 10).
func TestSettleBucketBound(t *testing.T) {
	tb := must(NewTokenBucket(Options{Client: newClient(t), Key: uniqueKey(t)},
		limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 10}))
	defer tb.Close()
	first := tb.TryAcquire(5)
	time.Sleep(300 * time.Millisecond)
	if l := tb.TryAcquire(8); !l.Granted() {
		t.Fatalf("8 of the 5 left and 3 refilled: %v", l.Err())
	}
	first.Settle(0)
	if l := tb.TryAcquire(3); l.Granted() {
		t.Fatal("3 permits after settling: 8 + 3 at one instant, over the burst of 10")
	}
	if l := tb.TryAcquire(1); !l.Granted() {
		t.Fatalf("nothing came back from the settlement: %v", l.Err())
	}
}
