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

// This file checks limiter.Chain of 2-3 members drawn from the six limiters,
// in synctest bubbles. Chain callers and direct callers of each member run
// drawn schedules (Acquire with plain, deadline, cancelled and done contexts,
// TryAcquire, sleeps, leases held for a drawn time), and a member may be
// closed at a drawn instant. Checked afterwards:
//
//   - each member's own bound holds over every grant it made: the chain's
//     (at the instant the chain's call returned) and the direct ones;
//   - a Concurrency member never has more than Limit permits held, and after
//     every Release its InUse is at least what the recorded holders still
//     hold (a chain lease releasing a member twice shows here);
//   - each member's Stats().Granted is exactly the chain grants plus its own
//     direct grants: a refused or cancelled chain call leaves no grant behind;
//   - conservation: after every lease is released and the slowest member has
//     recovered, each member is as if new (InUse 0, Available back to its
//     capacity, nobody queued), and the chain grants at once again: a refused
//     or cancelled chain call consumed nothing, and no lease it waited for
//     was dropped (the bug fixed in "limiter: Chain gives back the lease it
//     waited for ...");
//   - liveness: every chain Acquire with a plain context is granted unless
//     it fails for a reason that can never pass (ErrClosed, ErrQueueFull,
//     ErrExceedsLimit, ErrInvalidCount); the bubble never deadlocks.

func TestChainSchedule(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		cs := chainDrawConfigs(rt)
		s := chainDrawSchedule(rt, cs)
		r := chainExecute(t, cs, s)
		if err := chainCheck(cs, s, r); err != nil {
			rt.Fatalf("%s\n%v", chainDescribe(cs, s), err)
		}
	})
}

// TestChainLiveness: a single chain user, with nobody else asking, is
// granted every Acquire with a plain context, each as soon as every member
// allows it: a Concurrency member once the user's own earlier lease is back.
func TestChainLiveness(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		cs := chainDrawConfigs(rt)
		for i := range cs {
			cs[i].c.queue = limiter.QueueOptions{}
		}
		maxN := chainMaxRequest(cs)
		steps := rapid.IntRange(1, 20).Draw(rt, "steps")
		ns := make([]int, steps)
		holds := make([]time.Duration, steps)
		u := cs[rapid.IntRange(0, len(cs)-1).Draw(rt, "unitOf")].c.unit()
		for i := range ns {
			ns[i] = rapid.IntRange(1, min(maxN, 6)).Draw(rt, "n")
			holds[i] = drawSpan(rt, u, "hold")
		}
		var (
			errs  []string
			gs    [][]grant
			conc  []int
			stats []limiter.Stats
		)
		what := func() string {
			return fmt.Sprintf("%s\nrequests %v holds %v", chainDescribe(cs, chainSchedule{}), ns, holds)
		}
		failure := runBubble(t, what, func(p *panics) {
			start := time.Now()
			ms, chain, err := chainBuild(cs)
			if err != nil {
				errs = append(errs, err.Error())
				return
			}
			gs = make([][]grant, len(ms))
			var wg sync.WaitGroup
			for i, n := range ns {
				l, err := chain.Acquire(context.Background(), n)
				at := time.Since(start)
				if err != nil || !l.Granted() || l.Permits() != n {
					errs = append(errs, fmt.Sprintf("Acquire(%d) #%d at %v: granted %v permits %d err %v", n, i, at, l.Granted(), l.Permits(), err))
					continue
				}
				for j := range ms {
					gs[j] = append(gs[j], grant{at: at, n: int64(n), who: fmt.Sprint("c", i)})
				}
				p.goSafe(&wg, "release", func() { time.Sleep(holds[i]); l.Release() })
			}
			wg.Wait()
			for _, m := range ms {
				stats = append(stats, m.lim.Stats())
				if c, ok := m.lim.(*limiter.Concurrency); ok {
					conc = append(conc, c.InUse())
				}
			}
		})
		if failure != "" {
			rt.Fatalf("%s\nthe run did not complete (a chain Acquire was never granted): %s", what(), failure)
		}
		if len(errs) > 0 {
			rt.Fatalf("%s\n%s", what(), strings.Join(errs, "\n"))
		}
		for j, m := range cs {
			if err := checkSafety(m.c, gs[j]); err != nil {
				rt.Fatalf("%s\nmember %d: %v", what(), j, err)
			}
			if stats[j].Granted != int64(steps) && !(chainLoose(m) && stats[j].Granted > int64(steps)) {
				rt.Fatalf("%s\nmember %d counted %d grants, want %d", what(), j, stats[j].Granted, steps)
			}
		}
		for _, u := range conc {
			if u != 0 {
				rt.Fatalf("%s\na Concurrency member holds %d permits after every lease was released", what(), u)
			}
		}
	})
}

