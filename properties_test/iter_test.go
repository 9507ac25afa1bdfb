package properties_test

// Properties of package iter: range loops over rate-limited sequences.
//
// rapid draws a limiter (any of the six, queue options included), one to
// three loops that share it, each over its own upstream sequence of 0..n-1
// (sometimes slow to produce), with drawn body durations, and each ended in
// one of the ways a loop ends: the upstream runs out, the body breaks out or
// panics, ctx is cancelled or its deadline passes, the limiter is closed,
// its queue is full, or a value costs more than it can ever grant (or a
// negative cost). Each loop uses one wrapper: Limit, Limit2, Batch or
// Weighted (TestIter<Wrapper>). The yields are recorded with their instants
// and permits, and checked outside the bubble:
//
//   - bound: the yields of all loops together keep the limiter's bound over
//     every window (checkSafety), and for a Concurrency limiter the permits
//     of bodies running at once never exceed its Limit (the lease is held
//     while the body runs);
//   - order: each loop yields the upstream's values once each, in order, as
//     a prefix 0..m-1 (Batch: slices of k, only the last shorter, and only
//     when the upstream ran out);
//   - stop: after a break, a panic, a cancellation or a refusal the upstream
//     is told to stop at once (its yield returns false): it has produced only
//     the values yielded plus the one that was refused (Batch: the values of
//     the slice being gathered); nothing is yielded after ctx ended;
//   - why: the loop's error (the Err forms) is nil exactly when the upstream
//     ran out or the body broke out, and otherwise one the run allows: ctx's
//     error only after a cancel or with a deadline, ErrExceedsLimit exactly
//     when the refused request is over the limiter's maximum, ErrInvalidCount
//     for a negative cost, ErrQueueFull only with a queue cap, ErrClosed only
//     after Close;
//   - leaks: every goroutine ends (the bubble), no waiter is left in the
//     limiter's queue, and no Concurrency permit is still held.

import (
	"context"
	"errors"
	"fmt"
	stditer "iter"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/rategate/rategate/iter"
	"github.com/rategate/rategate/limiter"
	"pgregory.net/rapid"
)

func TestIterLimit(t *testing.T)    { t.Parallel(); testIter(t, iterLimit) }
func TestIterLimit2(t *testing.T)   { t.Parallel(); testIter(t, iterLimit2) }
func TestIterBatch(t *testing.T)    { t.Parallel(); testIter(t, iterBatch) }
func TestIterWeighted(t *testing.T) { t.Parallel(); testIter(t, iterWeighted) }

// iterWrapper names one of package iter's wrappers.
type iterWrapper int

const (
	iterLimit iterWrapper = iota
	iterLimit2
	iterBatch
	iterWeighted
)

func (w iterWrapper) String() string {
	return [...]string{"Limit", "Limit2", "Batch", "Weighted"}[w]
}

// iterLoop is one drawn loop.
type iterLoop struct {
	n        int             // upstream values 0..n-1
	gap      time.Duration   // upstream sleep before each value after the first
	body     []time.Duration // body durations, by yield number (cyclic)
	breakAt  int             // break after the body of this yield; -1 never
	panicAt  int             // panic in the body of this yield; -1 never
	cancelAt time.Duration   // cancel ctx at this instant; -1 never
	deadline time.Duration   // ctx deadline; -1 none
	k        int             // Batch size
	costs    []int           // Weighted cost of value i
}

func (l iterLoop) GoString() string {
	return fmt.Sprintf("{n:%d gap:%dns body:%v break:%d panic:%d cancel:%dns deadline:%dns k:%d costs:%v}",
		l.n, int64(l.gap), l.body, l.breakAt, l.panicAt, int64(l.cancelAt), int64(l.deadline), l.k, l.costs)
}

// iterYield is one recorded yield.
type iterYield struct {
	at     time.Duration
	values []int
}

// iterOutcome is what one loop did.
type iterOutcome struct {
	yields   []iterYield
	pulled   int  // values the upstream produced
	finished bool // the upstream ran to its end
	told     bool // the upstream was told to stop
	panicked bool // the body's panic came back out of the loop
	other    any  // any other panic
	err      error
	end      time.Duration
	badPair  string // Limit2: a pair whose halves do not match
}

