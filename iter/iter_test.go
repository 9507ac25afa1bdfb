//lint:file-ignore SA1012 TestNilContext passes a nil Context on purpose

package iter_test

import (
	"context"
	"errors"
	stditer "iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/iter"
	"github.com/rategate/rategate/limiter"
)

// source is an upstream sequence of the values 0, 1, …, n-1 that records
// how many values it produced and whether it was asked to go on after its
// yield returned false (a wrapper that did not stop it).
type source struct {
	n        int
	pulled   int
	overrun  bool
	gap      time.Duration // sleep before producing each value after the first
	finished bool          // it ran to its end
}

func (s *source) seq() stditer.Seq[int] {
	return func(yield func(int) bool) {
		for i := range s.n {
			if i > 0 && s.gap > 0 {
				time.Sleep(s.gap)
			}
			s.pulled++
			if !yield(i) {
				return
			}
		}
		s.finished = true
	}
}

// overrunSeq is an upstream that keeps yielding after false, recording it.
func (s *source) overrunSeq() stditer.Seq[int] {
	return func(yield func(int) bool) {
		stopped := false
		for i := range s.n {
			s.pulled++
			if stopped {
				s.overrun = true
			}
			if !yield(i) {
				stopped = true
			}
		}
	}
}

func mustSlidingLog(t *testing.T, limit int, window time.Duration) *limiter.SlidingLog {
	t.Helper()
	l, err := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: limit, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustTokenBucket(t *testing.T, r limiter.Rate, burst int) *limiter.TokenBucket {
	t.Helper()
	l, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: r, Burst: burst})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustConcurrency(t *testing.T, limit int) *limiter.Concurrency {
	t.Helper()
	l, err := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func offsets(n int, f func(i int) time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// TestLimitSeedTable is the seed's table: 20 items at 5 per second through
// a sliding log yield in groups of 5 at exactly 0, 1, 2 and 3 s; and the
// same loop through the other algorithms, each at its own exact instants.
func TestLimitSeedTable(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		make func(t *testing.T) limiter.Limiter
		want []time.Duration
	}{
		{"SlidingLog 5/s", func(t *testing.T) limiter.Limiter { return mustSlidingLog(t, 5, time.Second) },
			offsets(20, func(i int) time.Duration { return time.Duration(i/5) * time.Second })},
		{"FixedWindow 5/s", func(t *testing.T) limiter.Limiter {
			l, err := limiter.NewFixedWindow(limiter.FixedWindowOptions{Limit: 5, Window: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, offsets(20, func(i int) time.Duration { return time.Duration(i/5) * time.Second })},
		{"TokenBucket 5/s burst 5", func(t *testing.T) limiter.Limiter { return mustTokenBucket(t, limiter.Per(5, time.Second), 5) },
			offsets(20, func(i int) time.Duration { return time.Duration(max(i-4, 0)) * 200 * ms })},
		{"LeakyBucket 5/s", func(t *testing.T) limiter.Limiter {
			l, err := limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(5, time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, offsets(20, func(i int) time.Duration { return time.Duration(i) * 200 * ms })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := tc.make(t)
				src := &source{n: 20}
				start := time.Now()
				var got []time.Duration
				var vals []int
				seq, errf := iter.LimitErr(t.Context(), src.seq(), lim)
				for v := range seq {
					got = append(got, time.Since(start))
					vals = append(vals, v)
				}
				if err := errf(); err != nil {
					t.Errorf("errf() = %v after a complete loop, want nil", err)
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("yield instants\n got %v\nwant %v", got, tc.want)
				}
				if !slices.Equal(vals, offsetsInts(20)) || !src.finished {
					t.Errorf("values %v (upstream finished: %v), want 0..19 in order", vals, src.finished)
				}
			})
		})
	}
}

func offsetsInts(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestLimit2SeedTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustSlidingLog(t, 5, time.Second)
		words := strings.Fields("a b c d e f g h i j k l m n o p q r s t")
		start := time.Now()
		i := 0
		for k, w := range iter.Limit2(t.Context(), slices.All(words), lim) {
			if want := time.Duration(i/5) * time.Second; time.Since(start) != want || k != i || w != words[i] {
				t.Errorf("pair %d: got (%d, %q) at %v, want (%d, %q) at %v", i, k, w, time.Since(start), i, words[i], want)
			}
			i++
		}
		if i != 20 {
			t.Errorf("%d pairs, want 20", i)
		}
	})
}

// TestBreakStopsUpstream: breaking out of any wrapper's loop stops the
// upstream at once, takes no more permits and leaves no lease held.
func TestBreakStopsUpstream(t *testing.T) {
	type loop func(ctx context.Context, seq stditer.Seq[int], lim limiter.Limiter, breakAt int) (yielded int)
	one := func(int) int { return 1 }
	for _, tc := range []struct {
		name    string
		run     loop
		permits func(yielded int) int64 // grants the limiter made
		pulled  func(breakAt int) int
	}{
		{"Limit", func(ctx context.Context, seq stditer.Seq[int], lim limiter.Limiter, at int) int {
			n := 0
			for v := range iter.Limit(ctx, seq, lim) {
				n++
				if v == at {
					break
				}
			}
			return n
		}, func(y int) int64 { return int64(y) }, func(at int) int { return at + 1 }},
		{"Limit2", func(ctx context.Context, seq stditer.Seq[int], lim limiter.Limiter, at int) int {
			n := 0
			pairs := func(yield func(int, int) bool) {
				for v := range seq {
					if !yield(v, -v) {
						return
					}
				}
			}
			for v := range iter.Limit2(ctx, pairs, lim) {
				n++
				if v == at {
					break
				}
			}
			return n
		}, func(y int) int64 { return int64(y) }, func(at int) int { return at + 1 }},
		{"Weighted", func(ctx context.Context, seq stditer.Seq[int], lim limiter.Limiter, at int) int {
			n := 0
			for v := range iter.Weighted(ctx, seq, lim, one) {
				n++
				if v == at {
					break
				}
			}
			return n
		}, func(y int) int64 { return int64(y) }, func(at int) int { return at + 1 }},
		{"Batch", func(ctx context.Context, seq stditer.Seq[int], lim limiter.Limiter, at int) int {
			n := 0
			for b := range iter.Batch(ctx, seq, lim, 2) {
				n++
				if slices.Contains(b, at) {
					break
				}
			}
			return n
		}, func(y int) int64 { return int64(y) }, func(at int) int { return at/2*2 + 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := mustConcurrency(t, 2) // a batch of 2 fits
				src := &source{n: 100}
				yielded := tc.run(t.Context(), src.seq(), lim, 6)
				if want := tc.pulled(6); src.pulled != want {
					t.Errorf("upstream produced %d values after a break at 6, want %d", src.pulled, want)
				}
				if src.finished {
					t.Error("upstream ran to its end after a break")
				}
				if st := lim.Stats(); st.Granted != tc.permits(yielded) {
					t.Errorf("limiter granted %d leases for %d yields", st.Granted, yielded)
				}
				if lim.InUse() != 0 {
					t.Errorf("%d permits still held after the loop", lim.InUse())
				}
			})
		})
	}
}