// ---- configurations ----

// chainMember is one member's configuration; foreign wraps a Concurrency
// member in a Limiter from outside package limiter, so the chain takes its
// generic path (it releases that member's leases instead of refunding).
type chainMember struct {
	c       config
	foreign bool
	// slow, for a foreign member, is how long its TryAcquire takes (virtual
	// time), as a remote limiter's round trip does: other goroutines use the
	// chain's other members meanwhile. A chain that took from an earlier
	// member before asking this one, and gave back after it refused, would
	// hand back someone else's grant or over-credit a bucket (issue 12,
	// bugs 1 and 2): the members' bounds and exact grant counts show it.
	slow time.Duration
}

func chainDrawConfigs(t *rapid.T) []chainMember {
	n := rapid.IntRange(2, 3).Draw(t, "members")
	cs := make([]chainMember, n)
	for i := range cs {
		k := concurrency
		if rapid.IntRange(0, 2).Draw(t, "concurrencyDie") > 0 {
			k = kind(rapid.IntRange(0, 5).Draw(t, "kind"))
		}
		cs[i].c = drawConfig(t, k, drawOpts{maxLimit: 8})
		if (k == tokenBucket || k == leakyBucket) && 2*int64(cs[i].c.events) > int64(cs[i].c.per) {
			// A permit costs at least 2ns. A cheaper one's refund is
			// dropped (see chainLoose), and with a NewestFirst member that
			// has a waiter queued, a chain Acquire then retries every
			// nanosecond: it takes the bucket's permit, the NewestFirst
			// member refuses (no barging), the chain gives the permit back
			// (dropped), is served at once in that member's queue, and the
			// bucket now refuses for 1ns. Virtual time then crawls 1ns per
			// iteration.
			cs[i].c.per = time.Duration(2 * cs[i].c.events)
		}
		if k == concurrency {
			cs[i].foreign = rapid.IntRange(0, 3).Draw(t, "foreign") == 0
		}
		if cs[i].foreign {
			cs[i].slow = time.Duration(rapid.IntRange(0, 3).Draw(t, "slowUnits")) * cs[i].c.unit()
		}
	}
	return cs
}

// chainLoose reports whether a member may count grants that the chain gave
// back: a foreign member, whose leases the chain gives back by Release
// (the member's bound and its recovery are checked regardless). Members of
// package limiter are exact: the chain decides them under their locks at
// one instant and undoes a refused decision before any lock is released.
func chainLoose(m chainMember) bool { return m.foreign }

// chainForeign is a Concurrency seen as a Limiter from another package,
// whose TryAcquire takes slow (virtual time) before it decides.
type chainForeign struct {
	c    *limiter.Concurrency
	slow time.Duration
}

func (f chainForeign) TryAcquire(n int) limiter.Lease {
	if f.slow > 0 {
		time.Sleep(f.slow)
	}
	return f.c.TryAcquire(n)
}
func (f chainForeign) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	return f.c.Acquire(ctx, n)
}