type iterRun struct {
	failure  string
	buildErr error
	outcomes []iterOutcome
	grants   []grant
	inUseErr string
	stats    limiter.Stats
	inUse    int // Concurrency: permits held after every loop ended
}

type iterPanic struct{}

func testIter(t *testing.T, w iterWrapper) {
	rapid.Check(t, func(rt *rapid.T) {
		k := kind(rapid.IntRange(0, int(concurrency)).Draw(rt, "kind"))
		c := drawConfig(rt, k, drawOpts{maxLimit: 20})
		// Now and then no limiter at all (nil: no limit); the loops must
		// still end as they should.
		unlimited := rapid.IntRange(0, 7).Draw(rt, "unlimitedDie") == 0
		closeAt := time.Duration(-1)
		if rapid.IntRange(0, 5).Draw(rt, "closeDie") == 0 {
			closeAt = drawSpan(rt, 4*c.unit(), "closeAt")
		}
		loops := rapid.SliceOfN(iterDrawLoop(c, w), 1, 3).Draw(rt, "loops")
		if unlimited {
			closeAt = -1
		}
		r := iterExecute(t, c, unlimited, w, loops, closeAt)
		if err := iterCheck(c, unlimited, w, loops, closeAt, r); err != nil {
			rt.Fatalf("%s, %v, close at %dns, loops %#v\n%v", iterDescribe(c, unlimited), w, int64(closeAt), loops, err)
		}
	})
}

func iterDescribe(c config, unlimited bool) string {
	if unlimited {
		return "no limiter (nil)"
	}
	return c.String()
}

func iterDrawLoop(c config, w iterWrapper) *rapid.Generator[iterLoop] {
	return rapid.Custom(func(t *rapid.T) iterLoop {
		u := c.unit()
		l := iterLoop{
			n:        rapid.IntRange(0, 25).Draw(t, "n"),
			breakAt:  -1,
			panicAt:  -1,
			cancelAt: -1,
			deadline: -1,
		}
		if rapid.IntRange(0, 3).Draw(t, "gapDie") == 0 {
			l.gap = drawSpan(t, u/4, "gap")
		}
		l.body = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) time.Duration {
			if rapid.Bool().Draw(t, "bodyIdle") {
				return 0
			}
			return drawSpan(t, u/2, "body")
		}), 1, 4).Draw(t, "body")
		switch rapid.IntRange(0, 5).Draw(t, "end") {
		case 1:
			l.breakAt = rapid.IntRange(0, 25).Draw(t, "breakAt")
		case 2:
			l.panicAt = rapid.IntRange(0, 25).Draw(t, "panicAt")
		case 3:
			l.cancelAt = drawSpan(t, 4*u, "cancelAt")
		case 4:
			l.deadline = drawSpan(t, 4*u, "deadline")
		}
		max := c.maxRequest()
		if c.kind == leakyBucket {
			max = 6 // a pacer grants any size; keep its waits short
		}
		switch w {
		case iterBatch:
			l.k = rapid.IntRange(1, max+1).Draw(t, "k")
		case iterWeighted:
			l.costs = make([]int, l.n)
			for i := range l.costs {
				switch die := rapid.IntRange(0, 39).Draw(t, "costDie"); {
				case die == 0:
					l.costs[i] = max + rapid.IntRange(1, 2).Draw(t, "over")
				case die == 1 && c.kind != leakyBucket:
					l.costs[i] = -1
				case die < 5:
					l.costs[i] = 0
				default:
					l.costs[i] = rapid.IntRange(1, max).Draw(t, "cost")
				}
			}
		}
		return l
	})
}

// iterSource is a loop's upstream: 0..n-1, recording how many values it
// produced and whether it ran to its end or was told to stop (its yield
// returned false), and sleeping gap before each value after the first.
type iterSource struct {
	n        int
	gap      time.Duration
	pulled   int
	finished bool
	told     bool
}

