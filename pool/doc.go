// Package pool runs tasks on a bounded set of worker goroutines whose task
// starts pass a rate limiter: at most Workers tasks run at once, and each
// task starts only when its limiter grants a permit, so a concurrency bound
// and a rate bound hold together. It is for crawlers and batch jobs that must
// respect both their own resources and someone else's rate limit.
//
// # The model
//
// A Pool has Workers slots. Go takes a slot (waiting while all are taken),
// then one permit from Options.Limiter (waiting in the limiter's queue), and
// hands the task to a worker, which starts it at once: the instant a task
// starts is the instant its permit was granted, so whatever bound the limiter
// keeps on its grants (say "at most 2 in any 1 s window" for a
// limiter.SlidingLog) the task starts keep too. With 10 tasks of 250 ms,
// 10 workers and a sliding log of 2 per second, the tasks start in pairs at 0,
// 1, 2, 3 and 4 s. A lease the limiter grants is released when the task
// returns, so a limiter.Concurrency shared by several pools bounds them
// together.
//
// GoKey adds a per-key limiter (per host, per tenant) from Options.PerKey:
// the task starts when both the pool's Limiter and the key's limiter grant at
// the same instant (limiter.Chain). (*limiter.Keyed[string]).For fits PerKey,
// so a crawler gets 16 workers and 2 requests per second per host with
//
//	hosts, _ := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
//		return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 2, Window: time.Second})
//	}})
//	p, _ := pool.New(pool.Options{Workers: 16, PerKey: hosts.For})
//	err := p.GoKey(ctx, u.Host, fetch(u))
//
// # Submitting, waiting, failing
//
// Go returns nil once the task has started; it returns an error, and the task
// never runs, exactly when the task could not start. So every task submitted
// either runs exactly once or its Go call reports why not. Go waits for the
// pool alone (until Close); GoContext and GoKey take a context so that a
// caller can give up waiting. TryGo never waits: ErrBusy when every worker
// is busy, the limiter's refusal (limiter.ErrLimited) when it has no permit
// now.
//
// Tasks get a context that ends on Close, when Options.Context ends, after
// Wait, and, with Options.CancelOnError, on the first error (the semantics of
// golang.org/x/sync/errgroup). Wait refuses new tasks, waits for every task,
// and returns errors.Join of their errors (or the first alone, with
// Options.FirstError). A task that panics does not crash the process: its
// error is a *PanicError carrying the panic value and stack. Go after Wait or
// Close fails with ErrClosed (which also matches limiter.ErrClosed). Worker
// goroutines start as tasks need them and end at Wait or Close, so a pool that
// is waited for or closed leaves no goroutine behind.
//
// # Queueing
//
// By default Go waits until a worker is free, so a submitter never gets more
// than Workers tasks ahead of the pool. With Options.Queue, Go returns as soon
// as its task is queued behind at most Queue others, and the workers drain the
// queue without a hand-off per task: several times cheaper for short tasks.
// The worker then passes the limiter right before the task starts, so the
// bound on starts is the same, but a task that cannot start (Close came, the
// limiter refused) is reported by Wait rather than by Go.
//
// # Results
//
// Map turns an iter.Seq into an iter.Seq2 of results computed by f on the
// pool's workers, in input order or completion order, with bounded memory: a
// slow consumer stops the reading of the input. Breaking out of the loop
// cancels the calls and returns only after they have returned.
//
// # Cost
//
// Submitting a task costs one compare-and-swap on the pool's state word, a
// buffered channel send, and the limiter's fast path; finishing one, one
// atomic add. No allocation per task. Idle workers poll briefly before they
// park, so a stream of short tasks flows without a wake-up per task. On two
// cores, a trivial task costs about 300-400 ns when Go waits for a free worker
// (a hand-off per task: errgroup.SetLimit takes about 450) and about 80-130 ns
// with a Queue (see bench/).
package pool