// TestCancelDuringWait: ctx cancelled while the loop waits for a permit ends
// the loop at that instant; the value that was waiting is not yielded, the
// upstream stops, and errf reports ctx's error.
func TestCancelDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustSlidingLog(t, 5, time.Second)
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(1500*time.Millisecond, cancel)
		src := &source{n: 20}
		start := time.Now()
		seq, errf := iter.LimitErr(ctx, src.seq(), lim)
		n := 0
		for range seq {
			n++
		}
		if end := time.Since(start); end != 1500*time.Millisecond {
			t.Errorf("loop ended at %v, want 1.5s (the cancel)", end)
		}
		if n != 10 || src.pulled != 11 || src.finished {
			t.Errorf("yielded %d, pulled %d (finished %v); want 10 yielded, 11 pulled", n, src.pulled, src.finished)
		}
		if err := errf(); !errors.Is(err, context.Canceled) {
			t.Errorf("errf() = %v, want context.Canceled", err)
		}
		if st := lim.Stats(); st.Granted != 10 || st.Waiters != 0 {
			t.Errorf("limiter: %+v, want 10 granted and nobody waiting", st)
		}
	})
}

// TestCancelBetweenValues: ctx done before a value's turn ends the loop even
// when a permit is free (no value is yielded after ctx ends).
func TestCancelBetweenValues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, lim := range []limiter.Limiter{nil, mustConcurrency(t, 1)} {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			src := &source{n: 10}
			seq, errf := iter.LimitErr(ctx, src.seq(), lim)
			n := 0
			for v := range seq {
				n++
				if v == 3 {
					cancel()
				}
			}
			if n != 4 || src.pulled != 5 {
				t.Errorf("lim %T: yielded %d, pulled %d; want 4 and 5", lim, n, src.pulled)
			}
			if err := errf(); !errors.Is(err, context.Canceled) {
				t.Errorf("lim %T: errf() = %v, want context.Canceled", lim, err)
			}
		}
	})
}