type chainBuilt struct {
	lim    testLimiter     // the member itself
	member limiter.Limiter // what the chain holds
}

func chainBuild(cs []chainMember) ([]chainBuilt, limiter.Limiter, error) {
	ms := make([]chainBuilt, len(cs))
	ls := make([]limiter.Limiter, len(cs))
	for i, m := range cs {
		l, err := m.c.build()
		if err != nil {
			return nil, nil, fmt.Errorf("member %d: %v", i, err)
		}
		ms[i] = chainBuilt{lim: l, member: l}
		if m.foreign {
			ms[i].member = chainForeign{l.(*limiter.Concurrency), m.slow}
		}
		ls[i] = ms[i].member
	}
	return ms, limiter.Chain(ls...), nil
}

// chainMaxRequest is the most permits the chain can ever grant at once.
func chainMaxRequest(cs []chainMember) int {
	n := pacerMaxRequest
	for _, m := range cs {
		n = min(n, m.c.maxRequest())
	}
	return n
}

func chainDescribe(cs []chainMember, s chainSchedule) string {
	var sb strings.Builder
	sb.WriteString("Chain(\n")
	for i, m := range cs {
		f := ""
		if m.foreign {
			f = fmt.Sprintf(" (foreign wrapper, TryAcquire takes %v)", m.slow)
		}
		fmt.Fprintf(&sb, "  %d: %v%s\n", i, m.c, f)
	}
	sb.WriteString(")")
	if s.workers != nil {
		fmt.Fprintf(&sb, "\nclose member %d at %dns (-1: never)\n", s.closeMember, int64(s.closeAt))
		for i, w := range s.workers {
			who := "chain"
			if w.target >= 0 {
				who = fmt.Sprint("member ", w.target)
			}
			fmt.Fprintf(&sb, "worker %d on %s: %#v\n", i, who, w.ops)
		}
	}
	return sb.String()
}

// ---- schedules ----

type chainWorker struct {
	target int // -1: the chain; else a member, asked directly
	ops    []op
}

type chainSchedule struct {
	workers     []chainWorker
	closeMember int
	closeAt     time.Duration // -1: never
}

func chainDrawOp(c config, maxN int, u time.Duration) *rapid.Generator[op] {
	return rapid.Custom(func(t *rapid.T) op {
		o := drawOpShape(t, u)
		if o.kind == opSleep {
			return o
		}
		switch die := rapid.IntRange(0, 39).Draw(t, "nDie"); {
		case die < 20:
			o.n = 1
		case die < 38:
			o.n = rapid.IntRange(1, min(maxN, 8)).Draw(t, "n")
		case die < 39 && maxN < pacerMaxRequest:
			o.n = maxN + 1
		default:
			o.n = -1
		}
		o.hold = drawSpan(t, u, "hold")
		return o
	})
}

func chainDrawSchedule(t *rapid.T, cs []chainMember) chainSchedule {
	u := cs[rapid.IntRange(0, len(cs)-1).Draw(t, "unitOf")].c.unit()
	var s chainSchedule
	chains := rapid.IntRange(1, 3).Draw(t, "chainWorkers")
	direct := rapid.IntRange(0, 4).Draw(t, "directWorkers")
	for w := 0; w < chains+direct; w++ {
		target, maxN := -1, chainMaxRequest(cs)
		if w >= chains {
			target = rapid.IntRange(0, len(cs)-1).Draw(t, "target")
			maxN = cs[target].c.maxRequest()
		}
		n := rapid.IntRange(1, 25).Draw(t, "opCount")
		s.workers = append(s.workers, chainWorker{target: target, ops: rapid.SliceOfN(chainDrawOp(cs[max(target, 0)].c, maxN, u), n, n).Draw(t, "ops")})
	}
	s.closeAt, s.closeMember = -1, -1
	if rapid.IntRange(0, 3).Draw(t, "close") == 0 {
		s.closeMember = rapid.IntRange(0, len(cs)-1).Draw(t, "closeMember")
		s.closeAt = time.Duration(mulDivFloor(int64(u), rapid.Int64Range(0, 10000).Draw(t, "closePermille"), 1000))
	}
	return s
}

