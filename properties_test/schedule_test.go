package properties_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
	"pgregory.net/rapid"
)

func TestScheduleTokenBucket(t *testing.T)   { t.Parallel(); testSchedule(t, tokenBucket) }
func TestScheduleLeakyBucket(t *testing.T)   { t.Parallel(); testSchedule(t, leakyBucket) }
func TestScheduleFixedWindow(t *testing.T)   { t.Parallel(); testSchedule(t, fixedWindow) }
func TestScheduleSlidingWindow(t *testing.T) { t.Parallel(); testSchedule(t, slidingWindow) }
func TestScheduleSlidingLog(t *testing.T)    { t.Parallel(); testSchedule(t, slidingLog) }
func TestScheduleConcurrency(t *testing.T)   { t.Parallel(); testSchedule(t, concurrency) }

// testSchedule draws a configuration and a concurrent schedule, runs it in a
// bubble recording every call, and checks safety, error classification,
// queue order, counters and conservation outside the bubble.
func testSchedule(t *testing.T, k kind) {
	rapid.Check(t, func(rt *rapid.T) {
		c := drawConfig(rt, k, drawOpts{})
		s := drawSchedule(rt, c)
		r := execute(t, c, s)
		if err := checkRun(c, s, r); err != nil {
			rt.Fatalf("%v\n%v", c, err)
		}
	})
}

// ---- schedules ----

type ctxKind int

const (
	ctxPlain    ctxKind = iota // context.Background()
	ctxDeadline                // context.WithTimeout(d)
	ctxCancel                  // cancelled d after the call
	ctxDone                    // cancelled before the call
)

type opKind int

const (
	opAcquire opKind = iota
	opTry
	opSleep
)

// op is one step of a worker goroutine.
type op struct {
	kind opKind
	n    int           // permits
	d    time.Duration // opSleep: the sleep; ctxDeadline / ctxCancel: the delay
	ctx  ctxKind
	hold time.Duration // granted leases are released this long after the grant
}

func (o op) GoString() string {
	switch o.kind {
	case opSleep:
		return fmt.Sprintf("Sleep(%dns)", int64(o.d))
	case opTry:
		return fmt.Sprintf("TryAcquire(%d) hold %dns", o.n, int64(o.hold))
	}
	ctx := [...]string{"Background", "WithTimeout(%dns)", "CancelAfter(%dns)", "Cancelled"}[o.ctx]
	if strings.Contains(ctx, "%") {
		ctx = fmt.Sprintf(ctx, int64(o.d))
	}
	return fmt.Sprintf("Acquire(%s, %d) hold %dns", ctx, o.n, int64(o.hold))
}

type probe struct {
	sleep time.Duration
	n     int
}

func (p probe) GoString() string {
	return fmt.Sprintf("Sleep(%dns); TryAcquire(%d)", int64(p.sleep), p.n)
}

type schedule struct {
	workers [][]op
	closeAt time.Duration // -1: never closed
	probes  []probe       // after every worker ended and every lease was released
}

// drawOpShape draws an op's kind and, for an Acquire, its context, for a
// Sleep its length (spans scaled to u); the caller draws the request.
func drawOpShape(t *rapid.T, u time.Duration) op {
	var o op
	switch die := rapid.IntRange(0, 9).Draw(t, "kind"); {
	case die < 5:
		o.kind = opAcquire
		switch die := rapid.IntRange(0, 9).Draw(t, "ctx"); {
		case die < 5:
			o.ctx = ctxPlain
		case die < 7:
			o.ctx = ctxDeadline
		case die < 9:
			o.ctx = ctxCancel
		default:
			o.ctx = ctxDone
		}
		if o.ctx == ctxDeadline || o.ctx == ctxCancel {
			o.d = drawSpan(t, u, "ctxDelay")
		}
	case die < 8:
		o.kind = opTry
	default:
		o.kind = opSleep
		o.d = drawSpan(t, u, "sleep")
	}
	return o
}

