package properties_test

// Properties of channel.Chan (package channel), proved against every
// limiter of package limiter:
//
//   - TestChannelLeases (a rapid state machine in a synctest bubble): at
//     every grant and every release, the Chan never buffers more items than
//     there are leases outstanding; after every step, once every goroutine
//     has settled, the leases outstanding
//     (granted by the limiter and not yet released, counted by a wrapping
//     limiter) number exactly the items buffered (Chan.Len, and the model's
//     count), and their permits are the buffered items' weights; no lease is
//     ever released twice; receives come out in FIFO order (items whose
//     sends completed in an earlier step come out before later ones); a
//     Concurrency limiter's bound holds at every grant; after Close and
//     Drain every lease ever granted has been released exactly once and
//     every goroutine (senders, receivers, an Out view) has ended; and the
//     grants keep the limiter's N-per-M bound (checkSafety).
//   - TestChannelSendBound (draw first, run, check outside): producers send
//     drawn weights through one Chan while a consumer receives with drawn
//     pauses and the Chan is closed at a drawn instant; the grants keep the
//     limiter's bound over every window, a Concurrency limiter's permits in
//     use never exceed its limit, each producer's items arrive in the order
//     sent, every item sent is received or drained exactly once, every
//     lease is released exactly once, and at every grant and release the
//     Chan buffers no more items than there are leases outstanding.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/channel"
	"github.com/rategate/rategate/limiter"
	"pgregory.net/rapid"
)

// chanObserver wraps a limiter and counts the leases it grants and their
// releases. Its count of outstanding permits is taken after the inner grant
// and given back before the inner release, so it never exceeds the real one.
type chanObserver struct {
	inner limiter.Limiter
	start time.Time
	limit int64      // concurrency limit to check at every grant; 0: none
	len   func() int // the Chan's Len, checked at every grant and release

	mu          sync.Mutex
	grants      []grant
	releases    []int // per lease id: times released
	weights     []int // per lease id: permits
	outstanding int
	permits     int64
	violations  []string
}

type chanRelease struct {
	o     *chanObserver
	id    int
	inner limiter.Lease
}

func (r chanRelease) ReleasePermits(int) {
	o := r.o
	o.mu.Lock()
	o.releases[r.id]++
	if o.releases[r.id] > 1 {
		o.violations = append(o.violations, fmt.Sprintf("lease %d released %d times", r.id, o.releases[r.id]))
	} else {
		o.outstanding--
		o.permits -= int64(o.weights[r.id])
	}
	o.checkLen("release")
	o.mu.Unlock()
	r.inner.Release()
}

func (o *chanObserver) wrap(l limiter.Lease) limiter.Lease {
	if !l.Granted() {
		return l
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	id := len(o.releases)
	o.releases = append(o.releases, 0)
	o.weights = append(o.weights, l.Permits())
	o.outstanding++
	o.permits += int64(l.Permits())
	o.grants = append(o.grants, grant{at: time.Since(o.start), n: int64(l.Permits()), who: fmt.Sprintf("lease%d", id)})
	o.checkLen("grant")
	if o.limit > 0 && o.permits > o.limit {
		o.violations = append(o.violations, fmt.Sprintf("at %v: %d permits held by buffered items, over the limit %d", time.Since(o.start), o.permits, o.limit))
	}
	return limiter.NewLease(l.Permits(), chanRelease{o, id, l})
}

// checkLen records a violation if the Chan buffers more items than the
// leases outstanding. Called with o.mu held: a send's grant is recorded
// before its item is buffered, and a receive takes the item out before it
// releases the lease, so under o.mu the Chan can never be seen holding an
// item without its lease.
func (o *chanObserver) checkLen(when string) {
	if o.len == nil {
		return
	}
	if n := o.len(); n > o.outstanding {
		o.violations = append(o.violations, fmt.Sprintf("at a %s at %v: %d items buffered but only %d leases outstanding", when, time.Since(o.start), n, o.outstanding))
	}
}

func (o *chanObserver) TryAcquire(n int) limiter.Lease { return o.wrap(o.inner.TryAcquire(n)) }

func (o *chanObserver) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	l, err := o.inner.Acquire(ctx, n)
	return o.wrap(l), err
}

// state returns the outstanding leases and permits and the violations seen.
func (o *chanObserver) state() (int, int64, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.outstanding, o.permits, slices.Clone(o.violations)
}

