package properties_test

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
	"pgregory.net/rapid"
)

// kind names one of the six limiters under test.
type kind int

const (
	tokenBucket kind = iota
	leakyBucket
	fixedWindow
	slidingWindow
	slidingLog
	concurrency
)

func (k kind) String() string {
	return [...]string{"TokenBucket", "LeakyBucket", "FixedWindow", "SlidingWindow", "SlidingLog", "Concurrency"}[k]
}

// testLimiter is what every limiter in package limiter offers.
type testLimiter interface {
	limiter.Limiter
	Stats() limiter.Stats
	Close() error
}

// config is one drawn limiter configuration.
type config struct {
	kind     kind
	events   int           // rate: events per `per` (token and leaky bucket)
	per      time.Duration //
	burst    int           // token bucket
	limit    int           // windows, log, concurrency
	window   time.Duration // windows, log
	segments int           // sliding window
	queue    limiter.QueueOptions
}

func (c config) String() string {
	q := fmt.Sprintf("Queue{Limit:%d Order:%s Spin:%v}", c.queue.Limit, orderName(c.queue.Order), c.queue.Spin)
	switch c.kind {
	case tokenBucket:
		return fmt.Sprintf("NewTokenBucket{Rate: Per(%d, %v=%dns), Burst: %d, %s}", c.events, c.per, int64(c.per), c.burst, q)
	case leakyBucket:
		return fmt.Sprintf("NewLeakyBucket{Rate: Per(%d, %v=%dns), %s}", c.events, c.per, int64(c.per), q)
	case fixedWindow:
		return fmt.Sprintf("NewFixedWindow{Limit: %d, Window: %v=%dns, %s}", c.limit, c.window, int64(c.window), q)
	case slidingWindow:
		return fmt.Sprintf("NewSlidingWindow{Limit: %d, Window: %v=%dns, Segments: %d, %s}", c.limit, c.window, int64(c.window), c.segments, q)
	case slidingLog:
		return fmt.Sprintf("NewSlidingLog{Limit: %d, Window: %v=%dns, %s}", c.limit, c.window, int64(c.window), q)
	default:
		return fmt.Sprintf("NewConcurrency{Limit: %d, %s}", c.limit, q)
	}
}

func orderName(o limiter.Order) string {
	switch o {
	case limiter.OldestFirst:
		return "OldestFirst"
	case limiter.NewestFirst:
		return "NewestFirst"
	}
	return fmt.Sprintf("Order(%d)", int(o))
}

// build constructs the limiter. Call it in the bubble, right after reading
// the run's start instant.
func (c config) build() (testLimiter, error) {
	switch c.kind {
	case tokenBucket:
		return nilSafe(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(c.events, c.per), Burst: c.burst, Queue: c.queue}))
	case leakyBucket:
		return nilSafe(limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(c.events, c.per), Queue: c.queue}))
	case fixedWindow:
		return nilSafe(limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: c.limit, Window: c.window, Queue: c.queue}))
	case slidingWindow:
		return nilSafe(limiter.NewSlidingWindow(limiter.SlidingWindowOptions{Limit: c.limit, Window: c.window, Segments: c.segments, Queue: c.queue}))
	case slidingLog:
		return nilSafe(limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: c.limit, Window: c.window, Queue: c.queue}))
	default:
		return nilSafe(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: c.limit, Queue: c.queue}))
	}
}

// nilSafe turns a typed nil pointer into a nil interface.
func nilSafe[T interface {
	*E
	testLimiter
}, E any](l T, err error) (testLimiter, error) {
	if l == nil {
		return nil, err
	}
	return l, err
}

