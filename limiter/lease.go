package limiter

import (
	"context"
	"errors"
	"time"
)

// reason records why a Lease was not granted, so that a Lease stays a small
// value while still answering errors.Is.
type reason uint8

const (
	reasonNone reason = iota
	reasonLimited
	reasonClosed
	reasonQueueFull
	reasonExceeds
	reasonInvalid
	reasonCanceled
	reasonDeadline
	reasonNoLimiter
)

func (r reason) err() error {
	switch r {
	case reasonLimited:
		return ErrLimited
	case reasonClosed:
		return ErrClosed
	case reasonQueueFull:
		return ErrQueueFull
	case reasonExceeds:
		return ErrExceedsLimit
	case reasonInvalid:
		return ErrInvalidCount
	case reasonCanceled:
		return context.Canceled
	case reasonDeadline:
		return context.DeadlineExceeded
	case reasonNoLimiter:
		return ErrNoLimiter
	}
	return nil
}

// Releaser gives permits back to a limiter that takes them back, such as a
// concurrency limiter. Limiters outside this package implement it to make
// leases with NewLease whose Release does something.
type Releaser interface {
	ReleasePermits(n int)
}

// Lease is the result of an acquisition: a small value, copied freely and
// never allocated. A granted lease of a concurrency limiter holds its permits
// until Release; a rate limiter's permits are spent when granted, so Release
// is a no-op for them. Release a granted lease exactly once (releasing copies
// of it more than once gives the permits back more than once). The zero Lease
// is not granted and its Release does nothing.
type Lease struct {
	// Three fields in 32 bytes, so that the compiler keeps a Lease in
	// registers instead of copying it through memory (it does so for at
	// most four fields and 32 bytes).
	rel Releaser
	v   int64 // granted: the permits; refused: the retry hint in ns
	// x is, for a granted lease, ^at, where at >= 0 is the instant of the
	// grant in ns since its limiter's origin (what a settlement needs to
	// know), so x < 0; for a refused lease, its reason, so x >= 0 (the zero
	// Lease is refused for no stated reason).
	x int64
}

// grantedLease is a granted lease of n permits, granted at instant at of
// its limiter, whose Release calls rel.
func grantedLease(rel Releaser, n int, at int64) Lease {
	return Lease{rel: rel, v: int64(n), x: ^max(at, 0)}
}

// granted reports whether l was granted.
func (l Lease) granted() bool { return l.x < 0 }

// why returns the reason l was refused (reasonNone when granted).
func (l Lease) why() reason { return reason(max(l.x, 0)) }

// at returns the instant at which l was granted.
func (l Lease) at() int64 { return ^l.x }

// NewLease returns a granted lease of n permits whose Release calls
// r.ReleasePermits(n); r may be nil for permits that are not given back.
// It is for implementations of Limiter outside this package.
func NewLease(n int, r Releaser) Lease {
	return grantedLease(r, n, 0)
}

// WithReleaser returns a lease that holds l's permits, granted at the
// instant l was, whose Release, Report and Settle go to r instead. It is for
// a Limiter outside this package that hands out the leases of one of this
// package's limiters with a Releaser of its own (to hear their outcomes,
// say). If r embeds the limiter that granted l (a *TokenBucket, say),
// Settle on the returned lease settles with that limiter at the instant of
// l's grant, exactly as l.Settle would; otherwise it settles as the leases
// of NewLease do (r's SettlePermits, if r is a Settler). A lease that was
// not granted is returned unchanged. It does not allocate.
func (l Lease) WithReleaser(r Releaser) Lease {
	if l.granted() {
		l.rel = r
	}
	return l
}

// Denied returns a lease that was not granted because of err, with a retry
// hint (0 if unknown). It is for implementations of Limiter outside this
// package. The lease's Err returns err itself (a nil err reads as
// ErrLimited), so an error of another package, such as one wrapping
// redislimit.ErrUnavailable, reaches the caller intact; this package's
// errors and the context errors are recognised with errors.Is and cost no
// allocation, any other error one small allocation.
func Denied(err error, retryAfter time.Duration) Lease {
	why := reasonOf(err)
	if retryAfter < 0 {
		retryAfter = 0
	}
	l := Lease{v: int64(retryAfter), x: int64(why)}
	if err != nil && err != why.err() {
		l.rel = foreignErr{&err}
	}
	return l
}

// reasonOf returns the reason that err matches with errors.Is, or
// reasonLimited.
func reasonOf(err error) reason {
	for _, why := range [...]reason{reasonClosed, reasonQueueFull, reasonExceeds, reasonInvalid, reasonNoLimiter, reasonDeadline, reasonCanceled} {
		if errors.Is(err, why.err()) {
			return why
		}
	}
	return reasonLimited
}

// foreignErr carries the error of a lease refused by a limiter outside this
// package in the lease's rel field, unused by refused leases. It is one
// pointer, so storing it in the interface does not allocate beyond err.
type foreignErr struct{ err *error }

// ReleasePermits does nothing: a refused lease holds no permits.
func (foreignErr) ReleasePermits(int) {}

func denied(why reason, retry time.Duration) Lease {
	return Lease{v: int64(retry), x: int64(why)}
}

// ctxDenied is the lease of an Acquire that failed because ctx ended.
func ctxDenied(err error) Lease {
	if errors.Is(err, context.DeadlineExceeded) {
		return Lease{x: int64(reasonDeadline)}
	}
	return Lease{x: int64(reasonCanceled)}
}

// Granted reports whether the permits were granted.
func (l Lease) Granted() bool { return l.granted() }

// Permits returns the number of permits granted (0 when not granted).
func (l Lease) Permits() int {
	if !l.granted() {
		return 0
	}
	return int(l.v)
}

// RetryAfter returns, for a lease that was not granted, the earliest wait
// after which the same request could be granted if nothing else took permits
// meanwhile; 0 when that cannot be known (a concurrency limiter waits for a
// release, a queue is ahead) or when the lease was granted.
func (l Lease) RetryAfter() time.Duration {
	if l.granted() {
		return 0
	}
	return time.Duration(l.v)
}

// Err returns nil for a granted lease and otherwise why it was not granted:
// ErrLimited, ErrClosed, ErrQueueFull, ErrExceedsLimit, ErrInvalidCount,
// ErrNoLimiter, or, for an Acquire whose context ended or whose wait would
// outlast its deadline, context.Canceled or context.DeadlineExceeded (the
// same as the error Acquire returned, as far as errors.Is can tell).
func (l Lease) Err() error {
	if l.granted() {
		return nil
	}
	if f, ok := l.rel.(foreignErr); ok {
		return *f.err
	}
	if l.why() == reasonNone {
		return ErrLimited
	}
	return l.why().err()
}

// Release gives the permits back to limiters that take them back
// (concurrency limiters, and chains containing them). It is a no-op for rate
// limiters, for leases that were not granted, and for the zero Lease.
func (l Lease) Release() {
	if l.granted() && l.rel != nil {
		l.rel.ReleasePermits(int(l.v))
	}
}
