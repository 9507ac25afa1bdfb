package properties_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
	"pgregory.net/rapid"
)

// model is the reference each limiter is compared with. It is written from
// the bounds of docs/design.md, not from the implementation: its whole state is
// an explicit log of the grants (instant and size), plus the permits in use
// for a concurrency limiter, and it grants a request exactly when adding it
// to the log keeps the bound, computing with integers only.
type model struct {
	c      config
	n, d   int64   // rate in lowest terms
	log    []grant // every grant so far, in order (instants never decrease)
	inUse  int64   // concurrency
	closed bool

	granted, rejected int64 // what Stats must count
	pacerMax          int64 // what a pacer's open slot grants at most
}

func newModel(c config) *model {
	m := &model{c: c}
	if c.kind == tokenBucket || c.kind == leakyBucket {
		m.n, m.d = c.rate()
	}
	if c.kind == leakyBucket {
		m.pacerMax = c.freshAvailable()
	}
	return m
}

// decide returns what TryAcquire(k) at now must return: whether it is
// granted, the error it is refused with (nil when granted), and RetryAfter.
// closedErrs lists the errors allowed when several reasons apply.
func (m *model) decide(now time.Duration, k int) (ok bool, retry time.Duration, want error) {
	switch {
	case k < 0:
		return false, 0, limiter.ErrInvalidCount
	case k > m.c.maxRequest():
		return false, 0, limiter.ErrExceedsLimit
	case m.closed:
		return false, 0, limiter.ErrClosed
	}
	ok, retry = m.allow(int64(now), int64(k))
	if ok {
		return true, 0, nil
	}
	return false, retry, limiter.ErrLimited
}

// commit records a grant of k permits at now.
func (m *model) commit(now time.Duration, k int, who string) {
	m.granted++
	if k > 0 {
		m.log = append(m.log, grant{at: now, n: int64(k), who: who})
	}
	if m.c.kind == concurrency {
		m.inUse += int64(k)
	}
}

// allow decides k >= 1 permits at t by the bound alone.
func (m *model) allow(t, k int64) (bool, time.Duration) {
	c := m.c
	switch c.kind {
	case tokenBucket:
		// Granting k at t keeps, for every earlier grant instant s (and for
		// s = t), permits in [s, t] <= B + (n/d)(t-s), i.e.
		// over(s) = d*(A[s,t] + k - B) - n*(t-s) <= 0. If not, the same
		// request fits once the clock has moved max over(s) / n further.
		B := int64(c.burst)
		var a int64
		worst := mul(m.d, k-B) // s = t with nothing granted at t yet
		for i := len(m.log) - 1; i >= 0; i-- {
			a += m.log[i].n
			s := int64(m.log[i].at)
			if i > 0 && int64(m.log[i-1].at) == s {
				continue // take all the grants at s together
			}
			worst = max(worst, add(mul(m.d, a+k-B), -mul(m.n, t-s)))
		}
		if worst <= 0 {
			return true, 0
		}
		return false, time.Duration(ceilDiv(worst, m.n))
	case leakyBucket:
		// The grant after k_l permits at t_l comes no earlier than t_l + k_l*d/n.
		if len(m.log) == 0 {
			return true, 0
		}
		last := m.log[len(m.log)-1]
		gap := add(mul(last.n, m.d), -mul(m.n, t-int64(last.at)))
		if gap <= 0 {
			return true, 0
		}
		return false, time.Duration(ceilDiv(gap, m.n))
	case fixedWindow:
		w := int64(c.window)
		var sum int64
		for _, g := range m.log {
			if int64(g.at)/w == t/w {
				sum += g.n
			}
		}
		if sum+k <= int64(c.limit) {
			return true, 0
		}
		return false, time.Duration((t/w+1)*w - t)
	case slidingWindow:
		w, s := int64(c.window), int64(c.segments)
		cur := segmentOf(t, w, s)
		perSeg := map[int64]int64{}
		for _, g := range m.log {
			if j := segmentOf(int64(g.at), w, s); j > cur-s {
				perSeg[j] += g.n
			}
		}
		windowSum := func(last int64) int64 { // permits in segments (last-s, last]
			var sum int64
			for j, x := range perSeg {
				if j > last-s && j <= last {
					sum += x
				}
			}
			return sum
		}
		if windowSum(cur)+k <= int64(c.limit) {
			return true, 0
		}
		for j := cur + 1; j <= cur+s; j++ {
			if windowSum(j)+k <= int64(c.limit) {
				return false, time.Duration(segmentStart(j, w, s) - t)
			}
		}
		panic("model: a request of at most Limit must fit once a whole window has passed")
	case slidingLog:
		w := int64(c.window)
		var active []grant // grants in (t-w, t]
		var sum int64
		for _, g := range m.log {
			if int64(g.at) > t-w {
				active = append(active, g)
				sum += g.n
			}
		}
		if sum+k <= int64(c.limit) {
			return true, 0
		}
		for i, g := range active {
			sum -= g.n
			if i+1 < len(active) && active[i+1].at == g.at {
				continue // grants at one instant leave together
			}
			if sum+k <= int64(c.limit) {
				return false, time.Duration(int64(g.at) + w - t)
			}
		}
		panic("model: a request of at most Limit must fit once the log has emptied")
	default:
		return m.inUse+k <= int64(c.limit), 0
	}
}