func drawOp(c config) *rapid.Generator[op] {
	return rapid.Custom(func(t *rapid.T) op {
		u := c.unit()
		o := drawOpShape(t, u)
		if o.kind != opSleep {
			o.n = drawRequest(t, c, "n", true)
			if c.kind == concurrency {
				o.hold = drawSpan(t, u, "hold")
			}
		}
		return o
	})
}

func drawSchedule(t *rapid.T, c config) schedule {
	var s schedule
	// rapid's slices average about five elements more than their minimum:
	// draw the sizes first so that long, crowded schedules come up too.
	workers := rapid.IntRange(1, 8).Draw(t, "workerCount")
	s.workers = make([][]op, workers)
	for w := range s.workers {
		n := rapid.IntRange(1, 40).Draw(t, "opCount")
		s.workers[w] = rapid.SliceOfN(drawOp(c), n, n).Draw(t, "ops")
	}
	s.closeAt = -1
	if rapid.IntRange(0, 2).Draw(t, "close") == 0 {
		s.closeAt = time.Duration(mulDivFloor(int64(c.unit()), rapid.Int64Range(0, 20000).Draw(t, "closePermille"), 1000) +
			rapid.Int64Range(0, 2).Draw(t, "closeJitter"))
	}
	s.probes = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) probe {
		return probe{sleep: drawSpan(t, c.unit(), "sleep"), n: drawRequest(t, c, "n", false)}
	}), 1, 4).Draw(t, "probes")
	return s
}

// ---- running ----

// result is one recorded call.
type result struct {
	who        string
	o          op
	start, end time.Duration
	granted    bool
	permits    int
	err        error         // Acquire's error, or TryAcquire's Lease.Err()
	leaseErr   error         // Lease.Err()
	retry      time.Duration // Lease.RetryAfter()
	limit      time.Duration // ctxDeadline / ctxCancel: the instant the context ends; else -1
}

func (r result) String() string {
	return fmt.Sprintf("%s %#v from %dns to %dns: granted %v permits %d err %v RetryAfter %dns",
		r.who, r.o, int64(r.start), int64(r.end), r.granted, r.permits, r.err, int64(r.retry))
}

type run struct {
	failure    string // a panic, or the bubble deadlocked
	buildErr   error
	closeErr   error
	results    []result
	inUseErr   string        // concurrency: the bound was broken
	stats      limiter.Stats // when every worker had ended
	probes     []result
	statsFresh limiter.Stats // after a full recovery
	fresh      result        // TryAcquire(capacity) after the recovery
	events     []string      // concurrency: grants and releases, for messages
	releases   []grant       // concurrency: when leases were released
}

func (r *run) grants() []grant {
	var gs []grant
	for _, x := range slices.Concat(r.results, r.probes, []result{r.fresh}) {
		if x.granted {
			gs = append(gs, grant{at: x.end, n: int64(x.permits), who: x.who})
		}
	}
	return gs
}

