package redislimit

import (
	"context"

	"github.com/rategate/rategate/limiter"
)

// core is what every round-trip limiter of this package is: an engine (the
// script, the error policy, the waiting) and this limiter's handle on it.
// Its methods are written once and promoted to TokenBucket, FixedWindow,
// SlidingLog and Concurrency.
type core struct {
	e *engine
	h *handle
}

// newLimiter returns the round-trip limiter of type L (a core and nothing
// else) running e, or err.
func newLimiter[L ~struct{ core }](e *engine, err error) (*L, error) {
	if err != nil {
		return nil, err
	}
	return &L{core{e: e, h: e.handle("", false)}}, nil
}

// TryAcquire takes n permits if the limit has them now, in one script call;
// it never waits. Zero permits are granted when one could be, as by the
// limiters of package limiter. See limiter.Limiter.
func (c *core) TryAcquire(n int) limiter.Lease { return c.h.tryAcquire(n) }

// Acquire waits until n permits are granted, ctx ends or the limiter is
// closed; see the package doc, Waiting.
func (c *core) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	return c.h.acquire(ctx, n)
}

// Quota returns the limit's policy and its state at this process's last
// decision (no round trip of its own); see limiter.Quota.
func (c *core) Quota() limiter.Quota { return c.h.quota() }

// Stats returns this process's counters; Available is from the last decision.
func (c *core) Stats() limiter.Stats { return c.e.stats(c.h) }

// Close fails this process's waiters and later calls with ErrClosed.
func (c *core) Close() error { return c.e.close() }