// rate returns the configured rate in lowest terms: n events per d ns.
func (c config) rate() (n, d int64) {
	n, d = int64(c.events), int64(c.per)
	g := gcd(n, d)
	return n / g, d / g
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// pacerMaxRequest is the request size the tests treat as "more than a pacer
// could ever grant": none, since a pacer grants any size and then waits.
const pacerMaxRequest = math.MaxInt32

// maxRequest is the most permits one request can ever be granted.
func (c config) maxRequest() int {
	switch c.kind {
	case tokenBucket:
		return c.burst
	case leakyBucket:
		return pacerMaxRequest
	}
	return c.limit
}

// capacity is what a fresh limiter grants at once: TryAcquire(capacity) on a
// new (or recovered) limiter is granted, and Stats().Available equals it.
func (c config) capacity() int {
	switch c.kind {
	case tokenBucket:
		return c.burst
	case leakyBucket:
		return 1
	}
	return c.limit
}

// freshAvailable is what Stats().Available says of a new (or recovered)
// limiter: its capacity, except for a pacer, which grants any request up to
// its maximum once its slot has come and says so; that maximum depends on
// the rate, so it is read from a new pacer (TestLeakyBucketAvailable in
// package limiter checks that it is granted and that one more is not).
func (c config) freshAvailable() int64 {
	if c.kind != leakyBucket {
		return int64(c.capacity())
	}
	l, err := c.build()
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Stats().Available
}

// requestScale is the size range requests are drawn from.
func (c config) requestScale() int {
	if c.kind == leakyBucket {
		return 4
	}
	return c.maxRequest()
}

// recovery is the longest a limiter can take, after its last grant of at most
// kmax permits, to be as if new (every lease released).
func (c config) recovery(kmax int64) time.Duration {
	switch c.kind {
	case tokenBucket:
		n, d := c.rate()
		return time.Duration(ceilDiv(mul(int64(c.burst), d), n))
	case leakyBucket:
		n, d := c.rate()
		return time.Duration(ceilDiv(mul(max(kmax, 1), d), n))
	case concurrency:
		return 0
	}
	return c.window
}

// unit is the limiter's natural time scale, used to draw sleeps and run
// lengths that make something happen.
func (c config) unit() time.Duration {
	switch c.kind {
	case tokenBucket:
		return max(c.recovery(1), 1)
	case leakyBucket:
		return max(2*c.recovery(1), 1)
	case concurrency:
		return time.Millisecond
	}
	return c.window
}

// ---- drawing ----

// drawPeriod draws a positive duration on one of several scales: whole
// milliseconds or microseconds, round values, odd nanosecond counts, and a
// few nanoseconds, so that rounding paths run.
func drawPeriod(t *rapid.T, label string) time.Duration {
	switch rapid.IntRange(0, 6).Draw(t, label+"Scale") {
	case 0:
		return time.Duration(rapid.IntRange(1, 2000).Draw(t, label+"Ms")) * time.Millisecond
	case 1:
		return time.Duration(rapid.IntRange(1, 50000).Draw(t, label+"Us")) * time.Microsecond
	case 2:
		return rapid.SampledFrom([]time.Duration{time.Second, time.Minute, 1500 * time.Millisecond,
			100 * time.Millisecond, 3 * time.Second, 10 * time.Millisecond}).Draw(t, label)
	case 3:
		return time.Duration(rapid.Int64Range(1, 3e9).Draw(t, label+"Ns"))
	case 4:
		return time.Duration(rapid.IntRange(1, 64).Draw(t, label+"TinyNs"))
	case 5:
		return time.Duration(rapid.IntRange(1, 2000).Draw(t, label+"Ms"))*time.Millisecond +
			time.Duration(rapid.IntRange(1, 999_999).Draw(t, label+"OddNs"))
	default:
		return time.Duration(rapid.IntRange(1, 10_000).Draw(t, label+"Ns"))
	}
}

func drawEvents(t *rapid.T) int {
	switch rapid.IntRange(0, 9).Draw(t, "eventsScale") {
	case 0, 1, 2, 3, 4:
		return rapid.IntRange(1, 10).Draw(t, "events")
	case 5, 6, 7:
		return rapid.IntRange(1, 1000).Draw(t, "events")
	case 8:
		return rapid.SampledFrom([]int{3, 7, 9, 11, 13, 1000, 1001}).Draw(t, "events")
	default:
		return rapid.IntRange(1, 1_000_000).Draw(t, "events")
	}
}

type drawOpts struct {
	noQueueCap bool // liveness: unbounded queue
	maxLimit   int  // cap on Burst / Limit
}

// drawConfig draws a valid configuration of the given limiter.
func drawConfig(t *rapid.T, k kind, o drawOpts) config {
	if o.maxLimit == 0 {
		o.maxLimit = 50
	}
	c := config{kind: k}
	switch k {
	case tokenBucket, leakyBucket:
		c.events = drawEvents(t)
		c.per = drawPeriod(t, "per")
		if k == tokenBucket {
			c.burst = drawLimit(t, "burst", o.maxLimit)
		}
	case fixedWindow, slidingWindow, slidingLog:
		c.limit = drawLimit(t, "limit", o.maxLimit)
		c.window = drawPeriod(t, "window")
		if k == slidingWindow {
			hi := int(min(int64(c.window), 64))
			c.segments = rapid.IntRange(1, hi).Draw(t, "segments")
		}
	case concurrency:
		c.limit = drawLimit(t, "limit", o.maxLimit)
	}
	if !o.noQueueCap && rapid.Bool().Draw(t, "queueCapped") {
		c.queue.Limit = rapid.IntRange(1, 2*c.requestScale()+2).Draw(t, "queueLimit")
	}
	if rapid.Bool().Draw(t, "newestFirst") {
		c.queue.Order = limiter.NewestFirst
	}
	// Spin must fall back to timers in a bubble, where the clock only moves
	// when every goroutine is blocked; draw it now and then to check it does.
	if rapid.IntRange(0, 9).Draw(t, "spinDie") == 0 {
		c.queue.Spin = time.Duration(rapid.Int64Range(1, int64(2*c.unit())).Draw(t, "spin"))
	}
	return c
}

func drawLimit(t *rapid.T, label string, hi int) int {
	if rapid.IntRange(0, 3).Draw(t, label+"Small") > 0 {
		return rapid.IntRange(1, min(5, hi)).Draw(t, label)
	}
	return rapid.IntRange(1, hi).Draw(t, label)
}

// drawRequest draws a permit count: mostly 1 or small, sometimes up to the
// maximum, sometimes more than the limiter can ever grant, rarely negative.
func drawRequest(t *rapid.T, c config, label string, invalid bool) int {
	hi := c.requestScale()
	switch die := rapid.IntRange(0, 79).Draw(t, label+"Die"); {
	case die < 40:
		return 1
	case die < 77:
		return rapid.IntRange(1, hi).Draw(t, label)
	case die < 79 && invalid && c.kind != leakyBucket:
		return c.maxRequest() + rapid.IntRange(1, 2).Draw(t, label+"Over")
	case invalid:
		return -1
	}
	return 1
}

// drawSpan draws a duration in [0, 3*unit] with an odd nanosecond jitter.
func drawSpan(t *rapid.T, unit time.Duration, label string) time.Duration {
	switch rapid.IntRange(0, 9).Draw(t, label+"Die") {
	case 0:
		return 0
	case 1:
		return time.Duration(rapid.IntRange(1, 3).Draw(t, label+"Ns"))
	}
	f := rapid.Int64Range(0, 3000).Draw(t, label+"Permille")
	return time.Duration(mulDivFloor(int64(unit), f, 1000) + rapid.Int64Range(0, 3).Draw(t, label+"Jitter"))
}

// ---- running a bubble ----

// livelockAfter is how long, in real time, a bubble may run. A run takes
// milliseconds; one that takes longer has a goroutine that never blocks (a
// waiter re-arming a zero wait, say), so virtual time cannot advance and the
// bubble would never end.
const livelockAfter = 60 * time.Second

// runBubble runs body in a testing/synctest bubble and returns what
// panicked: a panic in body (or recorded by goSafe), or synctest's own panic
// when every goroutine in the bubble is blocked for good (a deadlock: a
// waiter that is never woken). body must not use t or any *rapid.T: it
// records plain data, which the caller checks afterwards with rt, on the
// test goroutine.
//
// synctest.Test runs on a helper goroutine so that the test goroutine can
// give up on a livelocked bubble: it then fails the test at once with every
// goroutine's stack, without letting rapid shrink (each attempt would leave
// one more goroutine spinning).
func runBubble(t *testing.T, what func() string, body func(p *panics)) (failure string) {
	t.Helper()
	p := &panics{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				p.add(fmt.Sprintf("bubble: %v", r))
			}
		}()
		synctest.Test(t, func(*testing.T) {
			defer p.recover("bubble main goroutine")
			body(p)
		})
	}()
	timer := time.NewTimer(livelockAfter)
	defer timer.Stop()
	select {
	case <-done:
		return p.String()
	case <-timer.C:
		t.Fatalf("livelock: a synctest bubble still runs after %v of real time: a goroutine never blocks, so virtual time cannot advance.\n"+
			"Counterexample (not shrunk):\n%s\n%s", livelockAfter, what(), allStacks())
		return ""
	}
}

