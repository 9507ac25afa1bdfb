// Package cellrate is the lock-free state of a bucket decided by the generic
// cell rate algorithm (GCRA), shared by package limiter's TokenBucket and
// LeakyBucket and by redislimit's Partitioned.
//
// The state is one int64 word, the theoretical arrival time (tat) in scaled
// units: with the rate reduced to n permits per d time units, one unit of
// time is n scaled units and one permit costs d, so that no rounding ever
// drifts. The configuration that goes with the word (its origin, n, d, the
// tolerance) is an immutable value its owner publishes through an
// atomic.Pointer. The protocol is:
//
//   - A decision without a lock reads the word, then the configuration;
//     it gives way (to the owner's mutex) when the word is Locked, decides
//     with Decide, and publishes its new state with one compare-and-swap of
//     the word it read. A swap that succeeds was computed with the
//     configuration that goes with the value it replaced.
//   - A change of configuration happens under the owner's mutex: Lock
//     swaps the word for Locked, the owner stores the new configuration,
//     then the word converted to it. The word it stores must never be the
//     value it held before Lock, which a stalled compare-and-swap computed
//     with the old configuration still expects: where it would be, Fresh
//     gives the value to store instead.
package cellrate

import (
	"math"
	"sync/atomic"
)

// Locked is the value of a word while its owner changes its configuration.
// It is no state: a tat is never MinInt64.
const Locked = math.MinInt64

// Decide is one GCRA decision: from state tat at scaled instant nows, where
// a permit costs d units and tol units of debt are allowed after a grant,
// take k permits (k == 0 asks whether one could be taken and takes
// nothing). It returns the new state, or early > 0, the scaled units by
// which the request is too soon. It is small enough to inline into a
// lock-free fast path.
func Decide(tat, nows, k, d, tol int64) (next, early int64) {
	from := max(tat, nows)
	early = from + max(k, 1)*d - nows - tol
	if k == 0 || early > 0 {
		return tat, early
	}
	return from + k*d, early
}

// Lock swaps w for Locked and returns the value it held. The caller holds
// the owner's mutex, so that no other goroutine locks w meanwhile; it must
// store a state in w before it lets the mutex go.
func Lock(w *atomic.Int64) int64 {
	for {
		old := w.Load()
		if old != Locked && w.CompareAndSwap(old, Locked) {
			return old
		}
	}
}

// Fresh returns a state other than tat that a compare-and-swap from before
// a change of configuration cannot expect, for a converted state tat equal
// to the word's value before Lock: one unit on the safe side. A tat at or
// below 0 is a full bucket at every instant since the origin, and so is
// tat-1; otherwise tat+1 is one unit more debt.
func Fresh(tat int64) int64 {
	if tat <= 0 {
		return tat - 1
	}
	return tat + 1
}
