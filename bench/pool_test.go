package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alitto/pond/v2"
	"github.com/rategate/rategate/pool"
	concpool "github.com/sourcegraph/conc/pool"
	"golang.org/x/sync/errgroup"
)

// BenchmarkPool is the cost of one trivial task (a function that returns at
// once) submitted to a pool of 2 or 64 workers, from one goroutine:
// rategate's pool.Go, errgroup.Group.Go with SetLimit, pond/v2's Pool.Go and
// sourcegraph/conc's pool.Go. ns/op is the submitting loop's time per task;
// ns/task also counts the final Wait, so a pool that queues without bound
// (pond) pays for the backlog it left. rategate-limited adds a token bucket
// that always grants (the limiter's fast path, and the report of each
// task's outcome on its lease). rategate-queue sets Options.Queue, so that
// Go returns once the task is queued, as pond's does. plain-mutex and
// plain-mutex-queue are a pool written the plain way, a sync.Mutex and a
// sync.Cond for the slots and a buffered channel to the workers
// (pool_plain_test.go), without and with a queue. rategate-gokey queues
// every task under one key with no limiter (the per-key scheduler's own
// cost).
func BenchmarkPool(b *testing.B) {
	for _, workers := range []int{2, 64} {
		b.Run(fmt.Sprintf("impl=rategate/workers=%d", workers), func(b *testing.B) {
			p := must(pool.New(pool.Options{Workers: workers}))
			runPool(b, func() { p.Go(nopTask) }, func() { p.Wait() })
		})
		b.Run(fmt.Sprintf("impl=rategate-limited/workers=%d", workers), func(b *testing.B) {
			p := must(pool.New(pool.Options{Workers: workers, Limiter: admitTokenBucket()}))
			runPool(b, func() { p.Go(nopTask) }, func() { p.Wait() })
		})
		b.Run(fmt.Sprintf("impl=rategate-queue/workers=%d", workers), func(b *testing.B) {
			p := must(pool.New(pool.Options{Workers: workers, Queue: poolQueue}))
			runPool(b, func() { p.Go(nopTask) }, func() { p.Wait() })
		})
		b.Run(fmt.Sprintf("impl=plain-mutex/workers=%d", workers), func(b *testing.B) {
			p := newPlainPool(workers, 0)
			runPool(b, func() { p.Go(nop) }, p.Wait)
		})
		b.Run(fmt.Sprintf("impl=plain-mutex-queue/workers=%d", workers), func(b *testing.B) {
			p := newPlainPool(workers, poolQueue)
			runPool(b, func() { p.Go(nop) }, p.Wait)
		})
		b.Run(fmt.Sprintf("impl=rategate-gokey/workers=%d", workers), func(b *testing.B) {
			p := must(pool.New(pool.Options{Workers: workers, Queue: poolQueue}))
			ctx := context.Background()
			runPool(b, func() { p.GoKey(ctx, "host", nopTask) }, func() { p.Wait() })
		})
		b.Run(fmt.Sprintf("impl=errgroup/workers=%d", workers), func(b *testing.B) {
			var g errgroup.Group
			g.SetLimit(workers)
			runPool(b, func() { g.Go(nopErr) }, func() { g.Wait() })
		})
		b.Run(fmt.Sprintf("impl=pond/workers=%d", workers), func(b *testing.B) {
			p := pond.NewPool(workers)
			runPool(b, func() { p.Go(nop) }, p.StopAndWait)
		})
		b.Run(fmt.Sprintf("impl=conc/workers=%d", workers), func(b *testing.B) {
			p := concpool.New().WithMaxGoroutines(workers)
			runPool(b, func() { p.Go(nop) }, p.Wait)
		})
	}
}

// poolQueue is the Queue of the rategate-queue rows: Go returns once its
// task is queued behind at most this many, as pond's Go does (without a cap).
const poolQueue = 1024

var (
	nopTask = func(context.Context) error { return nil }
	nopErr  = func() error { return nil }
	nop     = func() {}
)

// runPool times submit per b.Loop iteration (ns/op) and, including wait,
// per task (ns/task), and reports the process's CPU time per task
// (cpu-ns/task: user + system, all goroutines, so spinning counts; it moves
// less than wall time when other processes load the machine).
func runPool(b *testing.B, submit, wait func()) {
	b.ReportAllocs()
	n := 0
	start, cpu := time.Now(), pipeCPU()
	for b.Loop() {
		submit()
		n++
	}
	wait()
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(n), "ns/task")
	b.ReportMetric(float64((pipeCPU()-cpu).Nanoseconds())/float64(n), "cpu-ns/task")
}
