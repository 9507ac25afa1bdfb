package limiter

import (
	"context"
	"errors"
	"time"
)

// Outcome is what became of the work a granted lease admitted, as its caller
// reports it with [Lease.Report]. Limiters that adapt their limit to the
// other side's capacity learn from it; every other limiter ignores it.
type Outcome uint8

const (
	// Unknown says nothing about the work's fate (it was cancelled, say).
	Unknown Outcome = iota
	// Succeeded: the work was done; the other side had room for it.
	Succeeded
	// Throttled: the other side pushed back because it was over its
	// capacity: HTTP 429 or 503, gRPC RESOURCE_EXHAUSTED, a timeout the
	// caller takes for overload. Adaptive limiters lower their limit at once.
	Throttled
	// Failed: the work failed for a reason that says nothing about capacity
	// (a 404, a malformed request, a bug).
	Failed
)

// String returns the outcome's name: "unknown", "succeeded", "throttled" or "failed".
func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Throttled:
		return "throttled"
	case Failed:
		return "failed"
	}
	return "unknown"
}

// ErrThrottled marks an error as throttling by the other side. Wrap it
// (fmt.Errorf("fetch %s: %w", url, limiter.ErrThrottled)) or join it
// (errors.Join) into a task's or a body's error, and code that reports
// outcomes for you (see [OutcomeOf]) reports [Throttled].
var ErrThrottled = errors.New("limiter: throttled by the other side")

// OutcomeOf classifies the error a piece of work returned: nil is
// [Succeeded]; an error wrapping [ErrThrottled] is [Throttled]; an error
// wrapping context.Canceled is [Unknown] (the work was abandoned, not
// refused); any other error is [Failed].
func OutcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return Succeeded
	case errors.Is(err, ErrThrottled):
		return Throttled
	case errors.Is(err, context.Canceled):
		return Unknown
	}
	return Failed
}

// Reporter is implemented by the Releaser of a lease whose limiter learns
// from outcomes. [Lease.Report] calls ReportOutcome with the permits the
// lease holds. Implementations outside this package make such leases with
// [NewLease].
type Reporter interface {
	ReportOutcome(permits int, o Outcome, latency time.Duration)
}

// Settler is implemented by the Releaser of a lease that can be settled
// with the work's actual cost once it is known. [Lease.Settle] calls
// SettlePermits with the permits the lease holds and the actual cost;
// implementations give back what was not used and book what was used
// beyond the lease as a debt that later grants pay, so that the limiter's
// bound holds over the actual costs.
type Settler interface {
	SettlePermits(granted, actual int)
}

// Report tells the limiters that granted l what became of the work l
// admitted, and how long it took (latency 0 when not measured). Limiters
// that adapt their limit (a [Reporter] behind the lease, or a [Chain]
// containing one) learn from it; for every other limiter, for a lease that
// was not granted and for the zero Lease, Report does nothing. Report once
// per granted lease, before or after Release; it never allocates.
func (l Lease) Report(o Outcome, latency time.Duration) {
	if !l.granted() || l.rel == nil {
		return
	}
	if r, ok := l.rel.(Reporter); ok {
		r.ReportOutcome(int(l.v), o, latency)
	}
}

// Settle settles a lease granted on an estimate (say 1,000 tokens of a
// language-model call, or a 64 KiB read) with the actual cost, once it is
// known, and returns the lease that now holds actual permits: Release that
// one, not l. A limiter that can settle (a [Settler] behind the lease) gives
// back the permits not used and books those used beyond the lease as a debt
// that later grants pay; this package's limiters keep their bounds over the
// actual costs (see "Outcomes and actual costs" in the package
// documentation for the exact terms), and settle without allocating. A
// lease whose limiter cannot settle, a lease that was not granted, and a
// negative actual leave l unchanged, and Settle returns l. Settle a lease
// at most once, and before releasing it.
func (l Lease) Settle(actual int) Lease {
	if !l.granted() || l.rel == nil || actual < 0 || int64(actual) == l.v {
		return l
	}
	switch s := l.rel.(type) {
	case settler:
		s.settleAt(l.at(), int(l.v), actual)
	case Settler:
		s.SettlePermits(int(l.v), actual)
	default:
		return l
	}
	l.v = int64(actual)
	return l
}
