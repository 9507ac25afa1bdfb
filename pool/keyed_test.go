package pool_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pool"
)

// crawlPlan is a synthetic crawl: hosts × perHost URLs, submitted with GoKey
// grouped by host (all of host 0's, then host 1's, ...) or interleaved
// (one of each host in turn).
type crawlPlan struct {
	hosts, perHost, workers, queue int
	task                           time.Duration
	perKey                         func(string) limiter.Limiter
}

type crawlRun struct {
	elapsed     time.Duration     // from the first GoKey to Wait's return
	submitted   time.Duration     // when the last GoKey returned
	starts      [][]time.Duration // per host
	peak        int               // tasks running at once
	peakWaiting int               // tasks queued (GoKey returned) and not started
}

func (c crawlPlan) run(t *testing.T, grouped bool) crawlRun {
	t.Helper()
	start := time.Now()
	p := mustPool(t, pool.Options{Workers: c.workers, Queue: c.queue, PerKey: c.perKey})
	var mu sync.Mutex
	r := crawlRun{starts: make([][]time.Duration, c.hosts)}
	running, queued, started := 0, 0, 0
	submit := func(h int) {
		err := p.GoKey(t.Context(), fmt.Sprint("host", h), func(context.Context) error {
			mu.Lock()
			r.starts[h] = append(r.starts[h], time.Since(start))
			started++
			running++
			r.peak = max(r.peak, running)
			mu.Unlock()
			time.Sleep(c.task)
			mu.Lock()
			running--
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		queued++
		r.peakWaiting = max(r.peakWaiting, queued-started)
		mu.Unlock()
	}
	if grouped {
		for h := range c.hosts {
			for range c.perHost {
				submit(h)
			}
		}
	} else {
		for range c.perHost {
			for h := range c.hosts {
				submit(h)
			}
		}
	}
	r.submitted = time.Since(start)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	r.elapsed = time.Since(start)
	return r
}

// check checks a run: GoKey never waited, at most Workers tasks ran at
// once, the crawl took the ideal time within 10%, and every host started all
// its tasks, at most limit in any window.
func (r crawlRun) check(t *testing.T, plan crawlPlan, limit int, window, ideal time.Duration) {
	t.Helper()
	if r.submitted != 0 {
		t.Errorf("the GoKey calls took %v; they must not wait below the queue cap", r.submitted)
	}
	if r.peak > plan.workers {
		t.Errorf("%d tasks ran at once, over %d workers", r.peak, plan.workers)
	}
	if r.elapsed < ideal || r.elapsed > ideal+ideal/10 {
		t.Errorf("took %v, want within 10%% over the ideal %v", r.elapsed, ideal)
	}
	r.checkHosts(t, plan, limit, window)
}

// checkHosts checks that every host started all its tasks, at most limit
// in any window.
func (r crawlRun) checkHosts(t *testing.T, plan crawlPlan, limit int, window time.Duration) {
	t.Helper()
	for h, s := range r.starts {
		if len(s) != plan.perHost {
			t.Fatalf("host %d: %d starts, want %d", h, len(s), plan.perHost)
		}
		for j := limit; j < len(s); j++ {
			if s[j]-s[j-limit] < window {
				t.Fatalf("host %d: starts %v: %d within %v", h, s, limit+1, window)
			}
		}
	}
}

// TestGoKeyCrawlDefaults: with Options.Queue left at 0, a crawl of 1,000
// hosts × 10 URLs, each host at most 10 a second, 64 workers and 10 ms per
// URL, finishes within 10% of the time the workers allow (10,000 × 10 ms /
// 64 = 1.5625 s), submitted grouped by host or interleaved; GoKey does not
// wait. With 2,000 hosts the tasks outnumber DefaultKeyQueue: GoKey waits
// while that many are queued, and the crawl still finishes within 10% of
// the workers' time.
func TestGoKeyCrawlDefaults(t *testing.T) {
	for _, tc := range []struct {
		hosts   int
		grouped bool
	}{{1000, true}, {1000, false}, {2000, true}} {
		t.Run(fmt.Sprintf("hosts=%d/grouped=%v", tc.hosts, tc.grouped), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				plan := crawlPlan{hosts: tc.hosts, perHost: 10, workers: 64, task: 10 * time.Millisecond,
					perKey: bucketPerHost(t, limiter.Per(10, time.Second))}
				tasks := plan.hosts * plan.perHost
				r := plan.run(t, tc.grouped)
				bound := time.Duration(tasks) * plan.task / time.Duration(plan.workers)
				t.Logf("%v (workers' bound %v), GoKey done at %v, %d running at most, %d waiting at most",
					r.elapsed, bound, r.submitted, r.peak, r.peakWaiting)
				if r.elapsed < bound || r.elapsed > bound+bound/10 {
					t.Errorf("took %v, want within 10%% over the workers' bound %v", r.elapsed, bound)
				}
				if r.peak > plan.workers {
					t.Errorf("%d tasks ran at once, over %d workers", r.peak, plan.workers)
				}
				// A task handed to a worker has left the queue but may not
				// have started yet: hence + Workers.
				if r.peakWaiting > pool.DefaultKeyQueue+plan.workers {
					t.Errorf("%d tasks waited at once, over DefaultKeyQueue (%d)", r.peakWaiting, pool.DefaultKeyQueue)
				}
				if waited := r.submitted > 0; waited != (tasks > pool.DefaultKeyQueue) {
					t.Errorf("the GoKey calls returned at %v with %d tasks and a cap of %d", r.submitted, tasks, pool.DefaultKeyQueue)
				}
				r.checkHosts(t, plan, 1, 100*time.Millisecond)
			})
		})
	}
}

