package properties_test

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rategate/rategate/limiter"
)

// This file checks Lease.Settle (the settlement of estimated costs) in the
// six limiters: whatever the settle sequence, a settled lease's debt is
// paid before any later grant exceeds the bound over actual costs.
//
// One goroutine runs a drawn schedule in a bubble: TryAcquire, Settle of a
// lease not yet settled (at an actual cost from 0 to three times its
// permits), Release (Concurrency), and sleeps. At every grant g the bound is
// checked over the windows that end with g, each lease granted before g
// counted at its actual cost if it was settled before g, and at its permits
// otherwise (leases settled later count as the limiter saw them at g).

type settleOp struct {
	kind   int // 0 TryAcquire, 1 Settle, 2 Release, 3 Sleep
	n      int
	pick   int // which open lease (mod their number)
	factor int // Settle: actual = n*factor/4
	sleep  time.Duration
}

func (o settleOp) String() string {
	switch o.kind {
	case 0:
		return fmt.Sprintf("TryAcquire(%d)", o.n)
	case 1:
		return fmt.Sprintf("Settle(#%d, %d/4)", o.pick, o.factor)
	case 2:
		return fmt.Sprintf("Release(#%d)", o.pick)
	}
	return fmt.Sprintf("Sleep(%dns)", int64(o.sleep))
}

// settleLease is one granted lease and what became of it, by event index.
type settleLease struct {
	at        time.Duration
	n, actual int64
	event     int // the grant's
	settled   int // the settlement's event index; -1: never
	released  int // -1: never
}

// cost is what the limiter must count for l at event e: its actual cost
// once settled, its permits before.
func (l settleLease) cost(e int) int64 {
	if l.settled >= 0 && l.settled < e {
		return l.actual
	}
	return l.n
}

func TestSettleBound(t *testing.T) {
	for _, k := range []kind{tokenBucket, leakyBucket, fixedWindow, slidingWindow, slidingLog, concurrency} {
		t.Run(k.String(), func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) { checkSettle(t, rt, k, "") })
		})
	}
	// A key of a KeyedTokenBucket, and of a Keyed of token buckets that
	// evicts the key whenever it can (after every sleep), through For,
	// keeps the token bucket's.
	for _, keyed := range []string{"KeyedTokenBucket", "Keyed"} {
		t.Run(keyed+".For", func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) { checkSettle(t, rt, tokenBucket, keyed) })
		})
	}
}

func checkSettle(t *testing.T, rt *rapid.T, k kind, keyed string) {
	c := drawConfig(rt, k, drawOpts{})
	c.queue = limiter.QueueOptions{}
	ops := make([]settleOp, rapid.IntRange(1, 60).Draw(rt, "ops"))
	for i := range ops {
		o := settleOp{kind: rapid.IntRange(0, 3).Draw(rt, "kind")}
		switch o.kind {
		case 0:
			o.n = rapid.IntRange(1, c.requestScale()).Draw(rt, "n")
		case 1, 2:
			o.pick = rapid.IntRange(0, 20).Draw(rt, "pick")
			o.factor = rapid.SampledFrom([]int{0, 1, 2, 3, 4, 4, 5, 6, 8, 12}).Draw(rt, "factor")
		default:
			o.sleep = drawSpan(rt, c.unit(), "sleep")
		}
		ops[i] = o
	}
	var leases []settleLease
	what := func() string { return fmt.Sprintf("%v\nschedule %v", c, ops) }
	failure := runBubble(t, what, func(p *panics) {
		leases = runSettle(c, ops, keyed)
	})
	if failure != "" {
		rt.Fatalf("%s\n%s", what(), failure)
	}
	for g := range leases {
		if err := settleBound(c, leases[:g+1]); err != nil {
			rt.Fatalf("%s\nat grant #%d: %v\nleases %+v", what(), g, err, leases[:g+1])
		}
	}
}

