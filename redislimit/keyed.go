package redislimit

import (
	"context"

	"github.com/rategate/rategate/limiter"
)

// Keyed is one limit per key (per tenant, API key or client address), all
// with the same options, shared through Redis: For(key) is key's limit in
// every process using the same Options.Key. A key's state expires in Redis
// once it no longer affects a decision, so idle keys cost nothing, in Redis
// or in this process. Keys may come from clients: each is encoded into its
// own hash tag, so no key can reach another's state or choose its cluster
// slot, and long keys are hashed.
type Keyed struct {
	e *engine
}

// NewKeyedTokenBucket returns one token bucket per key; see NewTokenBucket.
func NewKeyedTokenBucket(o Options, opts limiter.TokenBucketOptions) (*Keyed, error) {
	return newKeyed(newTBEngine(o, opts))
}

// NewKeyedFixedWindow returns one fixed window per key; see NewFixedWindow.
func NewKeyedFixedWindow(o Options, opts limiter.FixedWindowOptions) (*Keyed, error) {
	return newKeyed(newFWEngine(o, opts))
}

// NewKeyedSlidingLog returns one strict log per key; see NewSlidingLog.
func NewKeyedSlidingLog(o Options, opts limiter.SlidingLogOptions) (*Keyed, error) {
	return newKeyed(newSLEngine(o, opts))
}

// NewKeyedConcurrency returns one semaphore per key; see NewConcurrency.
func NewKeyedConcurrency(o Options, opts limiter.ConcurrencyOptions) (*Keyed, error) {
	return newKeyed(newCCEngine(o, opts))
}

func newKeyed(e *engine, err error) (*Keyed, error) {
	if err != nil {
		return nil, err
	}
	return &Keyed{e: e}, nil
}

// For returns key's limiter. It is cheap: no round trip, and one
// allocation (two for a key whose Redis key is over 120 bytes, four for a
// key over 256 bytes, whose SHA-256 names it in Redis); calls for
// one key, through any number of For results, share one limit and are
// coalesced. The result also implements limiter.Quoter.
func (k *Keyed) For(key string) limiter.Limiter {
	l := &keyLimiter{}
	k.e.initHandle(&l.h, key, true)
	return l
}

// Stats returns this process's counters summed over every key (Available
// is 0: it is per key; see limiter.QuotaOf on For's result).
func (k *Keyed) Stats() limiter.Stats { return k.e.stats(nil) }

// Close fails this process's waiters and later calls, for every key, with
// ErrClosed.
func (k *Keyed) Close() error { return k.e.close() }

// keyLimiter is one key's limit: its handle, in one allocation.
type keyLimiter struct{ h handle }

func (l *keyLimiter) TryAcquire(n int) limiter.Lease { return l.h.tryAcquire(n) }

func (l *keyLimiter) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	return l.h.acquire(ctx, n)
}

// Quota returns the key's policy and its state at this limiter's last
// decision.
func (l *keyLimiter) Quota() limiter.Quota { return l.h.quota() }
