// Package channel provides Chan, a FIFO channel whose every buffered item
// holds a lease from a limiter.Limiter.
//
// # The model
//
// A send asks the limiter for a lease (one permit, or a weight of n permits
// with SendN) and buffers the item together with it; the receive that takes
// the item out releases the lease. So what bounds the channel is not a fixed
// capacity but the limiter, and which limiter decides what the bound means:
//
//   - A limiter.Concurrency of N makes a bounded channel: at most N permits
//     are held by buffered items, and a send waits until a receive frees
//     room. Unlike a Go channel's capacity, the bound can be shared: one
//     Concurrency limiter passed to many Chans (and to pools and streams) is
//     one memory budget for a whole pipeline. With weighted sends (say, an
//     item's size in bytes as its permits) the budget is in bytes.
//   - A rate limiter (limiter.NewTokenBucket, NewSlidingLog, ...) throttles
//     the producers: at most N items are sent per M, however many goroutines
//     send. Its permits are spent when granted, so the receive's Release is a
//     no-op, and the buffer is only as bounded as the rate: with a rate
//     limiter alone and a slow receiver, the buffer grows.
//   - limiter.Chain(concurrency, rate) does both: producers throttled to N
//     per M and at most K items buffered.
//
// The buffer is a ring that grows by doubling when full, so a steady flow
// allocates nothing per item. It shrinks by half once the flow has run for
// a whole ring's worth of receives without filling a quarter of it: a
// drained backlog gives its memory back, while a buffer that fills and
// empties in cycles keeps its size. Drain frees it at once.
//
// # Sending and receiving
//
// Send and SendN wait for the lease in the limiter's queue order and end
// with their context or when the Chan is closed. TrySend and TrySendN never
// wait; when the limiter refuses, their *LimitError says why (errors.Is with
// limiter.ErrLimited, limiter.ErrQueueFull, limiter.ErrClosed, ...) and when
// to retry (LimitError.RetryAfter). Recv, TryRecv and the range loop of All
// receive items oldest first, and release the item's lease before they
// return it; Out gives a Go channel for select statements, whose hand-off
// is the receive: the view releases the lease just after it. RecvLease
// hands the lease to the receiver instead: it reports on it what became of
// the item's work (limiter.Lease.Report, which an adaptive limiter learns
// from) and releases it when that work is done, so that a Concurrency
// counts the item until then.
//
// # Closing, and the leases nobody receives
//
// After Close, sends fail with ErrClosed (including sends waiting in the
// limiter, which are woken), and receivers drain what is buffered and then
// get ErrClosed, as with a Go channel. Every item's lease is released exactly
// once: by the receive that takes it, or by Drain, which discards the
// buffered items and releases their leases. Close does not discard: items
// nobody will receive keep their permits until Drain is called, so a
// producer-side shutdown that abandons a Chan should Close and then Drain it
// (Drain on an open Chan discards what is buffered now).
//
// # Nil arguments
//
// A nil limiter means no limit: the Chan is an unbounded FIFO with no
// leases. A nil context.Context is a programming error: Send, SendN, Recv,
// All and Out panic with "channel: nil Context" at once, before they take a
// lock or change anything, so a Chan whose caller recovers stays usable.
package channel