// available is what Stats().Available must say: the most permits a request
// could be granted at t (for a pacer: its maximum if its slot has come, else 0).
func (m *model) available(t time.Duration) int64 {
	switch m.c.kind {
	case tokenBucket, fixedWindow, slidingWindow, slidingLog:
		var k int64
		for k < int64(m.c.maxRequest()) {
			if ok, _ := m.allow(int64(t), k+1); !ok {
				break
			}
			k++
		}
		return k
	case leakyBucket:
		if ok, _ := m.allow(int64(t), 1); ok {
			return m.pacerMax
		}
		return 0
	default:
		return max(int64(m.c.limit)-m.inUse, 0)
	}
}

func (m *model) tail() string {
	return fmtGrants(m.log[max(len(m.log)-20, 0):], 20)
}

// ---- the state machine ----

func TestModelTokenBucket(t *testing.T)   { t.Parallel(); testModel(t, tokenBucket) }
func TestModelLeakyBucket(t *testing.T)   { t.Parallel(); testModel(t, leakyBucket) }
func TestModelFixedWindow(t *testing.T)   { t.Parallel(); testModel(t, fixedWindow) }
func TestModelSlidingWindow(t *testing.T) { t.Parallel(); testModel(t, slidingWindow) }
func TestModelSlidingLog(t *testing.T)    { t.Parallel(); testModel(t, slidingLog) }
func TestModelConcurrency(t *testing.T)   { t.Parallel(); testModel(t, concurrency) }