// execute runs s on a limiter configured by c in a bubble and records
// everything, without touching rapid.
func execute(t *testing.T, c config, s schedule) *run {
	r := &run{}
	what := func() string {
		return fmt.Sprintf("%v\nschedule: close at %dns, workers %#v", c, int64(s.closeAt), s.workers)
	}
	r.failure = runBubble(t, what, func(p *panics) {
		start := time.Now() // the limiter's origin: no virtual time passes until it is made
		lim, err := c.build()
		if err != nil {
			r.buildErr = err
			return
		}
		now := func() time.Duration { return time.Since(start) }
		var (
			mu    sync.Mutex
			wg    sync.WaitGroup
			inUse int64
		)
		record := func(x result) {
			mu.Lock()
			r.results = append(r.results, x)
			mu.Unlock()
		}
		// hold keeps a granted lease for d, then releases it. For a
		// concurrency limiter, in-use permits are counted from the return of
		// the grant until just before Release: never more than the limiter's
		// own count, so a count over Limit is a real violation.
		hold := func(who string, l limiter.Lease, d time.Duration) {
			if c.kind == concurrency {
				mu.Lock()
				inUse += int64(l.Permits())
				r.events = append(r.events, fmt.Sprintf("%dns %s +%d => %d", int64(now()), who, l.Permits(), inUse))
				if inUse > int64(c.limit) && r.inUseErr == "" {
					r.inUseErr = fmt.Sprintf("%d permits in use at %dns, more than Limit %d (after %s's grant of %d)",
						inUse, int64(now()), c.limit, who, l.Permits())
				}
				mu.Unlock()
			}
			p.goSafe(&wg, "release "+who, func() {
				time.Sleep(d)
				if c.kind == concurrency {
					mu.Lock()
					inUse -= int64(l.Permits())
					r.events = append(r.events, fmt.Sprintf("%dns %s -%d => %d", int64(now()), who, l.Permits(), inUse))
					r.releases = append(r.releases, grant{at: now(), n: int64(l.Permits()), who: who})
					mu.Unlock()
				}
				l.Release()
			})
		}
		if s.closeAt >= 0 {
			p.goSafe(&wg, "closer", func() {
				time.Sleep(s.closeAt)
				r.closeErr = lim.Close()
			})
		}
		for wi, ops := range s.workers {
			p.goSafe(&wg, fmt.Sprintf("worker %d", wi), func() {
				for i, o := range ops {
					who := fmt.Sprintf("w%d.%d", wi, i)
					x := result{who: who, o: o, limit: -1}
					switch o.kind {
					case opSleep:
						time.Sleep(o.d)
						continue
					case opTry:
						x.start = now()
						l := lim.TryAcquire(o.n)
						x.end = now()
						x.granted, x.permits, x.err, x.retry = l.Granted(), l.Permits(), l.Err(), l.RetryAfter()
						x.leaseErr = x.err
						if l.Granted() {
							hold(who, l, o.hold)
						}
					case opAcquire:
						ctx, cancel := context.WithCancel(context.Background())
						stop := func() bool { return false }
						switch o.ctx {
						case ctxDeadline:
							ctx, cancel = context.WithTimeout(context.Background(), o.d)
						case ctxCancel:
							stop = time.AfterFunc(o.d, cancel).Stop
						case ctxDone:
							cancel()
						}
						x.start = now()
						if o.ctx == ctxDeadline || o.ctx == ctxCancel {
							x.limit = x.start + o.d
						}
						l, err := lim.Acquire(ctx, o.n)
						x.end = now()
						stop()
						cancel()
						x.granted, x.permits, x.err, x.retry = l.Granted(), l.Permits(), err, l.RetryAfter()
						x.leaseErr = l.Err()
						if (err == nil) != l.Granted() {
							x.err = fmt.Errorf("Acquire returned a lease with Granted() %v and error %v", l.Granted(), err)
						}
						if l.Granted() {
							hold(who, l, o.hold)
						}
					}
					record(x)
				}
			})
		}
		wg.Wait() // every worker, release and the closer ended
		r.stats = lim.Stats()

		// Conservation probes: decided from the recorded grants alone.
		for i, pr := range s.probes {
			time.Sleep(pr.sleep)
			x := result{who: fmt.Sprintf("probe%d", i), o: op{kind: opTry, n: pr.n}, limit: -1}
			x.start = now()
			l := lim.TryAcquire(pr.n)
			x.end = x.start
			x.granted, x.permits, x.err, x.retry = l.Granted(), l.Permits(), l.Err(), l.RetryAfter()
			l.Release()
			r.probes = append(r.probes, x)
		}
		// After a full window with nothing held, the limiter is as if new.
		var kmax int64
		for _, g := range r.grants() {
			kmax = max(kmax, g.n)
		}
		time.Sleep(c.recovery(kmax))
		r.statsFresh = lim.Stats()
		r.fresh = result{who: "fresh", o: op{kind: opTry, n: c.capacity()}, start: now(), end: now(), limit: -1}
		l := lim.TryAcquire(c.capacity())
		r.fresh.granted, r.fresh.permits, r.fresh.err, r.fresh.retry = l.Granted(), l.Permits(), l.Err(), l.RetryAfter()
		l.Release()
		if err := lim.Close(); err != nil && r.closeErr == nil {
			r.closeErr = err
		}
	})
	return r
}

