package properties_test

import (
	"fmt"
	"sort"
	"time"
)

// This file holds the bounds of docs/design.md as checks over a run's grants
// (safety), and the most grants each bound allows in [0, D] (the reference
// for liveness). All arithmetic is exact, on integers.

// checkSafety checks the bound of c's algorithm over every window of the
// grants. It returns nil or a description of a violating window. (The
// concurrency bound is checked while the run is recorded; see schedule_test.go.)
func checkSafety(c config, gs []grant) error {
	gs = sortGrants(gs)
	switch c.kind {
	case tokenBucket:
		n, d := c.rate()
		return checkTokenBucket(gs, n, d, int64(c.burst))
	case leakyBucket:
		n, d := c.rate()
		return checkPacer(gs, n, d)
	case fixedWindow:
		return checkFixedWindow(gs, int64(c.limit), int64(c.window))
	case slidingWindow:
		return checkSlidingWindow(gs, int64(c.limit), int64(c.window), int64(c.segments))
	case slidingLog:
		return checkSlidingLog(gs, int64(c.limit), int64(c.window))
	}
	return nil
}

// instant is the permits granted at one instant, with the grants' indices.
type instant struct {
	at      int64
	permits int64
	first   int // index in the sorted grants
	last    int
}

func byInstant(gs []grant) []instant {
	var out []instant
	for i, g := range gs {
		if len(out) > 0 && out[len(out)-1].at == int64(g.at) {
			out[len(out)-1].permits += g.n
			out[len(out)-1].last = i
			continue
		}
		out = append(out, instant{at: int64(g.at), permits: g.n, first: i, last: i})
	}
	return out
}

// checkTokenBucket: for every pair of grant instants t_i <= t_j, the permits
// granted in [t_i, t_j] are at most B + (n/d)*(t_j - t_i). With prefix sums P
// over instants, that is d*(P_j - P_{i-1} - B) <= n*(t_j - t_i), i.e.
// (d*P_j - n*t_j) - (d*P_{i-1} - n*t_i) <= d*B: keep the least
// d*P_{i-1} - n*t_i over i <= j, which checks every pair in one pass.
func checkTokenBucket(gs []grant, n, d, burst int64) error {
	ins := byInstant(gs)
	var prefix int64 // P_{j-1}
	best, bestAt := int64(0), -1
	for j, in := range ins {
		left := add(mul(d, prefix), -mul(n, in.at)) // d*P_{j-1} - n*t_j: the pair starting at j
		if bestAt < 0 || left < best {
			best, bestAt = left, j
		}
		prefix = add(prefix, in.permits)
		right := add(mul(d, prefix), -mul(n, in.at))
		if add(right, -best) > mul(d, burst) {
			i := ins[bestAt]
			sum := int64(0)
			for _, x := range ins[bestAt : j+1] {
				sum += x.permits
			}
			return fmt.Errorf("token bucket bound broken: %d permits granted in [%dns, %dns] (length %v), more than Burst %d + %d/%dns * %dns; grants there: %s",
				sum, i.at, in.at, time.Duration(in.at-i.at), burst, n, d, in.at-i.at, fmtGrants(gs[i.first:in.last+1], 40))
		}
	}
	return nil
}

// checkPacer: consecutive grants (k_i permits at t_i, then t_j) are at least
// k_i/Rate apart: n*(t_j - t_i) >= k_i*d.
func checkPacer(gs []grant, n, d int64) error {
	for j := 1; j < len(gs); j++ {
		a, b := gs[j-1], gs[j]
		if mul(n, int64(b.at-a.at)) < mul(a.n, d) {
			return fmt.Errorf("pacer bound broken: %s then %s, %v apart, want at least %d*%dns/%d = %v",
				a, b, b.at-a.at, a.n, d, n, time.Duration(ceilDiv(mul(a.n, d), n)))
		}
	}
	return nil
}

// checkFixedWindow: at most limit permits in each aligned window
// [k*W, (k+1)*W) measured from the limiter's creation.
func checkFixedWindow(gs []grant, limit, w int64) error {
	sums := map[int64]int64{}
	for _, g := range gs {
		k := int64(g.at) / w
		sums[k] += g.n
		if sums[k] > limit {
			var in []grant
			for _, h := range gs {
				if int64(h.at)/w == k {
					in = append(in, h)
				}
			}
			return fmt.Errorf("fixed window bound broken: %d permits in window [%dns, %dns), limit %d: %s",
				sums[k], k*w, (k+1)*w, limit, fmtGrants(in, 40))
		}
	}
	return nil
}

// segmentOf returns the segment holding instant t when boundaries are at
// ceil(i*w/s) ns: the largest i with ceil(i*w/s) <= t, which is
// floor(t*s/w) (for integer t, ceil(x) <= t iff x <= t). It checks the
// boundaries around it too, so the formula is not taken on trust.
func segmentOf(t, w, s int64) int64 {
	i := mulDivFloor(t, s, w)
	if segmentStart(i, w, s) > t || segmentStart(i+1, w, s) <= t {
		panic(fmt.Sprintf("properties_test: segmentOf(%d, %d, %d) = %d is wrong", t, w, s, i))
	}
	return i
}

