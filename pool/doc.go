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
// returns (after the pool has reported the task's outcome on it: see
// Outcomes), so a limiter.Concurrency shared by several pools bounds them
// together. A nil Limiter means no limit.
//
// # Keys: one queue per host
//
// GoKey adds a key (a host, a tenant) whose limiter comes from
// Options.PerKey: a keyed task starts when a worker is free and both the
// pool's Limiter and the key's limiter grant at the same instant
// (limiter.Chain). GoKey does not wait for either: it puts the task in its
// key's queue and returns. Each key's queue is first in, first out. A free
// worker takes the next key that is ready, in turn, and asks its limiters
// for the task at the head of its queue, which it starts at once if they
// grant. A key whose limiter refuses is set aside until the instant the
// limiter names (Lease.RetryAfter), woken at that instant precisely (as the
// limiters' queues are) by one waiter for the whole pool that runs only
// while keys are set aside; or, when the limiter cannot name one (a
// limiter.Concurrency waits for a release), its head waits in the limiter's
// Acquire on a goroutine that holds no worker. So a key at its limit holds
// up only its own tasks, whatever order the tasks were submitted in, and an
// idle key costs nothing: no goroutine, no timer, no queue.
//
// (*limiter.Keyed[string]).For and (*limiter.KeyedTokenBucket[string]).For
// fit PerKey, so a crawler gets 16 workers and 2 requests per second per host
// with
//
//	hosts, _ := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
//		return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 2, Window: time.Second})
//	}})
//	p, _ := pool.New(pool.Options{Workers: 16, PerKey: hosts.For})
//	for _, u := range urls {
//		p.GoKey(ctx, u.Host, fetch(u)) // returns at once
//	}
//	err := p.Wait()
//
// When the hosts' limits are not known, adaptive.NewKeyedRateLimiter's For
// fits PerKey too: each host gets a rate limiter of its own that its tasks'
// outcomes move (see Outcomes), down at a task whose error wraps
// limiter.ErrThrottled, up while they succeed.
//
// Memory stays bounded: at most Options.Queue keyed tasks (DefaultKeyQueue,
// 16,384, when 0) wait in the keys' queues, and GoKey waits only while that
// many do; DefaultKeyQueue says what they cost. MapKey is Map with keys.
//
// # Submitting, waiting, failing
//
// Go returns nil once the task has started; it returns an error, and the task
// never runs, exactly when the task could not start. So every task submitted
// either runs exactly once or its Go call reports why not. Go waits for the
// pool alone (until Close); GoContext takes a context so that a caller can
// give up waiting. TryGo and TryGoKey never wait: ErrBusy when every worker
// is busy, the limiter's refusal (limiter.ErrLimited) when it has no permit
// now. A keyed task is queued, so the error of one that cannot start (its
// GoKey context ended, Close came, its limiter failed) is reported by Wait;
// it fails as soon as its context ends or Close comes.
//
// Tasks get a context that ends on Close, when Options.Context ends, after
// Wait, and, with Options.CancelOnError, on the first error (the semantics of
// golang.org/x/sync/errgroup). Wait refuses new tasks, waits for every task,
// and returns errors.Join of their errors (or the first alone, with
// Options.FirstError). A task that panics does not crash the process: its
// error is a *PanicError carrying the panic value and stack.
//
// A Pool is used once: Wait (like Close) is its end. It stops the workers
// and ends the tasks' context, so that a pool that is waited for leaves no
// goroutine behind and holds nothing on Options.Context; Go after Wait fails
// with ErrClosed (which also matches limiter.ErrClosed). For another batch,
// make another Pool: New starts no goroutine.
//
// A nil context passed to a method or to Map panics with "pool: nil Context"
// before the pool changes; Options.Context may be nil (context.Background).
//
// # Queueing
//
// By default Go waits until a worker is free, so a submitter never gets more
// than Workers tasks ahead of the pool. With Options.Queue, Go returns as soon
// as its task is queued behind at most Queue others, and the workers drain the
// queue without a hand-off per task: for short tasks on a few workers,
// several times cheaper than a Go that parks until a worker is free.
// The worker then passes the limiter right before the task starts, so the
// bound on starts is the same, but a task that cannot start (Close came, the
// limiter refused) is reported by Wait rather than by Go.
//
// # Outcomes
//
// When a task started through a limiter returns, the pool reports what
// became of it on the task's lease, before it releases the lease:
// lease.Report(limiter.OutcomeOf(err), d), where err is what the task
// returned and d how long it ran. So a limiter that adapts its limit to the
// other side's capacity learns from every task: a task whose error wraps
// limiter.ErrThrottled (fmt.Errorf("GET %s: 429: %w", u, limiter.ErrThrottled))
// is reported Throttled, nil Succeeded, an error wrapping context.Canceled
// Unknown, and any other error, a panic included, Failed. A keyed task's
// report reaches both the pool's Limiter and its key's (limiter.Chain
// forwards it); Map and MapKey report the error f returned. Limiters that do
// not learn from outcomes ignore the report; it costs two clock reads per
// task that holds a lease, and no allocation.
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
// The pool is a textbook one: its state, with the tasks handed to the
// workers in a first-in, first-out queue, sits under one mutex; idle
// workers and waiting Go calls wait on condition variables. Submitting a
// task with Go takes the mutex once (twice with a Limiter, which Go passes
// in between), and a worker finishes a task and takes the next in one
// critical section, so a busy pool hands tasks over without waking anyone.
// No allocation per task.
// GoKey takes the mutex once to queue a task; a worker tries the key's
// limiter for it. GoKey allocates only when a key's queue grows, or when the
// context of a queued task is one no other queued task has (the pool
// watches it with context.AfterFunc, so that the task fails as soon as it
// ends). bench/ measures the pool beside errgroup, alitto/pond,
// sourcegraph/conc and a plain mutex-and-channel pool.
package pool