// TestGoKeyQueueMemory: at most DefaultKeyQueue keyed tasks wait (GoKey
// waits while that many do), and the pool's memory for them keeps within
// what DefaultKeyQueue's doc says: 64 bytes per waiting task plus 256 bytes
// per key with waiting tasks, with one key, 1,000 keys, and a key per task.
func TestGoKeyQueueMemory(t *testing.T) {
	for _, keys := range []int{1, 1000, pool.DefaultKeyQueue} {
		t.Run(fmt.Sprint("keys=", keys), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := slidingLog(t, 1, time.Hour)
				lim.TryAcquire(1) // every key is refused for an hour: every task waits
				names := make([]string, keys)
				for i := range names {
					names[i] = fmt.Sprint("host", i)
				}
				task := func(context.Context) error { return nil } // one func: no closure per task
				p := mustPool(t, pool.Options{Workers: 4, PerKey: func(string) limiter.Limiter { return lim }})
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range pool.DefaultKeyQueue {
					if err := p.GoKey(t.Context(), names[i%keys], task); err != nil {
						t.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perTask := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / pool.DefaultKeyQueue
				limit := 64 + 256*float64(keys)/pool.DefaultKeyQueue
				t.Logf("%.1f bytes per waiting task (limit %.1f)", perTask, limit)
				if perTask > limit {
					t.Errorf("%.1f bytes per waiting task, want at most %.1f", perTask, limit)
				}
				ctx, cancel := context.WithTimeout(t.Context(), time.Second)
				defer cancel()
				if err := p.GoKey(ctx, names[0], task); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("GoKey with DefaultKeyQueue tasks waiting: %v, want to wait until its ctx ends", err)
				}
				p.Close()
				p.Wait()
			})
		})
	}
}

// bucketPerHost is a PerKey of token buckets at rate, burst 1.
func bucketPerHost(t *testing.T, rate limiter.Rate) func(string) limiter.Limiter {
	keyed, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: rate, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	return keyed.For
}

// TestGoKeyNoHeadOfLine is the crawler of issue 17: URLs on several hosts,
// each host at most so many starts a second. Submitted grouped by host or
// interleaved, the crawl takes the same time, the ideal one (the slowest
// host's limit, plus one task) within 10%, GoKey never waits, every host's
// starts keep its limiter's bound, and no more than Workers tasks run.
func TestGoKeyNoHeadOfLine(t *testing.T) {
	slidingPerHost := func(limit int) func(string) limiter.Limiter {
		keyed, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
			return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: limit, Window: time.Second})
		}})
		if err != nil {
			t.Fatal(err)
		}
		return keyed.For
	}
	for _, tc := range []struct {
		name   string
		plan   func() crawlPlan
		limit  int // per host per second
		ideal  time.Duration
		window time.Duration
	}{
		// 30 URLs on 3 hosts at 5 a second: starts at 0 and 1 s.
		{"3 hosts", func() crawlPlan {
			return crawlPlan{hosts: 3, perHost: 10, workers: 8, task: 20 * time.Millisecond, perKey: slidingPerHost(5)}
		}, 5, time.Second + 20*time.Millisecond, time.Second},
		// 3,000 URLs on 1,000 hosts at 1 a second: starts at 0, 1 and 2 s.
		{"1000 hosts", func() crawlPlan {
			return crawlPlan{hosts: 1000, perHost: 3, workers: 64, task: time.Millisecond, perKey: bucketPerHost(t, limiter.Per(1, time.Second))}
		}, 1, 2*time.Second + time.Millisecond, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs [2]crawlRun
			for i, grouped := range []bool{true, false} {
				synctest.Test(t, func(t *testing.T) {
					plan := tc.plan()
					runs[i] = plan.run(t, grouped)
					t.Logf("grouped %v: %v (ideal %v), GoKey done at %v, peak %d", grouped, runs[i].elapsed, tc.ideal, runs[i].submitted, runs[i].peak)
					runs[i].check(t, plan, tc.limit, tc.window, tc.ideal)
				})
			}
			a, b := runs[0].elapsed, runs[1].elapsed
			if d := max(a, b) - min(a, b); d > min(a, b)/10 {
				t.Errorf("grouped %v, interleaved %v: more than 10%% apart", a, b)
			}
		})
	}
}