func (s *iterSource) seq() stditer.Seq[int] {
	return func(yield func(int) bool) {
		for i := range s.n {
			if i > 0 && s.gap > 0 {
				time.Sleep(s.gap)
			}
			s.pulled++
			if !yield(i) {
				s.told = true
				return
			}
		}
		s.finished = true
	}
}

func (s *iterSource) seq2() stditer.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for v := range s.seq() {
			if !yield(v, 10*v) {
				return
			}
		}
	}
}

func iterExecute(t *testing.T, c config, unlimited bool, w iterWrapper, loops []iterLoop, closeAt time.Duration) *iterRun {
	r := &iterRun{outcomes: make([]iterOutcome, len(loops))}
	what := func() string {
		return fmt.Sprintf("%s, %v, close at %dns, loops %#v", iterDescribe(c, unlimited), w, int64(closeAt), loops)
	}
	r.failure = runBubble(t, what, func(p *panics) {
		start := time.Now()
		var lim limiter.Limiter // nil: no limit
		var tl testLimiter
		if !unlimited {
			var err error
			if tl, err = c.build(); err != nil {
				r.buildErr = err
				return
			}
			lim = tl
		}
		now := func() time.Duration { return time.Since(start) }
		var (
			mu    sync.Mutex
			wg    sync.WaitGroup
			inUse int64
		)
		if closeAt >= 0 {
			p.goSafe(&wg, "closer", func() {
				time.Sleep(closeAt)
				tl.Close()
			})
		}
		for li, l := range loops {
			out := &r.outcomes[li]
			p.goSafe(&wg, fmt.Sprintf("loop %d", li), func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if l.deadline >= 0 {
					ctx, cancel = context.WithDeadline(ctx, start.Add(l.deadline))
					defer cancel()
				}
				if l.cancelAt >= 0 {
					timer := time.AfterFunc(l.cancelAt, cancel)
					defer timer.Stop()
				}
				src := &iterSource{n: l.n, gap: l.gap}
				// body runs one yield's body: it records the yield, holds
				// its permits for the drawn time, and says whether to go on.
				body := func(values []int, permits int) bool {
					y := len(out.yields)
					at := now()
					mu.Lock()
					out.yields = append(out.yields, iterYield{at: at, values: values})
					r.grants = append(r.grants, grant{at: at, n: int64(permits), who: fmt.Sprintf("l%d.%d", li, y)})
					inUse += int64(permits)
					if !unlimited && c.kind == concurrency && inUse > int64(c.limit) && r.inUseErr == "" {
						r.inUseErr = fmt.Sprintf("%d permits in use by loop bodies at %dns, more than Limit %d", inUse, int64(at), c.limit)
					}
					mu.Unlock()
					if d := l.body[y%len(l.body)]; d > 0 {
						time.Sleep(d)
					}
					mu.Lock()
					inUse -= int64(permits)
					mu.Unlock()
					if y == l.panicAt {
						panic(iterPanic{})
					}
					return y != l.breakAt
				}
				func() {
					defer func() {
						if x := recover(); x != nil {
							if _, ok := x.(iterPanic); ok {
								out.panicked = true
							} else {
								out.other = x
							}
						}
					}()
					switch w {
					case iterLimit:
						seq, errf := iter.LimitErr(ctx, src.seq(), lim)
						defer func() { out.err = errf() }()
						for v := range seq {
							if !body([]int{v}, 1) {
								break
							}
						}
					case iterLimit2:
						seq, errf := iter.Limit2Err(ctx, src.seq2(), lim)
						defer func() { out.err = errf() }()
						for k, v := range seq {
							if v != 10*k && out.badPair == "" {
								out.badPair = fmt.Sprintf("(%d, %d)", k, v)
							}
							if !body([]int{k}, 1) {
								break
							}
						}
					case iterBatch:
						seq, errf := iter.BatchErr(ctx, src.seq(), lim, l.k)
						defer func() { out.err = errf() }()
						for b := range seq {
							if !body(b, len(b)) {
								break
							}
						}
					case iterWeighted:
						seq, errf := iter.WeightedErr(ctx, src.seq(), lim, func(v int) int { return l.costs[v] })
						defer func() { out.err = errf() }()
						for v := range seq {
							if !body([]int{v}, l.costs[v]) {
								break
							}
						}
					}
				}()
				out.end = now()
				out.pulled, out.finished, out.told = src.pulled, src.finished, src.told
			})
		}
		wg.Wait()
		if tl != nil {
			r.stats = tl.Stats()
		}
		if cl, ok := lim.(*limiter.Concurrency); ok {
			r.inUse = cl.InUse()
		}
	})
	return r
}