// allReleasedOnce reports leases not released exactly once.
func (o *chanObserver) allReleasedOnce() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for id, n := range o.releases {
		if n != 1 {
			return fmt.Errorf("lease %d (%d permits) released %d times, want exactly once", id, o.weights[id], n)
		}
	}
	return nil
}

// chanNewObserved builds c's limiter wrapped in an observer, with the time
// origin read right before the limiter is made.
func chanNewObserved(c config) (*chanObserver, testLimiter, error) {
	start := time.Now()
	lim, err := c.build()
	if err != nil {
		return nil, nil, err
	}
	o := &chanObserver{inner: lim, start: start}
	if c.kind == concurrency {
		o.limit = int64(c.limit)
	}
	return o, lim, nil
}

// chanDrawKind draws one of the six limiters.
func chanDrawKind(t *rapid.T) kind {
	return rapid.SampledFrom([]kind{tokenBucket, leakyBucket, fixedWindow, slidingWindow, slidingLog, concurrency}).Draw(t, "kind")
}

// chanWeight draws an item's weight: mostly 1, sometimes 0 or up to what the
// limiter can grant at once (at most 4, for a pacer).
func chanWeight(t *rapid.T, c config, label string) int {
	switch die := rapid.IntRange(0, 9).Draw(t, label+"Die"); {
	case die < 6:
		return 1
	case die < 7:
		return 0
	}
	return rapid.IntRange(1, min(c.requestScale(), 4)).Draw(t, label)
}

// chanPending is a Send or Recv running on its own goroutine.
type chanPending struct {
	id     int // send: the item; recv: -1
	weight int
	cancel context.CancelFunc
	done   bool
	err    error
	got    int // recv: the item received
}

func TestChannelLeases(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		k := chanDrawKind(rt)
		c := drawConfig(rt, k, drawOpts{maxLimit: 8})
		rapid.SyncTest(rt, func(st *rapid.T) {
			chanLeasesMachine(st, c)
		})
	})
}