// ---- checking ----

func checkRun(c config, s schedule, r *run) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if r.failure != "" {
		// A deadlock here means an Acquire was never woken (or Close left a
		// waiter behind): every wait in these schedules ends.
		return fmt.Errorf("the run did not complete: %s\nrecorded so far:\n%s", r.failure, fmtResults(r.results))
	}
	if r.buildErr != nil {
		return fmt.Errorf("constructor: %v", r.buildErr)
	}
	if r.closeErr != nil {
		fail("Close returned %v", r.closeErr)
	}
	closed := s.closeAt >= 0

	// Safety.
	if err := checkSafety(c, r.grants()); err != nil {
		errs = append(errs, err)
	}
	if r.inUseErr != "" {
		fail("concurrency bound broken: %s\nevents: %s", r.inUseErr, strings.Join(r.events, "; "))
	}

	// Every result is allowed by what happened.
	var kmax int64 = 1
	for _, ops := range s.workers {
		for _, o := range ops {
			kmax = max(kmax, int64(o.n))
		}
	}
	var granted, rejected int64
	for _, x := range r.results {
		if x.granted {
			granted++
		} else {
			rejected++
		}
		if err := checkResult(c, s, x, kmax); err != nil {
			errs = append(errs, err)
		}
	}

	// No barging: while an Acquire waits, TryAcquire fails, and in
	// OldestFirst order so does a newer Acquire; waiters are granted in
	// arrival order.
	for _, a := range r.results {
		if a.o.kind != opAcquire || a.end <= a.start {
			continue // only calls that waited in the queue
		}
		for _, b := range r.results {
			if !b.granted || b.start != b.end || b.start <= a.start || b.start >= a.end {
				continue // only grants at once, strictly while a waited
			}
			if b.o.kind == opTry || c.queue.Order == limiter.OldestFirst {
				fail("barging: %s was granted at once while %s waited in the queue", b, a)
			}
		}
		if c.queue.Order == limiter.OldestFirst && a.granted {
			for _, b := range r.results {
				if b.o.kind == opAcquire && b.granted && b.end > b.start && b.start > a.start && b.end < a.end {
					fail("FIFO order broken: %s was granted before %s, which queued first", b, a)
				}
			}
		}
		if c.queue.Order == limiter.NewestFirst && (a.granted || errors.Is(a.err, limiter.ErrQueueFull)) {
			for _, b := range r.results {
				if b.o.kind != opAcquire || b.end <= b.start || b.end <= a.end {
					continue // only calls still queued after a left
				}
				if a.granted && b.start > a.start && b.start < a.end {
					// b queued after a, so ahead of it, and still waits.
					fail("LIFO order broken: %s was granted while %s, which queued later, still waited", a, b)
				}
				if !a.granted && b.start < a.start {
					fail("NewestFirst pushed out %s while %s, which queued earlier, still waited", a, b)
				}
			}
		}
	}

	// Decisions at unambiguous instants match the model.
	errs = append(errs, checkDecisions(c, s, r)...)

	// Counters.
	if r.stats.Granted != granted || r.stats.Rejected != rejected || r.stats.Waiters != 0 || r.stats.Queued != 0 {
		fail("Stats after the run %+v; recorded %d granted, %d rejected, nothing queued", r.stats, granted, rejected)
	}

	// Conservation: from the recorded grants alone, the model decides the
	// probes as the limiter does, so failed and cancelled waiters consumed
	// nothing.
	m := newModel(c)
	m.closed = closed
	log := sortGrants(grantsOf(r.results))
	for _, g := range log {
		m.commit(g.at, int(g.n), g.who)
	}
	if c.kind == concurrency {
		m.inUse = 0 // every lease was released before the probes
	}
	for _, x := range r.probes {
		ok, retry, want := m.decide(x.start, x.o.n)
		if x.granted != ok || (!ok && !errors.Is(x.err, want)) || (!ok && x.retry != retry) {
			fail("conservation: probe %s, but the model, from the grants alone, says granted %v err %v RetryAfter %dns (last grants: %s)",
				x, ok, want, int64(retry), fmtGrants(log[max(len(log)-20, 0):], 20))
		}
		if x.granted {
			m.commit(x.start, x.o.n, x.who)
			if c.kind == concurrency {
				m.inUse -= int64(x.o.n)
			}
		}
	}
	// As if new after a full recovery; after Close, everything fails with ErrClosed.
	if closed {
		if r.fresh.granted || !errors.Is(r.fresh.err, limiter.ErrClosed) {
			fail("after Close: %s, want ErrClosed", r.fresh)
		}
	} else {
		if r.statsFresh.Available != c.freshAvailable() || r.statsFresh.Waiters != 0 || r.statsFresh.Queued != 0 {
			fail("not as new after a full window with nothing held: Stats %+v, want Available %d", r.statsFresh, c.freshAvailable())
		}
		if !r.fresh.granted {
			fail("not as new after a full window with nothing held: %s", r.fresh)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w\nschedule: close at %dns, workers %#v\nresults:\n%s", errors.Join(errs...), int64(s.closeAt), s.workers, fmtResults(r.results))
	}
	return nil
}