// testModel runs a rapid state machine of TryAcquire, sleeps, Acquire with
// a deadline, Release and Close on a limiter and on the model, in a bubble
// (rapid.SyncTest: Repeat draws as it goes, so it runs where virtual time
// is), and compares every decision, RetryAfter, Acquire completion instant
// and Stats.
func testModel(t *testing.T, k kind) {
	rapid.Check(t, func(rt *rapid.T) {
		c := drawConfig(rt, k, drawOpts{})
		var progress atomic.Pointer[string]
		defer watchdog(fmt.Sprintf("%s: %v", t.Name(), c), &progress)()
		rapid.SyncTest(rt, func(st *rapid.T) {
			start := time.Now()
			lim, err := c.build()
			if err != nil {
				st.Fatalf("%v: %v", c, err)
			}
			now := func() time.Duration { return time.Since(start) }
			m := newModel(c)
			var held []limiter.Lease // concurrency leases not yet released
			var lastRetry time.Duration
			step := 0
			// begin records the step in progress for the watchdog.
			begin := func(what string) { progress.Store(&what) }
			where := func(what string) string {
				return fmt.Sprintf("%v\nstep %d at %dns: %s\nmodel log (last 20): %s", c, step, int64(now()), what, m.tail())
			}

			actions := map[string]func(*rapid.T){
				"TryAcquire": func(t *rapid.T) {
					step++
					n := drawRequest(t, c, "n", true)
					at := now()
					begin(where(fmt.Sprintf("TryAcquire(%d)", n)))
					lease := lim.TryAcquire(n)
					ok, retry, want := m.decide(at, n)
					what := where(fmt.Sprintf("TryAcquire(%d) = {Granted:%v Permits:%d Err:%v RetryAfter:%v=%dns}; model: {Granted:%v Err:%v RetryAfter:%v=%dns}",
						n, lease.Granted(), lease.Permits(), lease.Err(), lease.RetryAfter(), int64(lease.RetryAfter()), ok, want, retry, int64(retry)))
					if lease.Granted() != ok {
						t.Fatalf("decision differs from the model\n%s", what)
					}
					if ok {
						if lease.Permits() != n || lease.Err() != nil || lease.RetryAfter() != 0 {
							t.Fatalf("granted lease is inconsistent\n%s", what)
						}
						m.commit(at, n, fmt.Sprintf("try%d", step))
						if c.kind == concurrency {
							held = append(held, lease)
						}
						return
					}
					m.rejected++
					if !errorIsAny(lease.Err(), want, closedAlternative(m, n)) || lease.Permits() != 0 {
						t.Fatalf("refusal differs from the model\n%s", what)
					}
					if lease.RetryAfter() != retry {
						t.Fatalf("RetryAfter differs from the model\n%s", what)
					}
					if retry > 0 {
						lastRetry = retry
					}
				},
				"Sleep": func(t *rapid.T) {
					step++
					time.Sleep(drawSpan(t, c.unit(), "sleep"))
				},
				"SleepToRetry": func(t *rapid.T) {
					// Land exactly on, or one nanosecond either side of, the instant
					// the last refusal named.
					if lastRetry == 0 {
						t.Skip("no RetryAfter seen yet")
					}
					step++
					d := lastRetry + time.Duration(rapid.IntRange(-1, 1).Draw(t, "delta"))
					lastRetry = 0
					time.Sleep(d)
				},
				"Acquire": func(t *rapid.T) {
					step++
					n := drawRequest(t, c, "n", true)
					timeout := time.Duration(-1)
					if c.kind == concurrency || rapid.IntRange(0, 3).Draw(t, "withDeadline") > 0 {
						timeout = drawSpan(t, c.unit(), "timeout") + 1
					}
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if timeout > 0 {
						ctx, cancel = context.WithTimeout(ctx, timeout)
					}
					at := now()
					ok, retry, want := m.decide(at, n)
					begin(where(fmt.Sprintf("Acquire(%d) with timeout %dns", n, int64(timeout))))
					lease, err := lim.Acquire(ctx, n)
					end := now()
					cancel()
					what := where(fmt.Sprintf("Acquire(%d, timeout %v=%dns) = {Granted:%v Permits:%d}, %v at %dns; model at once: {Granted:%v Err:%v RetryAfter:%v=%dns}",
						n, timeout, int64(timeout), lease.Granted(), lease.Permits(), err, int64(end), ok, want, retry, int64(retry)))
					if (err == nil) != lease.Granted() || (err == nil && lease.Permits() != n) ||
						(err != nil && (lease.Err() == nil || !errors.Is(err, lease.Err()))) {
						t.Fatalf("Acquire's lease (Err %v) and error disagree\n%s", lease.Err(), what)
					}
					// What the model expects: granted now; refused at once; granted
					// after the wait RetryAfter; refused at the deadline.
					type outcome struct {
						granted bool
						at      time.Duration
						err     []error
					}
					var allowed []outcome
					qcap := c.queue.Limit
					switch {
					case ok:
						allowed = append(allowed, outcome{true, at, nil})
					case !errors.Is(want, limiter.ErrLimited):
						allowed = append(allowed, outcome{false, at, []error{want, closedAlternative(m, n)}})
					case qcap > 0 && n > qcap:
						// It cannot fit in the queue; a limiter may also see first
						// that the wait would outlast the deadline.
						allowed = append(allowed, outcome{false, at, []error{limiter.ErrQueueFull}})
						if c.kind != concurrency && timeout > 0 && timeout < retry {
							allowed = append(allowed, outcome{false, at, []error{context.DeadlineExceeded}})
						}
					case c.kind == concurrency:
						// Only a release could make room, and none comes.
						allowed = append(allowed, outcome{false, at + timeout, []error{context.DeadlineExceeded}})
					case timeout > 0 && timeout < retry:
						allowed = append(allowed, outcome{false, at, []error{context.DeadlineExceeded}})
					case timeout > 0 && timeout == retry:
						// The grant and the deadline fall on one instant: either wins.
						allowed = append(allowed, outcome{true, at + retry, nil}, outcome{false, at + retry, []error{context.DeadlineExceeded}})
					default:
						allowed = append(allowed, outcome{true, at + retry, nil})
					}
					matched := false
					for _, o := range allowed {
						if o.granted == lease.Granted() && o.at == end && (o.granted || errorIsAny(err, o.err...)) {
							matched = true
						}
					}
					if !matched {
						t.Fatalf("Acquire differs from the model; allowed outcomes %+v\n%s", allowed, what)
					}
					if lease.Granted() {
						m.commit(end, n, fmt.Sprintf("acq%d", step))
						if c.kind == concurrency {
							held = append(held, lease)
						}
					} else {
						m.rejected++
					}
				},
				"Close": func(t *rapid.T) {
					if rapid.IntRange(0, 9).Draw(t, "closeDie") > 0 {
						t.Skip("close rarely")
					}
					step++
					if err := lim.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
					if err := lim.Close(); err != nil {
						t.Fatalf("second Close: %v", err)
					}
					m.closed = true
				},
				"": func(t *rapid.T) {
					s := lim.Stats()
					wantAvail := m.available(now())
					if s.Granted != m.granted || s.Rejected != m.rejected || s.Waiters != 0 || s.Queued != 0 || s.Available != wantAvail {
						t.Fatalf("Stats %+v; model: Granted %d, Rejected %d, Available %d, nothing queued\n%s",
							s, m.granted, m.rejected, wantAvail, where("after the step"))
					}
				},
			}
			if c.kind == concurrency {
				actions["Release"] = func(t *rapid.T) {
					if len(held) == 0 {
						t.Skip("nothing held")
					}
					step++
					i := rapid.IntRange(0, len(held)-1).Draw(t, "lease")
					l := held[i]
					held = append(held[:i], held[i+1:]...)
					l.Release()
					m.inUse -= int64(l.Permits())
				}
			}
			st.Repeat(actions)
		})
	})
}

// closedAlternative is the other error a refusal may carry when two reasons
// apply: after Close, a request for more than the limiter can ever grant may
// report either.
func closedAlternative(m *model, n int) error {
	if m.closed && (n < 0 || n > m.c.maxRequest()) {
		return limiter.ErrClosed
	}
	return nil
}

// errorIsAny reports whether err matches one of the non-nil targets.
func errorIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if t != nil && errors.Is(err, t) {
			return true
		}
	}
	return false
}