// TestDeadlineForeseen: when the next permit would come after ctx's
// deadline, the loop ends at once, before the deadline.
func TestDeadlineForeseen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustSlidingLog(t, 5, time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		start := time.Now()
		seq, errf := iter.LimitErr(ctx, (&source{n: 20}).seq(), lim)
		n := 0
		for range seq {
			n++
		}
		if end := time.Since(start); end != time.Second || n != 10 {
			t.Errorf("loop ended at %v after %d values, want at 1s after 10 (the 11th could only pass at 2s)", end, n)
		}
		if err := errf(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("errf() = %v, want context.DeadlineExceeded", err)
		}
	})
}

func TestLimiterClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustSlidingLog(t, 2, time.Second)
		time.AfterFunc(500*time.Millisecond, func() { lim.Close() })
		src := &source{n: 10}
		seq, errf := iter.LimitErr(t.Context(), src.seq(), lim)
		n := 0
		for range seq {
			n++
		}
		err := errf()
		if n != 2 || !errors.Is(err, limiter.ErrClosed) {
			t.Errorf("yielded %d, errf() = %v; want 2 and limiter.ErrClosed", n, err)
		}
		if err != nil && !strings.Contains(err.Error(), "value 2") {
			t.Errorf("error %q does not name the refused value's position (2)", err)
		}
		if src.pulled != 3 {
			t.Errorf("upstream produced %d values, want 3", src.pulled)
		}
	})
}

// TestConcurrencyLeaseHeldDuringBody: with a Concurrency limiter, each
// value's lease is held while the body runs and released when it returns,
// so two loops sharing a limit of 1 never run their bodies at once.
func TestConcurrencyLeaseHeldDuringBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustConcurrency(t, 1)
		var (
			mu       sync.Mutex
			inBody   int
			most     int
			order    []string
			wg       sync.WaitGroup
			loopWork = 100 * time.Millisecond
		)
		start := time.Now()
		for _, name := range []string{"a", "b"} {
			wg.Go(func() {
				for v := range iter.Limit(t.Context(), (&source{n: 3}).seq(), lim) {
					mu.Lock()
					inBody++
					most = max(most, inBody)
					if lim.InUse() != 1 {
						t.Errorf("%s%d: InUse %d in the body, want the body's lease (1)", name, v, lim.InUse())
					}
					order = append(order, name)
					mu.Unlock()
					time.Sleep(loopWork)
					mu.Lock()
					inBody--
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if most != 1 {
			t.Errorf("%d bodies ran at once, want 1", most)
		}
		if len(order) != 6 {
			t.Errorf("%d bodies ran, want 6", len(order))
		}
		if end := time.Since(start); end != 6*loopWork {
			t.Errorf("both loops took %v, want %v (one body at a time, no gap)", end, 6*loopWork)
		}
		if lim.InUse() != 0 {
			t.Errorf("%d permits held after the loops", lim.InUse())
		}
	})
}

func TestConcurrencyLeaseReleasedOnPanic(t *testing.T) {
	lim := mustConcurrency(t, 1)
	for _, name := range []string{"Limit", "Limit2", "Weighted", "Batch"} {
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("%s: recovered %v, want the body's panic", name, r)
				}
			}()
			src := (&source{n: 5}).seq()
			switch name {
			case "Limit":
				for range iter.Limit(context.Background(), src, lim) {
					panic("boom")
				}
			case "Limit2":
				for range iter.Limit2(context.Background(), slices.All([]int{1, 2, 3}), lim) {
					panic("boom")
				}
			case "Weighted":
				for range iter.Weighted(context.Background(), src, lim, func(int) int { return 1 }) {
					panic("boom")
				}
			case "Batch":
				for range iter.Batch(context.Background(), src, lim, 1) {
					panic("boom")
				}
			}
		}()
		if lim.InUse() != 0 {
			t.Errorf("%s: %d permits held after the body panicked", name, lim.InUse())
		}
	}
}