// TestGoKeyConcurrencyLimiter: a per-key limiter that cannot say when it
// will grant (a Concurrency limiter: RetryAfter is 0) waits in Acquire on a
// goroutine of its own, holding no worker, so a busy key does not hold up
// another; its lease is held while the task runs.
func TestGoKeyConcurrencyLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		keyed, _ := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
			return limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
		}})
		p := mustPool(t, pool.Options{Workers: 2, PerKey: keyed.For})
		var mu sync.Mutex
		running := map[string]int{}
		var finishes []string
		for _, key := range []string{"a", "a", "a", "b", "b", "b"} {
			p.GoKey(t.Context(), key, func(context.Context) error {
				mu.Lock()
				running[key]++
				if running[key] > 1 {
					t.Errorf("%d tasks of %s at once", running[key], key)
				}
				mu.Unlock()
				time.Sleep(time.Second)
				mu.Lock()
				running[key]--
				finishes = append(finishes, fmt.Sprintf("%s@%v", key, time.Since(start)))
				mu.Unlock()
				return nil
			})
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(finishes)
		if want := "[a@1s a@2s a@3s b@1s b@2s b@3s]"; fmt.Sprint(finishes) != want {
			t.Errorf("finishes %v, want %v", finishes, want)
		}
	})
}

// TestGoKeyQueueCap: GoKey waits only while Options.Queue keyed tasks are
// waiting to start, and returns as soon as one leaves the queue.
func TestGoKeyQueueCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		lim := slidingLog(t, 1, time.Second)
		p := mustPool(t, pool.Options{Workers: 1, Queue: 2, PerKey: func(string) limiter.Limiter { return lim }})
		var returned, starts []time.Duration
		var mu sync.Mutex
		for range 5 {
			if err := p.GoKey(t.Context(), "k", func(context.Context) error {
				mu.Lock()
				starts = append(starts, time.Since(start))
				mu.Unlock()
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			returned = append(returned, time.Since(start))
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		s := time.Second
		// The first starts at once; two wait; the fourth GoKey returns when the
		// second task starts (1 s), the fifth when the third does (2 s).
		if want := []time.Duration{0, 0, 0, s, 2 * s}; !slices.Equal(returned, want) {
			t.Errorf("GoKey returned at %v, want %v", returned, want)
		}
		if want := []time.Duration{0, s, 2 * s, 3 * s, 4 * s}; !slices.Equal(starts, want) {
			t.Errorf("starts %v, want %v", starts, want)
		}
	})
}

// TestGoKeyQueueCapContext: a GoKey waiting for room gives up when its ctx
// ends, and the task never runs.
func TestGoKeyQueueCapContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := slidingLog(t, 1, time.Hour)
		p := mustPool(t, pool.Options{Workers: 1, Queue: 1, PerKey: func(string) limiter.Limiter { return lim }})
		var ran atomic.Int64
		task := func(context.Context) error { ran.Add(1); return nil }
		p.GoKey(t.Context(), "k", task) // starts
		p.GoKey(t.Context(), "k", task) // waits an hour in the queue
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := p.GoKey(ctx, "k", task); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("GoKey on a full queue: %v, want DeadlineExceeded", err)
		}
		p.Close()
		err := p.Wait()
		if ran.Load() != 1 || !errors.Is(err, pool.ErrClosed) {
			t.Errorf("ran %d, Wait = %v; want 1 and the queued task's ErrClosed", ran.Load(), err)
		}
	})
}

