package limiter

import "context"

// bucket is what TokenBucket and LeakyBucket share: the GCRA state word and
// its lock-free fast paths, in front of the engine.
type bucket struct {
	base
	g gcra
}

// initBucket makes b a bucket of configuration c with its queue.
func (b *bucket) initBucket(c *gcraConfig, q QueueOptions) {
	c.countGrants()
	b.g.word, b.g.count = &b.word, &b.granted
	b.g.cfg.Store(c)
	b.init(&b.g, nil, q)
}

// TryAcquire takes n permits if they are available now and nobody waits in
// Acquire. It never blocks and does not allocate: a clock read and one
// compare-and-swap.
func (b *bucket) TryAcquire(n int) Lease {
	if b.q.Idle() && n >= 0 {
		now := b.now()
		switch st, retry := b.g.tryTake(now, int64(n), true); st {
		case takeOK:
			return grantedLease(&b.rl, n, now) // counted by tryTake
		case takeLimited:
			return b.reject(reasonLimited, retry)
		}
	}
	return b.tryAcquire(n)
}

// Acquire waits until n permits are granted; see Limiter. When nobody waits
// and the permits are available, it takes them without a lock.
func (b *bucket) Acquire(ctx context.Context, n int) (Lease, error) {
	if ctx == nil {
		panic("limiter: nil Context")
	}
	if b.q.Idle() && n >= 0 && ctx.Err() == nil {
		now := b.now()
		if st, _ := b.g.tryTake(now, int64(n), true); st == takeOK {
			return grantedLease(&b.rl, n, now), nil // counted by tryTake
		}
	}
	return b.acquire(ctx, n)
}

// Rate returns the current rate.
func (b *bucket) Rate() Rate { return b.g.cfg.Load().rate }

// reconfigure switches to c at once, carrying the permits owed over, and
// serves the waiters the change lets through.
func (b *bucket) reconfigure(c *gcraConfig) {
	c.countGrants()
	b.mu.Lock()
	b.g.reconfigure(b.now(), c)
	b.mu.Unlock()
	b.kick()
}