// watchdog crashes the test binary with a message if stop is not called
// within livelockAfter: for a bubble run by rapid.SyncTest, whose test
// goroutine cannot stop waiting for it.
func watchdog(what string, progress *atomic.Pointer[string]) (stop func() bool) {
	return time.AfterFunc(livelockAfter, func() {
		step := "(none)"
		if p := progress.Load(); p != nil {
			step = *p
		}
		panic(fmt.Sprintf("livelock: %s: a synctest bubble still runs after %v of real time: a goroutine never blocks, "+
			"so virtual time cannot advance.\nStep in progress: %s\n"+
			"Rerun with -rapid.log to print each case's steps as it runs: the last one printed livelocks.\n%s",
			what, livelockAfter, step, allStacks()))
	}).Stop
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// panics collects panics from the goroutines of a bubble.
type panics struct {
	mu   sync.Mutex
	msgs []string
}

func (p *panics) add(msg string) {
	p.mu.Lock()
	p.msgs = append(p.msgs, msg)
	p.mu.Unlock()
}

func (p *panics) recover(who string) {
	if r := recover(); r != nil {
		p.add(fmt.Sprintf("panic in %s: %v\n%s", who, r, debug.Stack()))
	}
}

func (p *panics) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.msgs) == 0 {
		return ""
	}
	return fmt.Sprint(p.msgs)
}

