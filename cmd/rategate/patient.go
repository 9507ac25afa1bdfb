package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/redislimit"
)

// redisPatience is how long rategate keeps asking a Redis that cannot
// decide (a timeout, a lost connection) before it gives up with an error.
const redisPatience = 10 * time.Second

// retryDelay is the wait between two questions to a Redis that could not
// decide.
const retryDelay = 100 * time.Millisecond

// patient asks a Redis limiter again when Redis could not decide
// (redislimit.ErrUnavailable), for up to patience from the first of such
// failures in a row, so that a moment's stall of the server or the network
// does not end a long copy or replay. Nothing is admitted meanwhile: a
// failure reads as a refusal with a RetryAfter of retryDelay.
type patient struct {
	limiter.Limiter
	patience time.Duration

	mu    sync.Mutex
	since time.Time // the first failure of the current run of them
}

func newPatient(l limiter.Limiter) *patient {
	return &patient{Limiter: l, patience: redisPatience}
}

func (p *patient) TryAcquire(n int) limiter.Lease {
	l := p.Limiter.TryAcquire(n)
	if p.again(l.Err()) {
		return limiter.Denied(limiter.ErrLimited, retryDelay)
	}
	return l
}

func (p *patient) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	for {
		l, err := p.Limiter.Acquire(ctx, n)
		if !p.again(err) {
			return l, err
		}
		t := time.NewTimer(retryDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return limiter.Denied(ctx.Err(), 0), ctx.Err()
		}
	}
}

// again records the error of a decision and reports whether it was Redis's
// failure to decide, to be asked again.
func (p *patient) again(err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !errors.Is(err, redislimit.ErrUnavailable) {
		p.since = time.Time{}
		return false
	}
	now := time.Now()
	if p.since.IsZero() {
		p.since = now
	}
	return now.Sub(p.since) < p.patience
}