func iterCheck(c config, unlimited bool, w iterWrapper, loops []iterLoop, closeAt time.Duration, r *iterRun) error {
	if r.failure != "" {
		return fmt.Errorf("the run did not complete: %s", r.failure)
	}
	if r.buildErr != nil {
		return fmt.Errorf("build: %v", r.buildErr)
	}
	if unlimited {
		c = config{kind: -1, limit: math.MaxInt32} // no bound to check; no request too large
	}
	if err := checkSafety(c, r.grants); err != nil {
		return fmt.Errorf("bound: %v", err)
	}
	if r.inUseErr != "" {
		return errors.New(r.inUseErr)
	}
	if r.stats.Waiters != 0 || r.stats.Queued != 0 {
		return fmt.Errorf("leak: %d waiters (%d permits) left in the limiter's queue after every loop ended", r.stats.Waiters, r.stats.Queued)
	}
	if r.inUse != 0 {
		return fmt.Errorf("leak: %d Concurrency permits still held after every loop ended", r.inUse)
	}
	for i, l := range loops {
		if err := iterCheckLoop(c, w, l, closeAt, r.outcomes[i]); err != nil {
			return fmt.Errorf("loop %d %#v: %v\nyields: %v, pulled %d, finished %v, err %v, ended at %dns",
				i, l, err, r.outcomes[i].yields, r.outcomes[i].pulled, r.outcomes[i].finished, r.outcomes[i].err, int64(r.outcomes[i].end))
		}
	}
	return nil
}