// TestWeighted: each value costs its own permits; a sliding log of 50 per
// second passes costs 10, 30 at 0, 20 at 1 s, 50 at 2 s, 10 at 3 s.
func TestWeighted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustSlidingLog(t, 50, time.Second)
		costs := []int{10, 30, 20, 50, 10}
		start := time.Now()
		var got []time.Duration
		seq, errf := iter.WeightedErr(t.Context(), slices.Values(costs), lim, func(c int) int { return c })
		for range seq {
			got = append(got, time.Since(start))
		}
		want := []time.Duration{0, 0, time.Second, 2 * time.Second, 3 * time.Second}
		if !slices.Equal(got, want) {
			t.Errorf("yield instants %v, want %v", got, want)
		}
		if err := errf(); err != nil {
			t.Errorf("errf() = %v", err)
		}
	})
}

// TestWeightedConcurrency: a value's cost is held while the body runs.
func TestWeightedConcurrency(t *testing.T) {
	lim := mustConcurrency(t, 100)
	for c := range iter.Weighted(context.Background(), slices.Values([]int{7, 100, 0, 42}), lim, func(c int) int { return c }) {
		if lim.InUse() != c {
			t.Errorf("cost %d: %d permits in use in the body", c, lim.InUse())
		}
	}
	if lim.InUse() != 0 {
		t.Errorf("%d permits held after the loop", lim.InUse())
	}
}

// TestWeightedExceedsLimit: a value that costs more than the limiter can
// ever grant ends the loop at once with ErrExceedsLimit, instead of waiting
// forever; a negative cost ends it with ErrInvalidCount, with or without a
// limiter.
func TestWeightedExceedsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			lim   limiter.Limiter
			costs []int
			want  error
			n     int
		}{
			{"over Burst", mustTokenBucket(t, limiter.Per(20, time.Second), 20), []int{5, 10, 21, 1}, limiter.ErrExceedsLimit, 2},
			{"over Limit", mustSlidingLog(t, 20, time.Second), []int{20, 21, 1}, limiter.ErrExceedsLimit, 1},
			{"negative", mustSlidingLog(t, 20, time.Second), []int{1, -1, 1}, limiter.ErrInvalidCount, 1},
			{"negative, no limiter", nil, []int{1, 2, -3, 1}, limiter.ErrInvalidCount, 2},
		} {
			start := time.Now()
			seq, errf := iter.WeightedErr(t.Context(), slices.Values(tc.costs), tc.lim, func(c int) int { return c })
			n := 0
			for range seq {
				n++
			}
			err := errf()
			if n != tc.n || !errors.Is(err, tc.want) {
				t.Errorf("%s: yielded %d, errf() = %v; want %d and %v", tc.name, n, err, tc.n, tc.want)
			}
			if time.Since(start) != 0 {
				t.Errorf("%s: the loop waited %v before failing", tc.name, time.Since(start))
			}
			if err != nil && !strings.Contains(err.Error(), "value ") {
				t.Errorf("%s: error %q does not name the value", tc.name, err)
			}
		}
	})
}

// TestBatch: slices of up to k, each costing one permit per value: with a
// sliding log of 4 per second, 7 values in batches of 3 pass as [0 1 2] at
// 0, [3 4 5] at 1 s (3 more permits: a new window) and [6] at 1 s too.
func TestBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustSlidingLog(t, 4, time.Second)
		start := time.Now()
		var got [][]int
		var at []time.Duration
		seq, errf := iter.BatchErr(t.Context(), (&source{n: 7}).seq(), lim, 3)
		for b := range seq {
			got = append(got, b)
			at = append(at, time.Since(start))
		}
		want := [][]int{{0, 1, 2}, {3, 4, 5}, {6}}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("batches %v, want %v", got, want)
		}
		if wantAt := []time.Duration{0, time.Second, time.Second}; !slices.Equal(at, wantAt) {
			t.Errorf("batch instants %v, want %v", at, wantAt)
		}
		if err := errf(); err != nil {
			t.Errorf("errf() = %v", err)
		}
	})
}

