package main

import (
	"context"
	"sync"

	"github.com/rategate/rategate/limiter"
)

// inTurn is the limit of its first limiter, then its second: n permits
// are taken from first, kept, then taken from second. A refusal by second
// spends nothing more of first's: the permits first granted are held for
// the next request. So a pacing bucket and a bounding window kept in Redis,
// which limiter.Chain cannot decide atomically, still give their whole
// rate. second's bound holds exactly at the instants it grants; first's
// holds at the instants first grants, and a grant waits for second after.
//
// Calls are serialised: a TryAcquire while an Acquire waits is refused (it
// does not wait for the lock), as limiters refuse rather than jump a queue.
type inTurn struct {
	first, second limiter.Limiter
	mu            sync.Mutex
	held          int // permits first granted that second has not
}

func (s *inTurn) TryAcquire(n int) limiter.Lease {
	if !s.mu.TryLock() {
		return limiter.Denied(limiter.ErrLimited, 0)
	}
	defer s.mu.Unlock()
	if need := n - s.held; need > 0 {
		if l := s.first.TryAcquire(need); !l.Granted() {
			return l
		}
		s.held += need
	}
	l := s.second.TryAcquire(n)
	if l.Granted() {
		s.held -= n
	}
	return l
}

func (s *inTurn) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if need := n - s.held; need > 0 {
		if _, err := s.first.Acquire(ctx, need); err != nil {
			return limiter.Denied(err, 0), err
		}
		s.held += need
	}
	l, err := s.second.Acquire(ctx, n)
	if err == nil {
		s.held -= n
	}
	return l, err
}