// TestGoKeyContextEndsWhileQueued: a queued task whose GoKey ctx ends before
// it starts never runs; Wait reports ctx's error. Other tasks run.
func TestGoKeyContextEndsWhileQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := slidingLog(t, 1, time.Second)
		p := mustPool(t, pool.Options{Workers: 2, PerKey: func(string) limiter.Limiter { return lim }})
		var ran []int
		var mu sync.Mutex
		ctx, cancel := context.WithCancel(t.Context())
		for i := range 3 {
			c := t.Context()
			if i == 1 {
				c = ctx
			}
			p.GoKey(c, "k", func(context.Context) error {
				mu.Lock()
				ran = append(ran, i)
				mu.Unlock()
				return nil
			})
		}
		time.Sleep(500 * time.Millisecond)
		cancel()
		err := p.Wait()
		if !slices.Equal(ran, []int{0, 2}) || !errors.Is(err, context.Canceled) {
			t.Errorf("ran %v, Wait = %v; want [0 2] and Canceled", ran, err)
		}
	})
}

// TestGoKeyCloseAndParentContext: Close, or the end of Options.Context,
// fails every queued keyed task at once (parked, waiting in Acquire, or
// ready), and leaves no goroutine or timer behind.
func TestGoKeyCloseAndParentContext(t *testing.T) {
	for _, how := range []string{"Close", "Context"} {
		t.Run(how, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { testGoKeyEnd(t, how) }) })
	}
}

// testGoKeyEnd queues keyed tasks parked on a rate and waiting on a
// Concurrency limiter, ends the pool by how (Close or its Context) and checks
// that Wait reports every queued task at once and nothing is held.
func testGoKeyEnd(t *testing.T, how string) {
	start := time.Now()
	parent, cancel := context.WithCancel(t.Context())
	defer cancel()
	rate := slidingLog(t, 1, time.Hour)
	conc, _ := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
	p := mustPool(t, pool.Options{Workers: 2, Context: parent, PerKey: func(k string) limiter.Limiter {
		if k == "conc" {
			return conc
		}
		return rate
	}})
	var ran atomic.Int64
	for _, key := range []string{"rate", "rate", "rate", "conc", "conc"} {
		p.GoKey(t.Context(), key, func(ctx context.Context) error {
			ran.Add(1)
			<-ctx.Done()
			return nil
		})
	}
	time.Sleep(time.Second)
	want := pool.ErrClosed
	if how == "Close" {
		p.Close()
	} else {
		cancel()
		want = context.Canceled
	}
	err := p.Wait()
	joined, _ := err.(interface{ Unwrap() []error })
	if ran.Load() != 2 || joined == nil || len(joined.Unwrap()) != 3 || !errors.Is(err, want) {
		t.Errorf("ran %d, Wait = %v; want 2 ran and 3 errors, %v", ran.Load(), err, want)
	}
	if el := time.Since(start); el != time.Second {
		t.Errorf("Wait returned at %v, want 1s (the hour's wait drained)", el)
	}
	if conc.InUse() != 0 {
		t.Errorf("%d concurrency permits held after Wait", conc.InUse())
	}
}

// TestGoKeyLimiterFails: a key whose limiter fails (closed) fails its
// queued tasks, reported by Wait, and holds up no other key.
func TestGoKeyLimiterFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := slidingLog(t, 1, time.Hour)
		good := slidingLog(t, 10, time.Second)
		bad.Close()
		p := mustPool(t, pool.Options{Workers: 1, PerKey: func(k string) limiter.Limiter {
			if k == "bad" {
				return bad
			}
			return good
		}})
		var ran atomic.Int64
		for _, key := range []string{"bad", "good", "bad", "good"} {
			if err := p.GoKey(t.Context(), key, func(context.Context) error { ran.Add(1); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		err := p.Wait()
		joined, _ := err.(interface{ Unwrap() []error })
		if ran.Load() != 2 || joined == nil || len(joined.Unwrap()) != 2 || !errors.Is(err, limiter.ErrClosed) {
			t.Errorf("ran %d, Wait = %v; want 2 ran and 2 ErrClosed", ran.Load(), err)
		}
	})
}