// segmentStart is the boundary ceil(i*w/s).
func segmentStart(i, w, s int64) int64 { return mulDivCeil(i, w, s) }

// checkSlidingWindow: at most limit permits in every run of s consecutive
// segments, whose boundaries are at ceil(i*w/s) ns from the creation.
func checkSlidingWindow(gs []grant, limit, w, s int64) error {
	sums := map[int64]int64{}
	for _, g := range gs {
		sums[segmentOf(int64(g.at), w, s)] += g.n
	}
	segs := make([]int64, 0, len(sums))
	for k := range sums {
		segs = append(segs, k)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i] < segs[j] })
	// Every run of s segments [a, a+s) that holds a grant: the worst ones end at a non-empty segment.
	lo, total := 0, int64(0)
	for _, k := range segs {
		total += sums[k]
		for segs[lo] <= k-s {
			total -= sums[segs[lo]]
			lo++
		}
		if total > limit {
			first := k - s + 1
			var in []grant
			for _, g := range gs {
				if j := segmentOf(int64(g.at), w, s); j >= first && j <= k {
					in = append(in, g)
				}
			}
			return fmt.Errorf("sliding window bound broken: %d permits in segments %d..%d = [%dns, %dns), limit %d: %s",
				total, first, k, segmentStart(max(first, 0), w, s), segmentStart(k+1, w, s), limit, fmtGrants(in, 40))
		}
	}
	return nil
}

// checkSlidingLog: at most limit permits in ANY window [t, t+w). The worst
// windows start at a grant, so check the window starting at each grant.
func checkSlidingLog(gs []grant, limit, w int64) error {
	ins := byInstant(gs)
	hi, total := 0, int64(0)
	for lo := range ins {
		for hi < len(ins) && ins[hi].at < ins[lo].at+w {
			total += ins[hi].permits
			hi++
		}
		if total > limit {
			return fmt.Errorf("sliding log bound broken: %d permits in [%dns, %dns), limit %d: %s",
				total, ins[lo].at, ins[lo].at+w, limit, fmtGrants(gs[ins[lo].first:ins[hi-1].last+1], 40))
		}
		total -= ins[lo].permits
	}
	return nil
}

// ---- liveness: the most each bound allows ----

// maxUnitGrants returns the most grants of one permit that c's bound allows
// in [0, D] (from the limiter's creation), for a concurrency limiter with
// `workers` callers each holding a lease for `hold`.
func maxUnitGrants(c config, D time.Duration, workers int, hold time.Duration) int64 {
	t := int64(D)
	switch c.kind {
	case tokenBucket:
		n, d := c.rate()
		return greedyTokenBucket(n, d, int64(c.burst), t)
	case leakyBucket:
		// Consecutive grants at least d/n apart, on a nanosecond clock:
		// ceil(d/n) apart, from 0.
		n, d := c.rate()
		return t/ceilDiv(d, n) + 1
	case fixedWindow:
		// Limit in each window that [0, D] meets.
		return int64(c.limit) * (t/int64(c.window) + 1)
	case slidingWindow:
		// Limit in each block of Segments segments: segments 0..seg(D)
		// hold at most Limit per block of s, and Limit at the start of
		// segments 0, s, 2s, ... reaches it.
		s := int64(c.segments)
		return int64(c.limit) * (segmentOf(t, int64(c.window), s)/s + 1)
	case slidingLog:
		// Limit in [0, W), [W, 2W), ...: at most Limit per any window, and
		// Limit at 0, W, 2W, ... reaches it.
		return int64(c.limit) * (t/int64(c.window) + 1)
	default:
		// Each of min(workers, Limit) permits starts a lease of length hold at
		// most every hold: at 0, hold, 2*hold, ... <= D.
		return int64(min(workers, c.limit)) * (t/int64(hold) + 1)
	}
}

// greedyTokenBucket returns how many unit grants fit in [0, D] under the
// pairwise bound "grants in [t_i, t_j] <= B + (n/d)(t_j - t_i)" on a
// nanosecond clock. Placing each grant at the earliest instant the bound
// allows is optimal: by induction the greedy j-th grant is no later than
// the j-th grant of any schedule that keeps the bound, since the earliest
// instant for it, max over i of t_i + ceil((j-i+1-B)*d/n), grows with the
// earlier instants.
func greedyTokenBucket(n, d, burst, D int64) int64 {
	var ts []int64
	for {
		j := len(ts) // placing grant j (0-based): j+1 grants so far
		t := int64(0)
		if j > 0 {
			t = ts[j-1]
		}
		for i := 0; i < j; i++ {
			m := int64(j - i + 1) // grants in [t_i, t_j] with the new one
			if m > burst {
				t = max(t, add(ts[i], ceilDiv(mul(m-burst, d), n)))
			}
		}
		if t > D {
			return int64(len(ts))
		}
		ts = append(ts, t)
	}
}

// checkLiveness reports a run whose grants in [0, D] fall below 99% of what
// the bound allows.
func checkLiveness(got, want int64) error {
	if 100*got < 99*want {
		return fmt.Errorf("liveness: %d grants in the run, less than 99%% of the %d the bound allows", got, want)
	}
	if got > want {
		return fmt.Errorf("liveness reference: %d grants in the run, more than the %d the bound allows", got, want)
	}
	return nil
}
