package properties_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
	"pgregory.net/rapid"
)

// This file checks the keyed limiters against a reference that never
// evicts: a map of plain limiters, each made with the same configuration at
// the instant its key is first used. In a synctest bubble, one driver runs
// a drawn schedule over many keys (TryAcquire and Acquire with a drawn
// deadline, through the keyed limiter or through For(key), releases of
// held Concurrency leases, sleeps, Prune, Close), and after every call
// compares the keyed limiter's answer with the reference's: granted or
// not, the error (errors.Is), RetryAfter, and for Acquire the instant it
// returned. Since the reference keeps every key's limiter for ever and its
// keys share nothing, equal answers show that eviction (Prune, the sweep of
// new keys, IdleTimeout) never changes a decision, that keys are
// independent, and that For(key) is the key's limiter. Each key's own bound
// is also checked over its grants.
//
//   - TestKeyedSchedule: Keyed[string] whose factory makes one of the
//     limiters whose eviction keeps decisions (token bucket, pacer, sliding
//     log, concurrency), with a drawn IdleTimeout.
//   - TestKeyedTokenBucketSchedule: KeyedTokenBucket[string] against plain
//     TokenBuckets.

func TestKeyedSchedule(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		k := rapid.SampledFrom(keyedKinds).Draw(rt, "kind")
		c := drawConfig(rt, k, drawOpts{maxLimit: 8})
		c.queue.Spin = 0
		idle := time.Duration(0)
		if rapid.Bool().Draw(rt, "idleTimeout") {
			idle = drawSpan(rt, c.unit(), "idle") + 1
		}
		s := keyedDrawSchedule(rt, c)
		r := keyedExecute(t, c, s, func() (keyedSet, error) {
			return limiter.NewKeyed(limiter.KeyedOptions[string]{
				New:         func(string) (limiter.Limiter, error) { return c.build() },
				IdleTimeout: idle,
			})
		})
		if err := keyedCheck(c, s, r); err != nil {
			rt.Fatalf("Keyed of %v, IdleTimeout %v\n%v", c, idle, err)
		}
	})
}

func TestKeyedTokenBucketSchedule(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(rt *rapid.T) {
		c := drawConfig(rt, tokenBucket, drawOpts{maxLimit: 8})
		s := keyedDrawSchedule(rt, c)
		r := keyedExecute(t, c, s, func() (keyedSet, error) {
			return limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{
				Rate: limiter.Per(c.events, c.per), Burst: c.burst, Queue: c.queue,
			})
		})
		if err := keyedCheck(c, s, r); err != nil {
			rt.Fatalf("KeyedTokenBucket of %v\n%v", c, err)
		}
	})
}

// keyedKinds are the factories whose eviction the keyed limiter promises
// keeps every decision. The fixed and sliding windows are left out: their
// windows are aligned to the limiter's creation, so a key evicted while its
// current window is empty and made anew later has its windows moved, and
// decides differently from one never evicted (reported as a limiter bug,
// with a reproduction kept out of the tree).
var keyedKinds = []kind{tokenBucket, leakyBucket, slidingLog, slidingLog, concurrency, concurrency}

// keyedSet is what both keyed limiters offer.
type keyedSet interface {
	TryAcquire(key string, n int) limiter.Lease
	Acquire(ctx context.Context, key string, n int) (limiter.Lease, error)
	For(key string) limiter.Limiter
	Prune() int
	Len() int
	Close() error
}

// ---- schedules ----

type keyedOpKind int

const (
	keyedTry keyedOpKind = iota
	keyedAcquire
	keyedRelease
	keyedSleep
	keyedPrune
	keyedClose
)

type keyedOp struct {
	kind   keyedOpKind
	key    int
	n      int
	viaFor bool
	d      time.Duration // sleep; Acquire's deadline (0: none)
	lease  int           // release: which held lease (modulo the count)
}

func (o keyedOp) GoString() string {
	via := ""
	if o.viaFor {
		via = "For(k).."
	}
	switch o.kind {
	case keyedTry:
		return fmt.Sprintf("%sTryAcquire(k%d, %d)", via, o.key, o.n)
	case keyedAcquire:
		return fmt.Sprintf("%sAcquire(timeout %dns, k%d, %d)", via, int64(o.d), o.key, o.n)
	case keyedRelease:
		return fmt.Sprintf("Release(#%d)", o.lease)
	case keyedSleep:
		return fmt.Sprintf("Sleep(%dns)", int64(o.d))
	case keyedPrune:
		return "Prune()"
	}
	return "Close()"
}