// TestNilContextPanics: a nil ctx panics with "pool: nil Context" before
// the pool changes: Wait afterwards returns at once.
func TestNilContextPanics(t *testing.T) {
	p := mustPool(t, pool.Options{Workers: 1})
	task := func(context.Context) error { return nil }
	var nilCtx context.Context
	for name, call := range map[string]func(){
		"GoContext": func() { p.GoContext(nilCtx, task) },
		"GoKey":     func() { p.GoKey(nilCtx, "k", task) },
		"Map": func() {
			pool.Map(nilCtx, slices.Values([]int{1}), func(context.Context, int) (int, error) { return 0, nil }, pool.MapOptions{Workers: 1})
		},
		"MapKey": func() {
			pool.MapKey(nilCtx, slices.Values([]int{1}), nil, func(context.Context, int) (int, error) { return 0, nil }, pool.MapOptions{Workers: 1})
		},
	} {
		func() {
			defer func() {
				if r := recover(); r != "pool: nil Context" {
					t.Errorf("%s(nil): recovered %v, want the panic \"pool: nil Context\"", name, r)
				}
			}()
			call()
		}()
	}
	if err := p.Go(task); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestTryGoKey never waits and does not jump the key's queue.
func TestTryGoKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := slidingLog(t, 1, time.Second)
		p := mustPool(t, pool.Options{Workers: 2, PerKey: func(string) limiter.Limiter { return lim }})
		task := func(context.Context) error { return nil }
		if err := p.TryGoKey("k", task); err != nil {
			t.Fatalf("TryGoKey with a permit: %v", err)
		}
		if err := p.TryGoKey("k", task); !errors.Is(err, limiter.ErrLimited) {
			t.Errorf("TryGoKey without a permit: %v, want ErrLimited", err)
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}

		// Key u has no limit, but a task of u waits for the one worker:
		// TryGoKey must not go ahead of it.
		p = mustPool(t, pool.Options{Workers: 1})
		p.Go(func(context.Context) error { time.Sleep(time.Second); return nil })
		p.GoKey(t.Context(), "u", task)
		if err := p.TryGoKey("u", task); !errors.Is(err, limiter.ErrLimited) || errors.Is(err, pool.ErrBusy) {
			t.Errorf("TryGoKey behind a waiting task of its key: %v, want ErrLimited, not ErrBusy", err)
		}
		if err := p.TryGoKey("v", task); !errors.Is(err, pool.ErrBusy) {
			t.Errorf("TryGoKey with every worker busy: %v, want ErrBusy", err)
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMapKey: a Map over URLs with a per-host limiter, in both orders: every
// URL is fetched once, each host keeps its bound, and the slow host holds up
// no other: the crawl takes the slow host's time.
func TestMapKey(t *testing.T) {
	for _, order := range []pool.MapOrder{pool.InputOrder, pool.CompletionOrder} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			limits := map[string]*limiter.SlidingLog{
				"slow.example": slidingLog(t, 1, time.Second),
				"fast.example": slidingLog(t, 100, time.Second),
			}
			var urls []string
			for i := range 4 {
				urls = append(urls, fmt.Sprintf("https://slow.example/%d", i))
			}
			for i := range 20 {
				urls = append(urls, fmt.Sprintf("https://fast.example/%d", i))
			}
			fetch := func(ctx context.Context, u string) (string, error) {
				return fmt.Sprintf("%s@%v", u, time.Since(start)), nil
			}
			var got []string
			for r, err := range pool.MapKey(t.Context(), slices.Values(urls), hostOf, fetch, pool.MapOptions{
				Workers: 4, Order: order, PerKey: func(h string) limiter.Limiter { return limits[h] },
			}) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, r)
			}
			checkMapKeyResults(t, order, urls, got)
			if el := time.Since(start); el != 3*time.Second {
				t.Errorf("order %d: took %v, want 3s (the slow host's 4 URLs at 1 a second)", order, el)
			}
		})
	}
}

// checkMapKeyResults checks that every URL has its result (in input order
// for InputOrder) and that no fast URL waited.
func checkMapKeyResults(t *testing.T, order pool.MapOrder, urls, got []string) {
	t.Helper()
	if len(got) != len(urls) {
		t.Fatalf("order %d: %d results, want %d", order, len(got), len(urls))
	}
	for i, r := range got {
		if want := urls[i] + "@"; order == pool.InputOrder && !strings.HasPrefix(r, want) {
			t.Errorf("result %d is %s, want %s's", i, r, urls[i])
		}
		if strings.HasPrefix(r, "https://fast") && !strings.HasSuffix(r, "@0s") {
			t.Errorf("order %d: %s: a fast URL waited for the slow host", order, r)
		}
	}
}