func grantsOf(rs []result) []grant {
	var gs []grant
	for _, x := range rs {
		if x.granted {
			gs = append(gs, grant{at: x.end, n: int64(x.permits), who: x.who})
		}
	}
	return gs
}

func fmtResults(rs []result) string {
	rs = slices.Clone(rs)
	slices.SortStableFunc(rs, func(a, b result) int { return int(a.end - b.end) })
	var sb strings.Builder
	for i, x := range rs {
		if i == 80 {
			fmt.Fprintf(&sb, "  ... (%d results)\n", len(rs))
			break
		}
		fmt.Fprintf(&sb, "  %s\n", x)
	}
	return sb.String()
}

// checkResult checks that one call's outcome is allowed by what happened.
func checkResult(c config, s schedule, x result, kmax int64) error {
	bad := func(why string) error { return fmt.Errorf("%s: %s", x, why) }
	closed := s.closeAt >= 0
	validN := x.o.n >= 0 && x.o.n <= c.maxRequest()
	if x.granted != (x.err == nil) {
		return bad("Granted() and the error disagree")
	}
	if x.retry < 0 {
		return bad("negative RetryAfter")
	}
	if x.granted {
		switch {
		case x.permits != x.o.n:
			return bad("granted a different number of permits")
		case !validN:
			return bad("granted a request the limiter can never grant")
		case x.retry != 0:
			return bad("granted lease with a RetryAfter")
		case x.limit >= 0 && x.end > x.limit:
			return bad("granted after its context ended")
		case x.o.ctx == ctxDone && x.o.kind == opAcquire && x.end != x.start:
			return bad("waited with a context that was already done")
		case closed && x.end > s.closeAt:
			return bad(fmt.Sprintf("granted after Close at %dns", int64(s.closeAt)))
		}
		return nil
	}
	if x.permits != 0 {
		return bad("refused lease reports permits")
	}
	if x.leaseErr == nil || !errors.Is(x.err, x.leaseErr) {
		return bad(fmt.Sprintf("the lease's Err() %v does not match the error", x.leaseErr))
	}
	at := x.end == x.start // failed at once
	isAcq := x.o.kind == opAcquire
	switch err := x.err; {
	case x.o.n < 0:
		if !errors.Is(err, limiter.ErrInvalidCount) || !at {
			return bad("want ErrInvalidCount at once for a negative count")
		}
	case x.o.n > c.maxRequest():
		if !errors.Is(err, limiter.ErrExceedsLimit) || !at {
			return bad("want ErrExceedsLimit at once for more than the limiter can ever grant")
		}
	case errors.Is(err, limiter.ErrClosed):
		if !closed || x.end < s.closeAt || !(at || x.end == s.closeAt) {
			return bad(fmt.Sprintf("ErrClosed, but Close came at %dns (-1: never)", int64(s.closeAt)))
		}
	case errors.Is(err, limiter.ErrQueueFull):
		if !isAcq || c.queue.Limit == 0 || (c.queue.Order == limiter.OldestFirst && !at) {
			return bad("ErrQueueFull, but the queue has no cap or this waiter was already queued in OldestFirst order")
		}
	case errors.Is(err, context.DeadlineExceeded):
		// At the deadline, or before it once the limiter knows the wait
		// (RetryAfter, from then) would outlast it: at once, or when the
		// waiter comes to head the queue.
		if !isAcq || x.o.ctx != ctxDeadline || !(x.end == x.limit || (x.end < x.limit && x.end+x.retry > x.limit)) {
			return bad("DeadlineExceeded, but not at the deadline nor when the wait was known to outlast it")
		}
	case errors.Is(err, context.Canceled):
		if !isAcq || !((x.o.ctx == ctxCancel && x.end == x.limit) || (x.o.ctx == ctxDone && at) || (x.o.ctx == ctxCancel && x.limit == x.start && at)) {
			return bad("Canceled, but not when the context was cancelled")
		}
	case errors.Is(err, limiter.ErrLimited):
		if isAcq {
			return bad("Acquire failed with ErrLimited")
		}
		if c.kind == concurrency && x.retry != 0 {
			return bad("a concurrency limiter cannot know when a release comes")
		}
		if x.retry > c.recovery(kmax) {
			return bad(fmt.Sprintf("RetryAfter longer than a full recovery (%v)", c.recovery(kmax)))
		}
	default:
		return bad("unexpected error")
	}
	// After Close, every valid call fails with ErrClosed (a context that has
	// already ended may be reported first).
	ctxEnded := x.o.ctx == ctxDone || (x.limit >= 0 && x.limit <= x.start)
	if closed && x.start > s.closeAt && validN && !ctxEnded && !errors.Is(x.err, limiter.ErrClosed) {
		return bad(fmt.Sprintf("want ErrClosed after Close at %dns", int64(s.closeAt)))
	}
	return nil
}