func keyedDrawSchedule(t *rapid.T, c config) []keyedOp {
	keys := rapid.IntRange(1, 40).Draw(t, "keys")
	u := c.unit()
	n := rapid.IntRange(1, 80).Draw(t, "opCount")
	return rapid.SliceOfN(rapid.Custom(func(t *rapid.T) keyedOp {
		var o keyedOp
		switch die := rapid.IntRange(0, 99).Draw(t, "kind"); {
		case die < 40:
			o.kind = keyedTry
		case die < 55:
			o.kind = keyedAcquire
			if rapid.IntRange(0, 3).Draw(t, "deadline") > 0 || c.kind == concurrency {
				o.d = drawSpan(t, u, "timeout") + 1
			}
		case die < 65:
			o.kind = keyedRelease
			o.lease = rapid.IntRange(0, 1000).Draw(t, "lease")
		case die < 90:
			o.kind = keyedSleep
			o.d = drawSpan(t, u, "sleep")
		case die < 99:
			o.kind = keyedPrune
		default:
			o.kind = keyedClose
		}
		if o.kind == keyedTry || o.kind == keyedAcquire {
			// Mostly a few busy keys, often a new one (whose insertion
			// sweeps others).
			if rapid.Bool().Draw(t, "busyKey") {
				o.key = rapid.IntRange(0, min(keys, 3)-1).Draw(t, "key")
			} else {
				o.key = rapid.IntRange(0, keys-1).Draw(t, "key")
			}
			o.n = drawRequest(t, c, "n", true)
			o.viaFor = rapid.Bool().Draw(t, "viaFor")
		}
		return o
	}), n, n).Draw(t, "ops")
}

// ---- running ----

type keyedResult struct {
	i          int // index of the op
	o          keyedOp
	start, end time.Duration // of the keyed call
	granted    bool
	permits    int
	err        error
	retry      time.Duration
	// The reference's answer.
	refEnd     time.Duration
	refGranted bool
	refPermits int
	refErr     error
	refRetry   time.Duration
}

func (r keyedResult) String() string {
	return fmt.Sprintf("#%d %#v from %dns: keyed: granted %v permits %d err %v RetryAfter %dns at %dns; reference: granted %v permits %d err %v RetryAfter %dns at %dns",
		r.i, r.o, int64(r.start), r.granted, r.permits, r.err, int64(r.retry), int64(r.end),
		r.refGranted, r.refPermits, r.refErr, int64(r.refRetry), int64(r.refEnd))
}

type keyedRun struct {
	failure  string
	buildErr error
	results  []keyedResult
	created  map[int]time.Duration // when each key's reference limiter was made
	evicted  int                   // keys Prune evicted
}

type keyedHeld struct{ keyed, ref limiter.Lease }

func keyedExecute(t *testing.T, c config, ops []keyedOp, build func() (keyedSet, error)) *keyedRun {
	r := &keyedRun{created: map[int]time.Duration{}}
	what := func() string { return fmt.Sprintf("%v\nops %#v", c, ops) }
	r.failure = runBubble(t, what, func(p *panics) {
		start := time.Now()
		ks, err := build()
		if err != nil {
			r.buildErr = err
			return
		}
		now := func() time.Duration { return time.Since(start) }
		refs := map[int]testLimiter{}
		closed := false
		var held []keyedHeld
		ref := func(key int) (testLimiter, error) {
			if l, ok := refs[key]; ok {
				return l, nil
			}
			l, err := c.build()
			if err != nil {
				return nil, err
			}
			refs[key] = l
			r.created[key] = now()
			return l, nil
		}
		for i, o := range ops {
			name := fmt.Sprint("k", o.key)
			x := keyedResult{i: i, o: o, start: now()}
			switch o.kind {
			case keyedSleep:
				time.Sleep(o.d)
				continue
			case keyedPrune:
				r.evicted += ks.Prune()
				continue
			case keyedClose:
				ks.Close()
				for _, l := range refs {
					l.Close()
				}
				closed = true
				continue
			case keyedRelease:
				if len(held) == 0 {
					continue
				}
				j := o.lease % len(held)
				held[j].keyed.Release()
				held[j].ref.Release()
				held = append(held[:j], held[j+1:]...)
				continue
			}
			var rl testLimiter
			if !closed {
				if rl, err = ref(o.key); err != nil {
					r.buildErr = err
					return
				}
			}
			var kl, pl limiter.Lease
			switch o.kind {
			case keyedTry:
				if o.viaFor {
					kl = ks.For(name).TryAcquire(o.n)
				} else {
					kl = ks.TryAcquire(name, o.n)
				}
				x.end = now()
				if rl != nil {
					pl = rl.TryAcquire(o.n)
				}
				x.refEnd = now()
				x.err, x.refErr = kl.Err(), pl.Err()
			case keyedAcquire:
				var wg sync.WaitGroup
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if o.d > 0 {
					ctx, cancel = context.WithTimeout(ctx, o.d)
				}
				p.goSafe(&wg, "keyed Acquire", func() {
					if o.viaFor {
						kl, x.err = ks.For(name).Acquire(ctx, o.n)
					} else {
						kl, x.err = ks.Acquire(ctx, name, o.n)
					}
					x.end = now()
				})
				if rl != nil {
					p.goSafe(&wg, "reference Acquire", func() {
						pl, x.refErr = rl.Acquire(ctx, o.n)
						x.refEnd = now()
					})
				}
				wg.Wait()
				cancel()
			}
			x.granted, x.permits, x.retry = kl.Granted(), kl.Permits(), kl.RetryAfter()
			x.refGranted, x.refPermits, x.refRetry = pl.Granted(), pl.Permits(), pl.RetryAfter()
			if rl == nil {
				x.refErr = limiter.ErrClosed
			}
			if kl.Granted() || pl.Granted() {
				held = append(held, keyedHeld{kl, pl})
			}
			r.results = append(r.results, x)
		}
		for _, h := range held {
			h.keyed.Release()
			h.ref.Release()
		}
		ks.Close()
		for _, l := range refs {
			l.Close()
		}
	})
	return r
}