func hostOf(u string) string {
	rest := u[len("https://"):]
	for i := range len(rest) {
		if rest[i] == '/' {
			return rest[:i]
		}
	}
	return rest
}

// TestGoKeyRoomWakeNotLost: two GoKey calls wait for room; the room comes
// back at the instant the first one's ctx ends. Whichever way that race
// goes, the second must get the room (it waited for good when the first
// took the wake-up and then gave up: found by TestPoolKeyBounds).
func TestGoKeyRoomWakeNotLost(t *testing.T) {
	for range 100 {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			lim := slidingLog(t, 1, time.Second)
			p := mustPool(t, pool.Options{Workers: 1, Queue: 1, PerKey: func(string) limiter.Limiter { return lim }})
			task := func(context.Context) error { return nil }
			p.GoKey(t.Context(), "k", task) // starts at 0
			p.GoKey(t.Context(), "k", task) // waits until 1 s: the queue is full
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			var wg sync.WaitGroup
			wg.Go(func() { p.GoKey(ctx, "k", task) }) // gives up at 1 s, or gets in
			var at time.Duration
			wg.Go(func() {
				time.Sleep(time.Nanosecond)
				if err := p.GoKey(t.Context(), "k", task); err != nil {
					t.Error(err)
				}
				at = time.Since(start)
			})
			wg.Wait()
			if err := p.Wait(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			if at > 2*time.Second {
				t.Errorf("the second waiter got in at %v", at)
			}
		})
	}
}

// TestGoContextCloseAndDeadline: a GoContext waiting in the limiter when its
// deadline and Close come at the same instant fails with one of the two
// (DeadlineExceeded or ErrClosed), or starts its task, never fails with a
// bare context.Canceled (found by TestPoolBounds).
func TestGoContextCloseAndDeadline(t *testing.T) {
	for range 100 {
		synctest.Test(t, func(t *testing.T) {
			conc, _ := limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
			p := mustPool(t, pool.Options{Workers: 2, Limiter: conc})
			p.Go(func(ctx context.Context) error { <-ctx.Done(); return nil }) // holds the permit until Close
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			time.AfterFunc(time.Second, func() { p.Close() })
			var ran atomic.Bool
			err := p.GoContext(ctx, func(context.Context) error { ran.Store(true); return nil })
			p.Wait()
			// The grant may win the race (the first task returns at Close and
			// gives its permit back): then the task runs.
			if err == nil && !ran.Load() || err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, pool.ErrClosed) {
				t.Errorf("GoContext: %v (ran %v), want nil and the task run, DeadlineExceeded or ErrClosed", err, ran.Load())
			}
		})
	}
}

// TestNoAllocsPerTask: Go (with a limiter), the queued mode and GoKey
// allocate nothing per task once warm, nor does reporting each task's
// outcome to a limiter that learns from outcomes.
func TestNoAllocsPerTask(t *testing.T) {
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1_000_000_000, time.Second), Burst: 1_000_000_000})
	if err != nil {
		t.Fatal(err)
	}
	reporter := &countingReporter{}
	nop := func(context.Context) error { return nil }
	ctx := context.Background()
	for name, tc := range map[string]struct {
		opts   pool.Options
		submit func(p *pool.Pool)
	}{
		"Go":     {pool.Options{Workers: 2, Limiter: lim}, func(p *pool.Pool) { p.Go(nop) }},
		"Queue":  {pool.Options{Workers: 2, Queue: 64, Limiter: lim}, func(p *pool.Pool) { p.Go(nop) }},
		"GoKey":  {pool.Options{Workers: 2, Queue: 64, PerKey: func(string) limiter.Limiter { return lim }}, func(p *pool.Pool) { p.GoKey(ctx, "k", nop) }},
		"Report": {pool.Options{Workers: 2, Limiter: reporter}, func(p *pool.Pool) { p.Go(nop) }},
	} {
		p := mustPool(t, tc.opts)
		for range 1000 { // warm: workers started, the key's queue grown
			tc.submit(p)
		}
		if allocs := testing.AllocsPerRun(2000, func() { tc.submit(p) }); allocs > 0 {
			t.Errorf("%s: %v allocations per task, want 0", name, allocs)
		}
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if n := reporter.reports.Load(); n < 3000 {
		t.Errorf("%d outcomes reported, want one per task (3000 or more)", n)
	}
}