// checkDecisions replays, against the model, every call decided at an
// instant where the order of events cannot matter: no other grant, release
// or waiting Acquire at that instant, and no Close by then. The model sees
// only the grants (and releases) recorded before the instant, so a failed or
// cancelled waiter that consumed permits, or a limiter that refuses what it
// could grant, shows here in the middle of the run.
func checkDecisions(c config, s schedule, r *run) []error {
	var errs []error
	busy := func(x result) bool {
		t := x.start
		if s.closeAt >= 0 && s.closeAt <= t {
			return true
		}
		for _, y := range r.results {
			if y.who == x.who || y.start > t || y.end < t {
				continue
			}
			if y.granted || (y.o.kind == opAcquire && !neverQueued(c, y)) {
				return true // granted at t too, or maybe in the queue at t
			}
		}
		for _, y := range r.releases {
			if y.at == t {
				return true
			}
		}
		return false
	}
	for _, x := range r.results {
		if x.o.kind == opSleep || x.o.n < 1 || x.o.n > c.maxRequest() || busy(x) {
			continue
		}
		if x.o.kind == opAcquire && (x.o.ctx == ctxDone || (x.limit >= 0 && x.limit <= x.start)) {
			continue // its context had already ended
		}
		m := newModel(c)
		for _, g := range sortGrants(grantsOf(r.results)) {
			if g.at < x.start {
				m.commit(g.at, int(g.n), g.who)
			}
		}
		for _, y := range r.releases {
			if y.at < x.start {
				m.inUse -= y.n
			}
		}
		ok, retry, want := m.decide(x.start, x.o.n)
		switch x.o.kind {
		case opTry:
			if x.granted != ok || (!ok && (!errors.Is(x.err, want) || x.retry != retry)) {
				errs = append(errs, fmt.Errorf("%s, but the model, from the grants before, says granted %v err %v RetryAfter %dns (grants before: %s)",
					x, ok, want, int64(retry), m.tail()))
			}
		case opAcquire:
			if now := x.granted && x.end == x.start; now != ok {
				errs = append(errs, fmt.Errorf("%s, but the model, from the grants before, says it can be granted at once: %v (grants before: %s)",
					x, ok, m.tail()))
			}
		}
	}
	return errs
}

