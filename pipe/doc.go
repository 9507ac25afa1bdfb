// Package pipe shapes byte streams: its Reader, Writer and Conn move bytes
// no faster than a limiter.Limiter grants them, one permit per byte.
//
// # The model
//
// A stream asks its limiter for permits before it hands bytes on, so the
// bytes a Reader's Read returns (or a Writer passes to its writer) in any
// interval never exceed what the limiter granted in it. With a
// limiter.TokenBucket of rate R and burst B, that is at most B + R·t bytes in
// every interval of length t, and, as long as the reader of the stream keeps
// up, at least 99% of R over time. One limiter may shape many streams at
// once: they share its rate. limiter.Chain combines a per-stream limit with
// a shared total.
//
// A Reader reads first and asks for permits afterwards, for the bytes it
// actually read: a short read costs only what it returned, and nothing
// needs giving back (a rate limiter cannot take permits back). A Writer
// asks for the permits of a piece before writing it.
//
// # Pieces
//
// A limiter grants at most its burst at once, so large reads and writes are
// cut into pieces (a Read may return fewer bytes than asked for; a Write
// writes all of p, piece by piece). A piece is at most half the limiter's
// burst, and at most what its rate refills in 100 ms, or WithChunk's size.
// Half a burst leaves the other half to absorb a waiter that wakes late: a
// token bucket keeps filling while a timer is late, so the next piece finds
// its permits already there and the late instant is not lost. A rate change
// (TokenBucket.SetRate) applies from the piece after the one waiting.
//
// The burst is learned from the limiter's Burst method (TokenBucket) or
// Limit method (the windows); a limiter that tells neither (a limiter.Chain,
// Keyed.For) teaches the stream its size when it refuses a piece with
// limiter.ErrExceedsLimit, or is told by WithChunk.
//
// # Waiting
//
// When the limiter refuses a piece and says when its permits will be there
// (Lease.RetryAfter), the stream waits until then and takes them. It waits
// as the limiter's own queue does: on a Go timer (one per stream, reused,
// so a Read or Write allocates nothing), which on Linux fires up to a
// millisecond late, ending a little before the instant, then, for the rest,
// precisely (on Linux on an OS timer the process shares, elsewhere by
// polling the clock). The precise end is only as long as Go timers have
// been late in this process, and shorter by what the limiter absorbs: a
// token bucket whose spare burst keeps filling longer than a timer is late
// needs none, and its streams wait on the Go timer alone. No wait blocks an
// OS thread of its own, so many waiting streams cost goroutines, not
// threads. A stream whose permits were taken by others meanwhile, or whose
// limiter cannot tell when permits will come, waits in the limiter's queue
// with Acquire instead, in its order.
//
// Accuracy on a real clock still depends on the process being scheduled in
// time: on a loaded machine, a small bucket at a high rate loses whatever
// arrives while the reader is descheduled; a larger burst absorbs that too.
//
// # Nil limiters and cancellation
//
// A nil limiter means no limit: the stream passes bytes on at once (and
// still counts them and can be closed). WithContext ends a Reader's or
// Writer's waits when its context ends (a nil context panics with
// "pipe: nil Context"); Close ends them too, with ErrClosed, and closes the
// underlying stream. A Conn honours its deadlines in its waits as net.Conn
// does: a call still waiting at its deadline returns os.ErrDeadlineExceeded.
// A Read whose wait fails keeps the bytes it had read and delivers them on
// the next Read, so no byte is lost or repeated.
//
// # Progress
//
// WithCounter counts the bytes a stream delivers, into a
// pipe/progress.Monitor for example, which reports bytes so far, current
// and average rate, and the time left for a known total.
package pipe