// ---- checking ----

// keyedErrs are the errors a decision is compared by.
var keyedErrs = []error{limiter.ErrLimited, limiter.ErrClosed, limiter.ErrQueueFull, limiter.ErrExceedsLimit,
	limiter.ErrInvalidCount, context.DeadlineExceeded, context.Canceled}

func keyedErrClass(err error) string {
	if err == nil {
		return "nil"
	}
	for _, e := range keyedErrs {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "unclassified: " + err.Error()
}

func keyedCheck(c config, ops []keyedOp, r *keyedRun) error {
	if r.failure != "" {
		return fmt.Errorf("the run did not complete: %s\nops %#v", r.failure, ops)
	}
	if r.buildErr != nil {
		return r.buildErr
	}
	var errs []string
	grants := map[int][]grant{}
	closedAt := -1
	for i, o := range ops {
		if o.kind == keyedClose {
			closedAt = i
			break
		}
	}
	diverged := map[int]bool{}
	for _, x := range r.results {
		if x.granted {
			grants[x.o.key] = append(grants[x.o.key], grant{at: x.end - r.created[x.o.key], n: int64(x.permits), who: fmt.Sprint("#", x.i)})
		}
		if closedAt >= 0 && x.i > closedAt {
			// After Close the keyed limiter refuses everything; it may
			// report ErrClosed before checking the count.
			if x.granted || (!errors.Is(x.err, limiter.ErrClosed) && !errors.Is(x.err, limiter.ErrInvalidCount) && !errors.Is(x.err, limiter.ErrExceedsLimit)) {
				errs = append(errs, fmt.Sprintf("%s: want ErrClosed after Close", x))
			}
			continue
		}
		if diverged[x.o.key] {
			continue
		}
		// A grant due exactly at an Acquire's deadline: the plain limiters
		// grant (the grant wins a race with the context), KeyedTokenBucket,
		// which sleeps and tries again, may fail with DeadlineExceeded.
		// Either is allowed; the key's states then differ, so it is no
		// longer compared.
		if x.o.kind == keyedAcquire && x.o.d > 0 && x.end == x.start+x.o.d && x.end == x.refEnd && x.granted != x.refGranted &&
			(errors.Is(x.err, context.DeadlineExceeded) || errors.Is(x.refErr, context.DeadlineExceeded)) {
			diverged[x.o.key] = true
			continue
		}
		same := x.granted == x.refGranted && x.permits == x.refPermits && keyedErrClass(x.err) == keyedErrClass(x.refErr) &&
			x.retry == x.refRetry && (x.o.kind != keyedAcquire || x.end == x.refEnd)
		if !same {
			errs = append(errs, fmt.Sprintf("%s: differs from a limiter never evicted", x))
		}
		if (x.err == nil) != x.granted {
			errs = append(errs, fmt.Sprintf("%s: Granted and the error disagree", x))
		}
	}
	for key, gs := range grants {
		if err := checkSafety(c, gs); err != nil {
			errs = append(errs, fmt.Sprintf("key k%d (made at %dns): %v", key, int64(r.created[key]), err))
		}
	}
	if len(errs) > 0 {
		var sb strings.Builder
		for _, x := range r.results {
			fmt.Fprintf(&sb, "  %s\n", x)
		}
		return fmt.Errorf("%s\nops: %#v\nPrune evicted %d keys\nresults:\n%s", strings.Join(errs, "\n"), ops, r.evicted, sb.String())
	}
	return nil
}