// neverQueued reports whether a failed Acquire failed before entering the
// queue. One cancelled at the instant it started may have been queued for
// that instant: a CancelAfter(0) context is cancelled by time.AfterFunc on a
// goroutine of its own, which may run after the call has queued, and the
// waiter leaves the queue only when its own goroutine runs again; goroutines
// running at that instant meanwhile see it queued.
func neverQueued(c config, y result) bool {
	switch {
	case y.granted || y.end > y.start:
		return false
	case errors.Is(y.err, limiter.ErrInvalidCount), errors.Is(y.err, limiter.ErrExceedsLimit):
		return true
	case y.o.ctx == ctxDone || (y.o.ctx == ctxDeadline && y.limit <= y.start):
		// Its context had ended before the call: cancelled, or a deadline
		// already past, which context.WithTimeout cancels before returning.
		return true
	case errors.Is(y.err, context.DeadlineExceeded) && y.end < y.limit:
		return true // the wait would outlast the deadline
	case errors.Is(y.err, limiter.ErrQueueFull) && c.queue.Order == limiter.OldestFirst:
		return true
	}
	return false
}

// TestCheckDecisionsCancelAfterZero pins the judgement of an Acquire whose
// context is cancelled 0ns after the call: time.AfterFunc runs the cancel
// on a goroutine of its own, so the call may find its context live and
// queue, and stay queued until its goroutine runs again, at the same
// instant (the limiter removes it then). A TryAcquire at that instant is
// refused because it waits (no barging), with RetryAfter 0. Only a context
// that ended before the call (Cancelled, or a deadline already past, which
// context.WithTimeout cancels before it returns) cannot have queued.
func TestCheckDecisionsCancelAfterZero(t *testing.T) {
	c := config{kind: slidingLog, limit: 3, window: 52, queue: limiter.QueueOptions{Limit: 1, Order: limiter.OldestFirst}}
	s := schedule{closeAt: -1}
	granted := func(who string, k opKind) result {
		return result{who: who, o: op{kind: k, n: 1}, granted: true, permits: 1, limit: -1}
	}
	refusedAt2 := result{who: "w0.2", o: op{kind: opTry, n: 1}, start: 2, end: 2,
		err: limiter.ErrLimited, leaseErr: limiter.ErrLimited, limit: -1} // RetryAfter 0: a waiter was queued
	for _, tc := range []struct {
		name   string
		o      op
		err    error
		reject bool // the refusal's RetryAfter 0 must be reported
	}{
		{"CancelAfter(0)", op{kind: opAcquire, n: 1, ctx: ctxCancel}, context.Canceled, false},
		{"Cancelled", op{kind: opAcquire, n: 1, ctx: ctxDone}, context.Canceled, true},
		{"WithTimeout(0)", op{kind: opAcquire, n: 1, ctx: ctxDeadline}, context.DeadlineExceeded, true},
	} {
		a := result{who: "w2.6", o: tc.o, start: 2, end: 2, err: tc.err, leaseErr: tc.err, limit: -1}
		if tc.o.ctx != ctxDone {
			a.limit = a.start + tc.o.d
		}
		r := &run{results: []result{granted("w7.0", opAcquire), granted("w7.1", opTry), granted("w1.0", opAcquire), a, refusedAt2}}
		errs := checkDecisions(c, s, r)
		if got := len(errs) > 0; got != tc.reject {
			t.Errorf("%s failed at once beside a TryAcquire refused with RetryAfter 0: reported %v, want %v (errors: %v)", tc.name, got, tc.reject, errs)
		}
	}
}