// runSettle runs ops against a new limiter of c (a key's, through For, of
// a KeyedTokenBucket or a Keyed, if keyed names one) and returns its leases.
func runSettle(c config, ops []settleOp, keyed string) []settleLease {
	var lim limiter.Limiter
	prune := func() {}
	opts := limiter.TokenBucketOptions{Rate: limiter.Per(c.events, c.per), Burst: c.burst}
	switch keyed {
	case "KeyedTokenBucket":
		kb, err := limiter.NewKeyedTokenBucket[int](opts)
		if err != nil {
			panic(err)
		}
		defer kb.Close()
		lim = kb.For(7)
	case "Keyed":
		k, err := limiter.NewKeyed(limiter.KeyedOptions[int]{New: func(int) (limiter.Limiter, error) {
			return limiter.NewTokenBucket(opts)
		}})
		if err != nil {
			panic(err)
		}
		defer k.Close()
		lim, prune = k.For(7), func() { k.Prune() }
	default:
		l, err := c.build()
		if err != nil {
			panic(err)
		}
		defer l.Close()
		lim = l
	}
	start := time.Now()
	var leases []settleLease
	var held []limiter.Lease // by lease index
	open := func(pick int, pred func(settleLease) bool) int {
		var idx []int
		for i, l := range leases {
			if pred(l) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return -1
		}
		return idx[pick%len(idx)]
	}
	for e, o := range ops {
		switch o.kind {
		case 0:
			if l := lim.TryAcquire(o.n); l.Granted() {
				leases = append(leases, settleLease{at: time.Since(start), n: int64(o.n), event: e, settled: -1, released: -1})
				held = append(held, l)
			}
		case 1:
			if i := open(o.pick, func(l settleLease) bool { return l.settled < 0 && l.released < 0 }); i >= 0 {
				actual := int(leases[i].n) * o.factor / 4
				held[i] = held[i].Settle(actual)
				leases[i].actual, leases[i].settled = int64(actual), e
			}
		case 2:
			if i := open(o.pick, func(l settleLease) bool { return l.released < 0 }); i >= 0 && c.kind == concurrency {
				held[i].Release()
				leases[i].released = e
			}
		default:
			time.Sleep(o.sleep)
			prune()
		}
	}
	for i := range held {
		if leases[i].released < 0 {
			held[i].Release()
		}
	}
	return leases
}

// settleBound checks c's bound over the windows that end with the last of
// ls, a grant, each lease counted as the limiter must count it then.
func settleBound(c config, ls []settleLease) error {
	g := ls[len(ls)-1]
	e := g.event
	switch c.kind {
	case tokenBucket, leakyBucket:
		n, d := c.rate()
		var sum int64
		for i := len(ls) - 1; i >= 0; i-- {
			if c.kind == tokenBucket || i < len(ls)-1 {
				sum += ls[i].cost(e)
			}
			span := int64(g.at - ls[i].at)
			if c.kind == tokenBucket && mul(sum, d) > add(mul(int64(c.burst), d), mul(n, span)) {
				return fmt.Errorf("%d permits in [%v, %v], over Burst %d + %d/%dns", sum, ls[i].at, g.at, c.burst, n, d)
			}
			if c.kind == leakyBucket && i < len(ls)-1 && mul(sum, d) > mul(n, span) {
				return fmt.Errorf("grants of %d permits from %v paced to %v, sooner than %d/%dns allows", sum, ls[i].at, g.at, n, d)
			}
		}
	case fixedWindow, slidingWindow, slidingLog:
		var sum int64
		for _, l := range ls {
			if sameWindow(c, l.at, g.at) {
				sum += l.cost(e)
			}
		}
		if sum > int64(c.limit) {
			return fmt.Errorf("%d permits in the window ending at %v, over the limit %d", sum, g.at, c.limit)
		}
	case concurrency:
		var sum int64
		for _, l := range ls {
			if l.released < 0 || l.released > e {
				sum += l.cost(e)
			}
		}
		if sum > int64(c.limit) {
			return fmt.Errorf("%d permits held after the grant, over the limit %d", sum, c.limit)
		}
	}
	return nil
}

// sameWindow reports whether a grant at a counts in the window of c's bound
// that ends with a grant at b >= a.
func sameWindow(c config, a, b time.Duration) bool {
	w := int64(c.window)
	switch c.kind {
	case fixedWindow:
		return int64(a)/w == int64(b)/w
	case slidingWindow:
		s := int64(c.segments)
		return segmentOf(int64(a), w, s) > segmentOf(int64(b), w, s)-s
	}
	return int64(a) > int64(b)-w
}