// ---- running ----

type chainResult struct {
	who        string
	target     int
	o          op
	start, end time.Duration
	granted    bool
	permits    int
	err        error
}

func (r chainResult) String() string {
	return fmt.Sprintf("%s (target %d) %#v from %dns to %dns: granted %v permits %d err %v",
		r.who, r.target, r.o, int64(r.start), int64(r.end), r.granted, r.permits, r.err)
}

type chainRun struct {
	failure  string
	buildErr error
	results  []chainResult
	problems []string        // found while running
	stats    []limiter.Stats // each member, when every caller had ended
	fresh    []limiter.Stats // each member, after a full recovery
	inUse    []int           // each member's InUse after the recovery (-1: not a Concurrency)
	freshTry chainResult     // chain TryAcquire(1) after the recovery
	events   []string
}

func chainExecute(t *testing.T, cs []chainMember, s chainSchedule) *chainRun {
	r := &chainRun{}
	what := func() string { return chainDescribe(cs, s) }
	r.failure = runBubble(t, what, func(p *panics) {
		start := time.Now()
		ms, chain, err := chainBuild(cs)
		if err != nil {
			r.buildErr = err
			return
		}
		now := func() time.Duration { return time.Since(start) }
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			held = make([]int64, len(ms)) // Concurrency members: permits the recorded leases hold
		)
		problem := func(format string, args ...any) {
			r.problems = append(r.problems, fmt.Sprintf("%dns: ", int64(now()))+fmt.Sprintf(format, args...))
		}
		// concOf lists the Concurrency members a lease on target holds.
		concOf := func(target int) []int {
			var out []int
			for i, m := range cs {
				if m.c.kind == concurrency && (target < 0 || target == i) {
					out = append(out, i)
				}
			}
			return out
		}
		hold := func(who string, target int, l limiter.Lease, d time.Duration) {
			mu.Lock()
			for _, i := range concOf(target) {
				held[i] += int64(l.Permits())
				r.events = append(r.events, fmt.Sprintf("%dns %s +%d on %d => %d", int64(now()), who, l.Permits(), i, held[i]))
				if held[i] > int64(cs[i].c.limit) {
					problem("member %d (Concurrency Limit %d) has %d permits held after %s's grant", i, cs[i].c.limit, held[i], who)
				}
			}
			mu.Unlock()
			p.goSafe(&wg, "release "+who, func() {
				time.Sleep(d)
				mu.Lock()
				for _, i := range concOf(target) {
					held[i] -= int64(l.Permits())
					r.events = append(r.events, fmt.Sprintf("%dns %s -%d on %d => %d", int64(now()), who, l.Permits(), i, held[i]))
				}
				mu.Unlock()
				l.Release()
				// Releases are recorded before they happen and grants after,
				// so each member holds at least what is recorded; a lease
				// released twice (or to the wrong member) shows here.
				mu.Lock()
				for _, i := range concOf(-1) {
					if in := int64(ms[i].lim.(*limiter.Concurrency).InUse()); in < held[i] {
						problem("after %s's Release, member %d has %d permits in use, fewer than the %d the recorded leases hold", who, i, in, held[i])
					}
				}
				mu.Unlock()
			})
		}
		if s.closeAt >= 0 {
			p.goSafe(&wg, "closer", func() {
				time.Sleep(s.closeAt)
				ms[s.closeMember].lim.Close()
			})
		}
		for wi, w := range s.workers {
			lim := chain
			if w.target >= 0 {
				lim = ms[w.target].member
			}
			p.goSafe(&wg, fmt.Sprint("worker ", wi), func() {
				for i, o := range w.ops {
					who := fmt.Sprintf("w%d.%d", wi, i)
					x := chainResult{who: who, target: w.target, o: o}
					var l limiter.Lease
					switch o.kind {
					case opSleep:
						time.Sleep(o.d)
						continue
					case opTry:
						x.start = now()
						l = lim.TryAcquire(o.n)
						x.end = now()
						x.err = l.Err()
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
						l, x.err = lim.Acquire(ctx, o.n)
						x.end = now()
						stop()
						cancel()
						if (x.err == nil) != l.Granted() {
							x.err = fmt.Errorf("Acquire returned a lease with Granted() %v and error %v", l.Granted(), x.err)
						}
					}
					x.granted, x.permits = l.Granted(), l.Permits()
					if l.Granted() {
						hold(who, w.target, l, o.hold)
					}
					mu.Lock()
					r.results = append(r.results, x)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for _, m := range ms {
			r.stats = append(r.stats, m.lim.Stats())
		}
		// Recover the slowest member from the largest request anyone made.
		var kmax int64 = 1
		for _, w := range s.workers {
			for _, o := range w.ops {
				kmax = max(kmax, int64(o.n))
			}
		}
		var rec time.Duration
		for _, m := range cs {
			rec = max(rec, m.c.recovery(kmax))
		}
		time.Sleep(rec)
		for _, m := range ms {
			r.fresh = append(r.fresh, m.lim.Stats())
			in := -1
			if c, ok := m.lim.(*limiter.Concurrency); ok {
				in = c.InUse()
			}
			r.inUse = append(r.inUse, in)
		}
		l := chain.TryAcquire(1)
		r.freshTry = chainResult{who: "fresh", target: -1, o: op{kind: opTry, n: 1}, start: now(), end: now(), granted: l.Granted(), permits: l.Permits(), err: l.Err()}
		l.Release()
		for _, m := range ms {
			m.lim.Close()
		}
	})
	return r
}

// ---- checking ----

func chainCheck(cs []chainMember, s chainSchedule, r *chainRun) error {
	if r.failure != "" {
		return fmt.Errorf("the run did not complete: %s\nrecorded so far:\n%s", r.failure, chainFmtResults(r.results))
	}
	if r.buildErr != nil {
		return r.buildErr
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, p := range r.problems {
		fail("%s", p)
	}
	maxN := chainMaxRequest(cs)
	closed := s.closeAt >= 0

	// Each member's grants: the chain's and its own.
	gs := make([][]grant, len(cs))
	for _, x := range r.results {
		if !x.granted {
			continue
		}
		g := grant{at: x.end, n: int64(x.permits), who: x.who}
		for i := range cs {
			if x.target < 0 || x.target == i {
				gs[i] = append(gs[i], g)
			}
		}
	}
	for i, m := range cs {
		if err := checkSafety(m.c, gs[i]); err != nil {
			fail("member %d: %v", i, err)
		}
		// A foreign member's grants that the chain gave back by Release
		// still count, and so do those of a bucket refilling faster than a
		// permit a nanosecond, whose refund the chain cannot make exactly
		// (its cost drains within the nanosecond) and drops.
		if st := r.stats[i]; (st.Granted != int64(len(gs[i])) && !(chainLoose(m) && st.Granted > int64(len(gs[i])))) || st.Waiters != 0 || st.Queued != 0 {
			fail("member %d: Stats after the run %+v; recorded %d grants (the chain's and its own), nothing queued", i, st, len(gs[i]))
		}
	}

	// Every outcome is allowed.
	for _, x := range r.results {
		bad := func(why string) { fail("%s: %s", x, why) }
		ended := x.o.kind == opAcquire && (x.o.ctx == ctxDone || (x.o.ctx != ctxPlain && x.o.d == 0))
		if ended && !x.granted && (errors.Is(x.err, context.Canceled) || errors.Is(x.err, context.DeadlineExceeded)) {
			continue // a context already ended may be reported before anything else
		}
		// A chain asks its slow foreign members (whose TryAcquire takes
		// virtual time) before the others, so its grant may return up to
		// their total slowness after it asked a member that closed since.
		slowAfter := func(target int) time.Duration {
			var d time.Duration
			for _, m := range cs {
				if target < 0 {
					d += m.slow
				}
			}
			return d
		}
		max := maxN
		if x.target >= 0 {
			max = cs[x.target].c.maxRequest()
		}
		switch {
		case x.granted && (x.permits != x.o.n || x.err != nil):
			bad("granted lease with other permits or an error")
		case x.granted && (x.o.n < 0 || x.o.n > max):
			bad("granted a request that can never be granted")
		case x.granted && closed && (x.target < 0 || x.target == s.closeMember) && x.end > s.closeAt+slowAfter(x.target):
			bad("granted after its member was closed")
		case x.granted:
		case x.err == nil || x.permits != 0:
			bad("refused lease without an error, or with permits")
		case x.o.n < 0 && !errors.Is(x.err, limiter.ErrInvalidCount):
			bad("want ErrInvalidCount")
		case x.o.n > max && x.target >= 0 && !errors.Is(x.err, limiter.ErrExceedsLimit):
			bad("want ErrExceedsLimit")
		case x.o.n > max:
			// The chain asks its members in order: one before the member
			// that can never grant n may refuse, queue or wait first.
			if !errors.Is(x.err, limiter.ErrExceedsLimit) && !errors.Is(x.err, limiter.ErrQueueFull) && !errors.Is(x.err, limiter.ErrClosed) &&
				!errors.Is(x.err, limiter.ErrLimited) && !errors.Is(x.err, context.Canceled) && !errors.Is(x.err, context.DeadlineExceeded) {
				bad("unexpected error for more than a member can ever grant")
			}
		case errors.Is(x.err, limiter.ErrClosed) && !closed:
			bad("ErrClosed, but nothing was closed")
		case x.o.kind == opTry && x.o.n >= 0 && x.o.n <= max && !errors.Is(x.err, limiter.ErrLimited) && !errors.Is(x.err, limiter.ErrClosed):
			bad("TryAcquire refused for an unexpected reason")
		case x.o.kind == opAcquire && x.o.ctx == ctxPlain && x.o.n >= 0 && x.o.n <= max &&
			!errors.Is(x.err, limiter.ErrClosed) && !errors.Is(x.err, limiter.ErrQueueFull):
			bad("a plain Acquire failed although it could be granted in time")
		case (errors.Is(x.err, context.Canceled) || errors.Is(x.err, context.DeadlineExceeded)) && x.o.ctx == ctxPlain:
			bad("a context error without a context that ends")
		}
	}

	// Conservation: as if new after everything was released and recovered.
	for i, m := range cs {
		if r.inUse[i] > 0 {
			fail("member %d (Concurrency) still has %d permits in use after every lease was released: a lease was dropped\nevents: %s",
				i, r.inUse[i], strings.Join(r.events, "; "))
		}
		if closed && i == s.closeMember {
			continue
		}
		if st := r.fresh[i]; st.Available != m.c.freshAvailable() || st.Waiters != 0 || st.Queued != 0 {
			fail("member %d not as new after every lease was released and a full recovery: Stats %+v, want Available %d", i, st, m.c.freshAvailable())
		}
	}
	if !closed && !r.freshTry.granted {
		fail("the chain is not as new after a full recovery: %s", r.freshTry)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w\nresults:\n%s", errors.Join(errs...), chainFmtResults(r.results))
	}
	return nil
}

func chainFmtResults(rs []chainResult) string {
	rs = slices.Clone(rs)
	slices.SortStableFunc(rs, func(a, b chainResult) int { return int(a.end - b.end) })
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