// TestBatchSmoothing is the seed's advice: 100 a second released as 20
// every 200 ms rather than 100 at once.
func TestBatchSmoothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustSlidingLog(t, 20, 200*time.Millisecond)
		start := time.Now()
		i := 0
		for b := range iter.Batch(t.Context(), (&source{n: 200}).seq(), lim, 20) {
			if want := time.Duration(i) * 200 * time.Millisecond; len(b) != 20 || b[0] != 20*i || time.Since(start) != want {
				t.Errorf("batch %d: %d values from %d at %v, want 20 from %d at %v", i, len(b), b[0], time.Since(start), 20*i, want)
			}
			i++
		}
		if i != 10 {
			t.Errorf("%d batches, want 10", i)
		}
	})
}

func TestBatchExceedsLimit(t *testing.T) {
	lim := mustSlidingLog(t, 5, time.Second)
	src := &source{n: 20}
	seq, errf := iter.BatchErr(context.Background(), src.seq(), lim, 6)
	for range seq {
		t.Error("a batch of 6 was yielded by a limiter of 5")
	}
	if err := errf(); !errors.Is(err, limiter.ErrExceedsLimit) {
		t.Errorf("errf() = %v, want limiter.ErrExceedsLimit", err)
	}
	if src.pulled != 6 {
		t.Errorf("upstream produced %d values, want 6 (one batch)", src.pulled)
	}
}

// TestBatchCancelWhileGathering: ctx ending while a slow upstream fills a
// batch ends the loop at the next value, drops the partial batch, and pulls
// nothing more.
func TestBatchCancelWhileGathering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(250*time.Millisecond, cancel)
		src := &source{n: 20, gap: 100 * time.Millisecond}
		start := time.Now()
		seq, errf := iter.BatchErr(ctx, src.seq(), mustSlidingLog(t, 10, time.Second), 5)
		for b := range seq {
			t.Errorf("batch %v yielded", b)
		}
		if end := time.Since(start); end != 300*time.Millisecond || src.pulled != 4 {
			t.Errorf("ended at %v after %d values pulled, want at 300ms after 4", end, src.pulled)
		}
		if err := errf(); !errors.Is(err, context.Canceled) {
			t.Errorf("errf() = %v, want context.Canceled", err)
		}
	})
}

// TestNilLimiter: no limit; only ctx ends the loop early.
func TestNilLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var got []int
		for v := range iter.Limit(t.Context(), (&source{n: 1000}).seq(), nil) {
			got = append(got, v)
		}
		if len(got) != 1000 || got[999] != 999 || time.Since(start) != 0 {
			t.Errorf("nil limiter: %d values in %v, want 1000 at once", len(got), time.Since(start))
		}
		var batches int
		for range iter.Batch(t.Context(), (&source{n: 1000}).seq(), nil, 7) {
			batches++
		}
		if batches != 143 {
			t.Errorf("%d batches of up to 7 from 1000, want 143", batches)
		}
	})
}

func TestInvalidArguments(t *testing.T) {
	lim := mustConcurrency(t, 1)
	check := func(name string, errf func() error, n int) {
		t.Helper()
		if n != 0 {
			t.Errorf("%s: yielded %d values", name, n)
		}
		if err := errf(); !errors.Is(err, iter.ErrInvalid) {
			t.Errorf("%s: errf() = %v, want iter.ErrInvalid", name, err)
		}
	}
	count := func(seq stditer.Seq[int]) (n int) {
		for range seq {
			n++
		}
		return n
	}
	src := (&source{n: 3}).seq()
	ctx := context.Background()
	// The Err forms report an invalid argument before any loop, too.
	for name, errf := range map[string]func() error{
		"LimitErr":    func() error { _, e := iter.LimitErr[int](ctx, nil, lim); return e() },
		"Limit2Err":   func() error { _, e := iter.Limit2Err[int, int](ctx, nil, lim); return e() },
		"WeightedErr": func() error { _, e := iter.WeightedErr(ctx, src, lim, nil); return e() },
		"BatchErr":    func() error { _, e := iter.BatchErr(ctx, src, lim, 0); return e() },
	} {
		if err := errf(); !errors.Is(err, iter.ErrInvalid) {
			t.Errorf("%s: before the loop, errf() = %v, want iter.ErrInvalid", name, err)
		}
	}
	s1, e1 := iter.LimitErr[int](ctx, nil, lim)
	check("LimitErr(nil seq)", e1, count(s1))
	s2, e2 := iter.Limit2Err[int, int](ctx, nil, lim)
	n2 := 0
	for range s2 {
		n2++
	}
	check("Limit2Err(nil seq)", e2, n2)
	s3, e3 := iter.WeightedErr(ctx, src, lim, nil)
	check("WeightedErr(nil cost)", e3, count(s3))
	s4, e4 := iter.WeightedErr[int](ctx, nil, lim, func(int) int { return 1 })
	check("WeightedErr(nil seq)", e4, count(s4))
	for _, k := range []int{0, -1} {
		s, e := iter.BatchErr(ctx, src, lim, k)
		nb := 0
		for range s {
			nb++
		}
		check("BatchErr(k<1)", e, nb)
	}
	s6, e6 := iter.BatchErr[int](ctx, nil, lim, 2)
	nb := 0
	for range s6 {
		nb++
	}
	check("BatchErr(nil seq)", e6, nb)
	// The plain forms yield nothing rather than panic.
	if n := count(iter.Limit[int](ctx, nil, lim)) + count(iter.Weighted(ctx, src, lim, nil)); n != 0 {
		t.Errorf("plain forms with invalid arguments yielded %d", n)
	}
}