func chanLeasesMachine(st *rapid.T, c config) {
	obs, lim, err := chanNewObserved(c)
	if err != nil {
		st.Fatalf("%v: %v", c, err)
	}
	ch := channel.New[int](obs)
	obs.len = ch.Len

	var (
		mu       sync.Mutex // guards the pendings' fields written by their goroutines
		sends    []*chanPending
		recvs    []*chanPending
		batches  [][]int         // model: buffered items, in batches of equal send-completion step
		weightOf = map[int]int{} // item -> weight
		next     int
		closed   bool
		wg       sync.WaitGroup
		view     <-chan int
		viewStop context.CancelFunc
		log      []string
	)
	where := func() string { return fmt.Sprintf("%v\nsteps: %v", c, log) }
	modelLen := func() int {
		n := 0
		for _, b := range batches {
			n += len(b)
		}
		return n
	}
	// take removes v from the model, which must hold it in its first
	// non-empty batch (FIFO).
	take := func(v int, how string) {
		for len(batches) > 0 && len(batches[0]) == 0 {
			batches = batches[1:]
		}
		if len(batches) == 0 || !slices.Contains(batches[0], v) {
			st.Fatalf("%s received item %d, not one of the oldest buffered %v (FIFO)\n%s", how, v, batches, where())
		}
		i := slices.Index(batches[0], v)
		batches[0] = slices.Delete(batches[0], i, i+1)
	}
	// settle lets every goroutine block, then folds finished operations into
	// the model and checks the invariant.
	settle := func() {
		synctest.Wait()
		mu.Lock()
		var batch []int
		keep := sends[:0]
		for _, p := range sends {
			if !p.done {
				keep = append(keep, p)
				continue
			}
			if p.err == nil {
				batch = append(batch, p.id)
			} else if !errors.Is(p.err, channel.ErrClosed) && !errors.Is(p.err, context.Canceled) && !errors.Is(p.err, limiter.ErrQueueFull) {
				st.Fatalf("Send(%d, weight %d): unexpected error %v\n%s", p.id, p.weight, p.err, where())
			} else if errors.Is(p.err, channel.ErrClosed) && !closed {
				st.Fatalf("Send(%d) failed with ErrClosed on an open Chan\n%s", p.id, where())
			}
			p.cancel()
		}
		sends = keep
		if len(batch) > 0 {
			batches = append(batches, batch)
		}
		// Receives that finished now may have taken items sent in this step.
		keepR := recvs[:0]
		var got []int
		closedErrs := 0
		for _, p := range recvs {
			if !p.done {
				keepR = append(keepR, p)
				continue
			}
			p.cancel()
			switch {
			case p.err == nil:
				got = append(got, p.got)
			case errors.Is(p.err, channel.ErrClosed):
				closedErrs++
			case errors.Is(p.err, context.Canceled):
			default:
				st.Fatalf("Recv: unexpected error %v\n%s", p.err, where())
			}
		}
		recvs = keepR
		mu.Unlock()
		// Several receives finished in one step: they took the oldest items,
		// in some order among themselves.
		slices.SortFunc(got, func(a, b int) int { return chanBatchOf(batches, a) - chanBatchOf(batches, b) })
		for _, v := range got {
			take(v, "Recv")
		}
		if closedErrs > 0 && (!closed || modelLen() > 0) {
			st.Fatalf("Recv failed with ErrClosed while closed=%v and %d items buffered\n%s", closed, modelLen(), where())
		}
		out, permits, viol := obs.state()
		if len(viol) > 0 {
			st.Fatalf("%v\n%s", viol, where())
		}
		want := modelLen()
		var wantPermits int64
		for _, b := range batches {
			for _, v := range b {
				wantPermits += int64(weightOf[v])
			}
		}
		if l := ch.Len(); out != l || l != want || permits != wantPermits {
			st.Fatalf("outstanding leases %d (%d permits), Len %d, model %d items (%d permits): they must be equal\n%s",
				out, permits, l, want, wantPermits, where())
		}
	}

	defer func() {
		// Whatever happened, end every goroutine so the bubble can end.
		ch.Close()
		ch.Drain()
		mu.Lock()
		for _, p := range append(slices.Clone(sends), recvs...) {
			p.cancel()
		}
		mu.Unlock()
		if viewStop != nil {
			viewStop()
		}
		wg.Wait()
		lim.Close()
	}()

	st.Repeat(map[string]func(*rapid.T){
		"Send": func(t *rapid.T) {
			id, w := next, chanWeight(t, c, "w")
			next++
			weightOf[id] = w
			ctx, cancel := context.WithCancel(context.Background())
			p := &chanPending{id: id, weight: w, cancel: cancel}
			log = append(log, fmt.Sprintf("Send(%d, w%d)", id, w))
			mu.Lock()
			sends = append(sends, p)
			mu.Unlock()
			wg.Go(func() {
				err := ch.SendN(ctx, id, w)
				mu.Lock()
				p.done, p.err = true, err
				mu.Unlock()
			})
			settle()
		},
		"TrySend": func(t *rapid.T) {
			id, w := next, chanWeight(t, c, "w")
			next++
			weightOf[id] = w
			err := ch.TrySendN(id, w)
			log = append(log, fmt.Sprintf("TrySend(%d, w%d)=%v", id, w, err))
			var le *channel.LimitError
			switch {
			case err == nil:
				if closed {
					t.Fatalf("TrySend succeeded on a closed Chan\n%s", where())
				}
				batches = append(batches, []int{id})
			case errors.Is(err, channel.ErrClosed):
				if !closed {
					t.Fatalf("TrySend: ErrClosed on an open Chan\n%s", where())
				}
			case errors.As(err, &le):
				if le.RetryAfter() < 0 {
					t.Fatalf("negative RetryAfter %v", le.RetryAfter())
				}
			default:
				t.Fatalf("TrySend: unexpected error %v\n%s", err, where())
			}
			settle()
		},
		"Recv": func(t *rapid.T) {
			if view != nil {
				t.Skip("an Out view receives: Recv would race it for the oldest item")
			}
			ctx, cancel := context.WithCancel(context.Background())
			p := &chanPending{id: -1, cancel: cancel}
			log = append(log, "Recv")
			mu.Lock()
			recvs = append(recvs, p)
			mu.Unlock()
			wg.Go(func() {
				v, err := ch.Recv(ctx)
				mu.Lock()
				p.done, p.err, p.got = true, err, v
				mu.Unlock()
			})
			settle()
		},
		"TryRecv": func(t *rapid.T) {
			if view != nil {
				t.Skip("an Out view receives: TryRecv would race it for the oldest item")
			}
			v, ok := ch.TryRecv()
			log = append(log, fmt.Sprintf("TryRecv=%d,%v", v, ok))
			if ok {
				take(v, "TryRecv")
			}
			settle()
		},
		"View": func(t *rapid.T) {
			// Receive one item, if the view offers one, through a select.
			if view == nil {
				mu.Lock()
				n := len(recvs)
				mu.Unlock()
				if n > 0 {
					t.Skip("Recv calls pending: the view would race them for the oldest item")
				}
				var ctx context.Context
				ctx, viewStop = context.WithCancel(context.Background())
				view = ch.Out(ctx)
				log = append(log, "Out")
				settle()
			}
			select {
			case v, ok := <-view:
				log = append(log, fmt.Sprintf("<-view=%d,%v", v, ok))
				if ok {
					take(v, "the Out view")
				} else {
					view, viewStop = nil, nil
				}
			default:
				log = append(log, "<-view: nothing")
			}
			settle()
		},
		"StopView": func(t *rapid.T) {
			if view == nil {
				t.Skip("no view")
			}
			viewStop()
			for v := range view { // the hand-off and the cancel race; either is fine
				take(v, "the Out view while it stopped")
			}
			log = append(log, "StopView")
			view, viewStop = nil, nil
			settle()
		},
		"Cancel": func(t *rapid.T) {
			mu.Lock()
			all := append(slices.Clone(sends), recvs...)
			mu.Unlock()
			if len(all) == 0 {
				t.Skip("nothing pending")
			}
			i := rapid.IntRange(0, len(all)-1).Draw(t, "which")
			log = append(log, fmt.Sprintf("Cancel(%d)", all[i].id))
			all[i].cancel()
			settle()
		},
		"Sleep": func(t *rapid.T) {
			d := drawSpan(t, c.unit(), "sleep")
			log = append(log, fmt.Sprintf("Sleep(%v)", d))
			time.Sleep(d)
			settle()
		},
		"Close": func(t *rapid.T) {
			log = append(log, "Close")
			if err := ch.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			closed = true
			settle()
			mu.Lock()
			n := len(sends)
			mu.Unlock()
			if n > 0 {
				t.Fatalf("%d sends still pending after Close\n%s", n, where())
			}
		},
		"Drain": func(t *rapid.T) {
			before := modelLen()
			n := ch.Drain()
			log = append(log, fmt.Sprintf("Drain=%d", n))
			if n != before && !(view != nil && n == before-1) {
				t.Fatalf("Drain discarded %d items, model holds %d (view: %v)\n%s", n, before, view != nil, where())
			}
			batches = nil
			settle()
		},
	})

	// Cleanup in the open: Close, Drain, end every goroutine; then every
	// lease ever granted was released exactly once.
	ch.Close()
	closed = true
	ch.Drain()
	batches = nil
	if viewStop != nil {
		viewStop()
		for range view {
		}
	}
	mu.Lock()
	for _, p := range recvs {
		p.cancel()
	}
	mu.Unlock()
	wg.Wait()
	settle()
	if err := obs.allReleasedOnce(); err != nil {
		st.Fatalf("%v\n%s", err, where())
	}
	if err := checkSafety(c, obs.grants); err != nil {
		st.Fatalf("the sends broke the limiter's bound: %v\n%s", err, where())
	}
}