// goSafe starts f on wg, recording a panic instead of crashing the binary.
func (p *panics) goSafe(wg *sync.WaitGroup, who string, f func()) {
	wg.Go(func() {
		defer p.recover(who)
		f()
	})
}

// ---- grants ----

// grant is one granted lease: the instant it took effect (since the
// limiter's creation) and its size.
type grant struct {
	at  time.Duration
	n   int64
	who string
}

func (g grant) String() string {
	return fmt.Sprintf("%s:%d@%dns", g.who, g.n, int64(g.at))
}

func sortGrants(gs []grant) []grant {
	out := make([]grant, 0, len(gs))
	for _, g := range gs {
		if g.n > 0 {
			out = append(out, g)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

func fmtGrants(gs []grant, limit int) string {
	s := fmt.Sprint(gs)
	if len(gs) > limit {
		s = fmt.Sprint(gs[:limit]) + fmt.Sprintf("... (%d grants)", len(gs))
	}
	return s
}

// ---- exact integer arithmetic (panics rather than overflow) ----

func mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		panic(fmt.Sprintf("properties_test: overflow in %d*%d", a, b))
	}
	return c
}

func add(a, b int64) int64 {
	c := a + b
	if (b > 0 && c < a) || (b < 0 && c > a) {
		panic(fmt.Sprintf("properties_test: overflow in %d+%d", a, b))
	}
	return c
}

// ceilDiv returns ceil(a/b) for b > 0 and any sign of a.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}

// mulDivFloor returns floor(a*b/c) for a, b >= 0, c > 0, exactly.
func mulDivFloor(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		panic("properties_test: overflow in mulDivFloor")
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		panic("properties_test: overflow in mulDivFloor")
	}
	return int64(q)
}

// mulDivCeil returns ceil(a*b/c) for a, b >= 0, c > 0, exactly.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		panic("properties_test: overflow in mulDivCeil")
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		panic("properties_test: overflow in mulDivCeil")
	}
	return int64(q)
}