func iterCheckLoop(c config, w iterWrapper, l iterLoop, closeAt time.Duration, o iterOutcome) error {
	if o.other != nil {
		return fmt.Errorf("unexpected panic: %v", o.other)
	}
	if o.badPair != "" {
		return fmt.Errorf("Limit2 yielded the mismatched pair %s", o.badPair)
	}
	// Order: the values yielded are 0..m-1, once each, in order.
	m := 0
	for yi, y := range o.yields {
		for _, v := range y.values {
			if v != m {
				return fmt.Errorf("yield %d holds %d where %d was next", yi, v, m)
			}
			m++
		}
		if w == iterBatch {
			if len(y.values) == 0 || len(y.values) > l.k {
				return fmt.Errorf("batch %d holds %d values, want 1..%d", yi, len(y.values), l.k)
			}
			if len(y.values) < l.k && (yi != len(o.yields)-1 || m != l.n) {
				return fmt.Errorf("short batch %d (%d of %d) that is not the upstream's last", yi, len(y.values), l.k)
			}
		} else if len(y.values) != 1 {
			return fmt.Errorf("yield %d holds %d values", yi, len(y.values))
		}
	}
	if m > l.n {
		return fmt.Errorf("%d values yielded from an upstream of %d", m, l.n)
	}
	ys := len(o.yields)
	if o.panicked != (l.panicAt >= 0 && ys == l.panicAt+1) {
		return fmt.Errorf("panicked %v after %d yields, panicAt %d", o.panicked, ys, l.panicAt)
	}
	// No yield after ctx ended.
	for _, y := range o.yields {
		if l.cancelAt >= 0 && y.at > l.cancelAt || l.deadline >= 0 && y.at > l.deadline {
			return fmt.Errorf("a yield at %dns, after ctx ended", int64(y.at))
		}
	}
	brokeOut := l.breakAt >= 0 && ys == l.breakAt+1 || o.panicked
	maxReq := c.maxRequest()
	switch {
	case brokeOut:
		if o.err != nil {
			return fmt.Errorf("the body broke out, yet the loop reports %v", o.err)
		}
		if o.pulled != m {
			return fmt.Errorf("the body broke out after %d values; the upstream produced %d", m, o.pulled)
		}
		// A break tells the upstream to stop; a panic unwinds it. Batch's
		// last, short slice is yielded after the upstream ran out.
		lastShort := w == iterBatch && len(o.yields[ys-1].values) < l.k
		switch {
		case lastShort:
			if !o.finished {
				return errors.New("a short batch was yielded before the upstream ran out")
			}
		case o.panicked:
			if o.finished || o.told {
				return fmt.Errorf("after the body panicked, the upstream finished (%v) or was told to stop (%v)", o.finished, o.told)
			}
		case !o.told || o.finished:
			return errors.New("the body broke out, and the upstream was not told to stop")
		}
		return nil
	case o.err == nil:
		if m != l.n || !o.finished {
			return fmt.Errorf("no error, yet %d of %d values yielded (upstream finished: %v)", m, l.n, o.finished)
		}
		return nil
	}
	// The loop was ended by ctx or the limiter, at a value it pulled.
	if w == iterBatch {
		if o.pulled <= m || o.pulled > m+l.k {
			return fmt.Errorf("ended by %v after %d values, with %d pulled: want %d..%d", o.err, m, o.pulled, m+1, m+l.k)
		}
	} else if o.pulled != m+1 {
		return fmt.Errorf("ended by %v after %d values, with %d pulled, want %d", o.err, m, o.pulled, m+1)
	}
	finalFlush := w == iterBatch && o.finished && o.pulled == l.n // the last slice, gathered when the upstream ran out
	if !finalFlush && (o.finished || !o.told) {
		return fmt.Errorf("ended by %v, yet the upstream was not told to stop (it ran to its end: %v)", o.err, o.finished)
	}
	// The request that was refused, where it is known.
	req := -1
	switch w {
	case iterLimit, iterLimit2:
		req = 1
	case iterWeighted:
		req = l.costs[m]
	case iterBatch:
		if o.pulled == min(l.n, m+l.k) {
			req = o.pulled - m // the whole batch was gathered and asked for
		}
	}
	exceeds := req > maxReq
	switch err := o.err; {
	case errors.Is(err, context.Canceled):
		if l.cancelAt < 0 || o.end < l.cancelAt {
			return fmt.Errorf("context.Canceled at %dns, cancel at %dns", int64(o.end), int64(l.cancelAt))
		}
	case errors.Is(err, context.DeadlineExceeded):
		if l.deadline < 0 {
			return fmt.Errorf("context.DeadlineExceeded without a deadline")
		}
	case errors.Is(err, limiter.ErrExceedsLimit):
		if !exceeds {
			return fmt.Errorf("ErrExceedsLimit for a request of %d permits, at most %d", req, maxReq)
		}
	case errors.Is(err, limiter.ErrInvalidCount):
		if req >= 0 {
			return fmt.Errorf("ErrInvalidCount for a request of %d permits", req)
		}
	case errors.Is(err, limiter.ErrQueueFull):
		if c.queue.Limit == 0 {
			return errors.New("ErrQueueFull without a queue cap")
		}
	case errors.Is(err, limiter.ErrClosed):
		if closeAt < 0 || o.end < closeAt {
			return fmt.Errorf("ErrClosed at %dns, close at %dns", int64(o.end), int64(closeAt))
		}
	default:
		return fmt.Errorf("unexpected error %v", err)
	}
	// A request that can never be granted ends the loop with
	// ErrExceedsLimit (and a negative cost with ErrInvalidCount) rather than
	// waiting, unless ctx had ended first.
	ctxEnded := l.cancelAt >= 0 && o.end >= l.cancelAt || l.deadline >= 0 && o.end >= l.deadline
	switch {
	case w == iterWeighted && req < 0:
		if !errors.Is(o.err, limiter.ErrInvalidCount) {
			return fmt.Errorf("a negative cost ended the loop with %v, want ErrInvalidCount", o.err)
		}
	case exceeds && !ctxEnded:
		if !errors.Is(o.err, limiter.ErrExceedsLimit) {
			return fmt.Errorf("a request of %d permits (at most %d) ended the loop with %v, want ErrExceedsLimit", req, maxReq, o.err)
		}
	}
	return nil
}
