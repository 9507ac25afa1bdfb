// Package iter makes range loops run no faster than a limiter allows. It
// wraps a standard iterator (an iter.Seq or iter.Seq2) so that each value
// it yields first passes a [limiter.Limiter]:
//
//	lim, err := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 5, Window: time.Second})
//	if err != nil {
//		return err
//	}
//	jobs, errf := iter.LimitErr(ctx, slices.Values(todo), lim)
//	for job := range jobs {
//		do(job) // at most 5 jobs start in any second
//	}
//	if err := errf(); err != nil {
//		return err // the loop ended early: ctx ended, or lim refused
//	}
//
// # The model
//
// A wrapped sequence pulls a value from the upstream sequence, asks the
// limiter for its permits (Acquire, waiting in the limiter's queue if need
// be), and only then hands the value to the loop body. So the body runs
// no more often than the limiter grants: with the sliding log above, 20
// values are yielded in groups of 5 at 0, 1, 2 and 3 s. The wrappers start
// no goroutine: they are range-over-func iterators that run in the loop's
// own goroutine, and only Batch allocates as values pass (each slice it
// yields).
//
// What a value costs depends on the wrapper:
//
//   - [Limit] and [Limit2]: one permit per value (per pair).
//   - [Batch]: values are gathered into slices of up to k, and a slice
//     costs one permit per value in it. A loop that sends records in
//     batches can so respect "100 records per second" while sending 20 at a
//     time; pair it with a limiter that refills in small steps (a token
//     bucket of Rate 100/s and Burst 20, or a sliding log of 20 per 200 ms)
//     to release 20 every 200 ms rather than 100 at once each second.
//   - [Weighted]: a cost function gives each value's permits (request
//     units, bytes, rows), so a loop can respect "20,000 RUs per second"
//     over items of different costs.
//
// One limiter can govern many loops at once (and channels, streams, pools):
// the bound holds over all of them together.
//
// # Ending a loop, and learning why
//
// The loop ends when the upstream sequence ends, when the body breaks out
// (or returns, or panics), when ctx is done, or when the limiter refuses for
// good (it was closed, its queue is full, or a value asks for more permits
// than it can ever grant). Breaking out stops the upstream sequence at once:
// the wrapper returns false to it, and holds nothing afterwards.
//
// Limit, Limit2, Batch and Weighted end quietly. After the loop, ctx.Err()
// tells whether ctx was cancelled or its deadline passed, and that is all
// it can tell: it is still nil when the limiter refused (it was closed, its
// queue was full, a value cost too much) and when the limiter foresaw that
// the next value's permits would come after ctx's deadline, which ends the
// loop at once, before the deadline. The Err forms ([LimitErr],
// [Limit2Err], [BatchErr], [WeightedErr]) also return a function that
// reports why the last loop over the sequence ended: nil when the upstream
// ran out or the body broke out; ctx's error when ctx ended (errors.Is(err,
// context.Canceled), say) or a foreseen deadline (errors.Is(err,
// context.DeadlineExceeded)); otherwise the limiter's refusal wrapped with
// the value's position, for errors.Is with [limiter.ErrClosed],
// [limiter.ErrQueueFull], [limiter.ErrExceedsLimit] or
// [limiter.ErrInvalidCount]. Use them whenever the loop must know it saw
// every value:
//
//	seq, errf := iter.WeightedErr(ctx, records, lim, Record.Units)
//	for rec := range seq {
//		store.Write(rec)
//	}
//	if err := errf(); err != nil {
//		return err
//	}
//
// A value whose permits are refused is not yielded, and nothing after it
// is. In particular, a value that costs more than the limiter can ever
// grant at once (more than a token bucket's Burst or a window's Limit) ends
// the loop with [limiter.ErrExceedsLimit] at that value instead of waiting
// forever: size Batch's k and Weighted's costs to fit the limiter.
//
// When ctx has a deadline and the limiter can tell that the next value's
// permits would come after it, the loop ends at once, before the deadline,
// and the Err forms report an error for which errors.Is(err,
// context.DeadlineExceeded) holds.
// A wrapper cannot interrupt the upstream sequence while it produces a
// value: an upstream that blocks (reading a channel or a socket) should
// watch ctx itself, as channel.Chan.All does.
//
// # Reporting outcomes
//
// Leases and LeasesErr yield each value with its lease, so that the body
// can tell the limiter what became of its work with limiter.Lease.Report:
// an adaptive limiter (package adaptive) learns from the reports how fast,
// or how many at once, the other side takes the calls. The lease is still
// released by the wrapper when the body returns; the body reports on it and
// neither releases nor settles it. Reporting allocates nothing.
//
//	for url, lease := range iter.Leases(ctx, urls, lim) {
//		start := time.Now()
//		err := fetch(ctx, url) // wraps limiter.ErrThrottled on a 429
//		lease.Report(limiter.OutcomeOf(err), time.Since(start))
//	}
//
// # Concurrency limiters: a lease held while the body runs
//
// Each value's lease is held while the loop body runs on it and released
// when the body returns (or breaks out, or panics). For rate limiters
// this changes nothing (their permits are spent when granted). For a
// [limiter.Concurrency] shared by several loops or goroutines it bounds the
// bodies running at once: with Limit 3, at most 3 loop bodies, across all
// the loops sharing it, are between their grant and their return. With
// Weighted, a Concurrency limiter bounds the total cost in progress (say,
// the bytes of the records being written at once). A single loop alone
// never waits for itself: its lease is back before the next value asks.
// Leases combine: a [limiter.Chain] of a rate limiter and a Concurrency
// limiter gives both bounds.
//
// # The pitfall: parallel workers
//
// A wrapped sequence limits when values are handed out, not when the work
// on them happens. If the loop body hands each value to other goroutines
// (go work(v), a channel to a worker pool) the body returns at once, the
// Concurrency lease is released at once, and the workers run with no limit
// on how many run at the same time. Worse, anything that reads the sequence
// ahead into buffers for parallel workers — chunk partitioning, as .NET's
// PLINQ does when a rate-limited IEnumerable is handed to AsParallel — takes
// values from the limiter long before the workers act on them: the
// limiter then paces the buffering, not the actions, and a burst of
// buffered values can run all at once. To limit parallel work, make the
// limiter guard each task's start, where the action happens: package
// [github.com/rategate/rategate/pool] runs tasks on a bounded set of workers
// and passes the limiter as each task starts (pool.New with
// Options.Limiter, or pool.Map over a sequence).
//
// # Nil arguments
//
// A nil limiter means no limit: every value is yielded as the upstream
// produces it, and only ctx can end the loop early; the wrapper's own cost
// is then its check of ctx (a compare, for a context that is never done,
// such as context.Background), and it allocates nothing. BenchmarkIter in
// the repository's bench/ measures each wrapper beside a bare loop and a
// hand-written Acquire loop. A nil sequence or cost function yields
// nothing (the Err forms report [ErrInvalid]). A nil context.Context is a
// programming error: every wrapper and Err form panics with "iter: nil
// Context" when it is called, before anything is pulled from the upstream
// or asked of the limiter.
package iter