// chanBatchOf returns the index of the batch holding v, or a large number.
func chanBatchOf(batches [][]int, v int) int {
	for i, b := range batches {
		if slices.Contains(b, v) {
			return i
		}
	}
	return len(batches)
}

// ---- TestChannelSendBound ----

type chanProducer struct {
	weights []int
	pause   []time.Duration // before each send
	timeout time.Duration   // 0: context.Background
}

type chanPlan struct {
	producers []chanProducer
	recvPause []time.Duration // the consumer's pauses, cycled
	closeAt   time.Duration
	useView   bool
}

type chanItem struct{ p, i int }

type chanOutcome struct {
	sent     map[chanItem]bool // Send returned nil
	received []chanItem
	drained  int
	errs     []string
}

func TestChannelSendBound(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		k := chanDrawKind(rt)
		c := drawConfig(rt, k, drawOpts{maxLimit: 10})
		u := c.unit()
		var plan chanPlan
		for p := range rapid.IntRange(1, 4).Draw(rt, "producers") {
			var pr chanProducer
			for i := range rapid.IntRange(1, 12).Draw(rt, fmt.Sprintf("items%d", p)) {
				pr.weights = append(pr.weights, chanWeight(rt, c, fmt.Sprintf("w%d.%d", p, i)))
				pr.pause = append(pr.pause, drawSpan(rt, u/4, "pause"))
			}
			if rapid.IntRange(0, 3).Draw(rt, "withTimeout") == 0 {
				pr.timeout = drawSpan(rt, u, "timeout") + 1
			}
			plan.producers = append(plan.producers, pr)
		}
		for range rapid.IntRange(1, 4).Draw(rt, "recvPauses") {
			plan.recvPause = append(plan.recvPause, drawSpan(rt, u/2, "recvPause"))
		}
		plan.closeAt = drawSpan(rt, 4*u, "closeAt")
		plan.useView = rapid.Bool().Draw(rt, "useView")

		var obs *chanObserver
		var out chanOutcome
		failure := runBubble(t, func() string { return fmt.Sprintf("%v %+v", c, plan) }, func(pn *panics) {
			var lim testLimiter
			var err error
			obs, lim, err = chanNewObserved(c)
			if err != nil {
				pn.add(err.Error())
				return
			}
			defer lim.Close()
			out = chanRunPlan(pn, obs, plan)
		})
		if failure != "" {
			rt.Fatalf("%v\n%s", c, failure)
		}
		if len(out.errs) > 0 {
			rt.Fatalf("%v\n%v", c, out.errs)
		}
		if err := checkSafety(c, obs.grants); err != nil {
			rt.Fatalf("%v: the sends broke the limiter's bound: %v", c, err)
		}
		if _, _, viol := obs.state(); len(viol) > 0 {
			rt.Fatalf("%v: %v", c, viol)
		}
		if err := obs.allReleasedOnce(); err != nil {
			rt.Fatalf("%v: %v", c, err)
		}
		if got := len(obs.grants); got < len(out.sent) {
			rt.Fatalf("%v: %d leases granted for %d items sent", c, got, len(out.sent))
		}
		last := map[int]int{}
		seen := map[chanItem]bool{}
		for _, it := range out.received {
			if !out.sent[it] || seen[it] {
				rt.Fatalf("%v: item %v received but not sent, or twice", c, it)
			}
			seen[it] = true
			if l, ok := last[it.p]; ok && l >= it.i {
				rt.Fatalf("%v: producer %d's item %d received after its item %d (FIFO)", c, it.p, it.i, l)
			}
			last[it.p] = it.i
		}
		if len(out.received)+out.drained != len(out.sent) {
			rt.Fatalf("%v: %d sent, %d received and %d drained", c, len(out.sent), len(out.received), out.drained)
		}
	})
}

