package limiter

import "context"

// Limiter hands out permits. Every algorithm in this package implements it,
// and every primitive in rategate (channels, streams, loops, pools) accepts it.
type Limiter interface {
	// TryAcquire takes n permits if they are available now. It never waits
	// and never queues: while other callers wait in Acquire, it fails rather
	// than jump the queue. The returned Lease says whether it was granted and,
	// if not, why (Lease.Err) and when to try again (Lease.RetryAfter).
	TryAcquire(n int) Lease

	// Acquire waits, in the limiter's queue order, until n permits are
	// granted, ctx is done, the queue is full, or the limiter is closed.
	// err == nil exactly when the lease is granted. When ctx ends first,
	// errors.Is(err, ctx.Err()) holds; when the limiter can tell in advance
	// that the grant would come after ctx's deadline, it fails at once with
	// an error for which errors.Is(err, context.DeadlineExceeded) holds.
	// A waiter that fails consumes no permits.
	Acquire(ctx context.Context, n int) (Lease, error)
}

// Stats is a snapshot of a limiter's state and counters.
type Stats struct {
	// Available is the number of permits that could be granted now,
	// ignoring the queue.
	Available int64
	// Queued is the number of permits waiting in Acquire calls.
	Queued int64
	// Waiters is the number of Acquire calls waiting.
	Waiters int
	// Granted counts the leases granted since the limiter was made.
	Granted int64
	// Rejected counts the acquisitions that failed: TryAcquire calls that were
	// not granted and Acquire calls that returned an error.
	Rejected int64
}