// TestNilContext (issue 12, bug 10): a nil ctx is a programming error, the
// same in every package: each wrapper panics with "iter: nil Context" when
// it is called, before any loop, so nothing is pulled from the upstream and
// nothing is asked of the limiter.
func TestNilContext(t *testing.T) {
	lim := mustConcurrency(t, 3)
	src := &source{n: 3}
	one := func(int) int { return 1 }
	calls := map[string]func(){
		"Limit":       func() { iter.Limit(nil, src.seq(), lim) },
		"LimitErr":    func() { iter.LimitErr(nil, src.seq(), lim) },
		"Limit2":      func() { iter.Limit2(nil, stditer.Seq2[int, int](nil), lim) },
		"Limit2Err":   func() { iter.Limit2Err(nil, stditer.Seq2[int, int](nil), lim) },
		"Weighted":    func() { iter.Weighted(nil, src.seq(), lim, one) },
		"WeightedErr": func() { iter.WeightedErr(nil, src.seq(), lim, one) },
		"Batch":       func() { iter.Batch(nil, src.seq(), lim, 2) },
		"BatchErr":    func() { iter.BatchErr(nil, src.seq(), lim, 2) },
		"Limit-nil":   func() { iter.Limit(nil, src.seq(), nil) },
	}
	for name, call := range calls {
		got := func() (v any) {
			defer func() { v = recover() }()
			call()
			return nil
		}()
		if got != "iter: nil Context" {
			t.Errorf("%s(nil ctx) panicked with %#v, want \"iter: nil Context\"", name, got)
		}
	}
	if st := lim.Stats(); src.pulled != 0 || st.Available != 3 || st.Granted != 0 {
		t.Errorf("after the panics: %d values pulled, limiter %+v; want nothing pulled or asked", src.pulled, st)
	}
}

// TestRangeTwice: the sequence can be ranged again; errf reports the last loop.
func TestRangeTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustSlidingLog(t, 3, time.Second)
		seq, errf := iter.LimitErr(t.Context(), (&source{n: 3}).seq(), lim)
		start := time.Now()
		if got := slices.Collect(seq); !slices.Equal(got, []int{0, 1, 2}) || time.Since(start) != 0 {
			t.Errorf("first loop: %v at %v", got, time.Since(start))
		}
		if got := slices.Collect(seq); !slices.Equal(got, []int{0, 1, 2}) || time.Since(start) != time.Second {
			t.Errorf("second loop: %v ended at %v, want [0 1 2] at 1s", got, time.Since(start))
		}
		lim.Close()
		if got := slices.Collect(seq); len(got) != 0 || !errors.Is(errf(), limiter.ErrClosed) {
			t.Errorf("third loop, limiter closed: %v, errf() = %v", got, errf())
		}
		lim2 := mustSlidingLog(t, 3, time.Second)
		seq2, errf2 := iter.LimitErr(t.Context(), (&source{n: 3}).seq(), lim2)
		for range seq2 {
		}
		if errf2() != nil {
			t.Errorf("a complete loop reported %v", errf2())
		}
	})
}

// TestUpstreamOverrun: an upstream that ignores false makes the range loop
// panic (the runtime's check), and the wrapper does not hide it.
func TestUpstreamOverrun(t *testing.T) {
	src := &source{n: 5}
	defer func() {
		if recover() == nil {
			t.Error("no panic for an upstream that went on after its yield returned false")
		}
	}()
	for range iter.Limit(context.Background(), src.overrunSeq(), nil) {
		break
	}
}