func chanRunPlan(pn *panics, obs *chanObserver, plan chanPlan) chanOutcome {
	ch := channel.New[chanItem](obs)
	obs.mu.Lock()
	obs.len = ch.Len
	obs.mu.Unlock()
	out := chanOutcome{sent: map[chanItem]bool{}}
	var mu sync.Mutex
	fail := func(format string, args ...any) {
		mu.Lock()
		out.errs = append(out.errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for p, pr := range plan.producers {
		pn.goSafe(&wg, fmt.Sprintf("producer %d", p), func() {
			ctx := context.Background()
			if pr.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, pr.timeout)
				defer cancel()
			}
			for i, w := range pr.weights {
				time.Sleep(pr.pause[i])
				err := ch.SendN(ctx, chanItem{p, i}, w)
				switch {
				case err == nil:
					mu.Lock()
					out.sent[chanItem{p, i}] = true
					mu.Unlock()
				case errors.Is(err, limiter.ErrQueueFull):
					// a capped queue refused this one; try the next
				case errors.Is(err, channel.ErrClosed), errors.Is(err, context.DeadlineExceeded):
					return
				default:
					fail("producer %d item %d: %v", p, i, err)
					return
				}
			}
		})
	}
	pn.goSafe(&wg, "closer", func() {
		time.Sleep(plan.closeAt)
		ch.Close()
	})
	var cw sync.WaitGroup
	pn.goSafe(&cw, "consumer", func() {
		recv := func(v chanItem) {
			mu.Lock()
			out.received = append(out.received, v)
			mu.Unlock()
		}
		if plan.useView {
			i := 0
			for v := range ch.Out(context.Background()) {
				recv(v)
				time.Sleep(plan.recvPause[i%len(plan.recvPause)])
				i++
			}
			return
		}
		for i := 0; ; i++ {
			v, err := ch.Recv(context.Background())
			if errors.Is(err, channel.ErrClosed) {
				return
			}
			if err != nil {
				fail("Recv: %v", err)
				return
			}
			recv(v)
			time.Sleep(plan.recvPause[i%len(plan.recvPause)])
		}
	})
	wg.Wait()
	cw.Wait()
	out.drained = ch.Drain()
	if ch.Len() != 0 {
		fail("Len %d after the consumer saw the Chan closed and empty", ch.Len())
	}
	return out
}
