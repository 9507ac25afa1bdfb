package limiter

import "time"

// Foreseer is implemented by limiters that can tell how long a request for
// n permits made now would wait behind the callers already queued, if they
// all stay and nobody else takes permits: TokenBucket and LeakyBucket, whose
// state moves on by exactly each queued grant's cost. Acquire itself foresees
// only the wait of the head of the queue (a waiter ahead may still leave),
// so a caller that would rather be refused at once than wait in vain, such
// as an HTTP server queueing requests for a bounded time, asks Foresee first.
type Foreseer interface {
	// Foresee returns the wait, and false when it cannot be told (the
	// request can never be granted, the limiter is closed, or its state
	// cannot be read without a lock held elsewhere).
	Foresee(n int) (time.Duration, bool)
}

// Foresee returns the wait of a request for n permits behind the queue, for
// the limiters whose policy can tell it; see Foreseer.
func (b *bucket) Foresee(n int) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.q.Closed() != nil || n < 0 || int64(n) > b.pol.maxRequest() {
		return 0, false
	}
	d := b.g.behind(b.now(), b.q.Queued(), int64(n))
	if d < 0 {
		return 0, false
	}
	return time.Duration(d), true
}

// behind is the wait until n permits could be granted after the queued
// permits ahead are granted in order, each as soon as it can be: the state
// moves on by their cost, and nothing else changes it.
func (g *gcra) behind(now, queued, n int64) int64 {
	c := g.cfg.Load()
	tat, ok := g.load()
	delta := now - c.base
	if !ok || delta > c.maxDelta || queued > scaledLimit/c.d {
		return -1
	}
	nows := delta * c.n
	over := max(tat, nows) + queued*c.d - nows // the pacer's next slot
	if !c.pacer {
		over += max(n, 1)*c.d - c.tol
	}
	if over <= 0 {
		return 0
	}
	return ceilDiv(over, c.n)
}

// Foresee is Foreseer's Foresee for one key's limiter: for a key of a
// Keyed whose limiter is a Foreseer, and for a key of a KeyedTokenBucket.
func (f forKey[K]) Foresee(n int) (time.Duration, bool) {
	if s, ok := f.set.(interface {
		Foresee(key K, n int) (time.Duration, bool)
	}); ok {
		return s.Foresee(f.key, n)
	}
	return 0, false
}

// Foresee is Foreseer's Foresee for key's limiter (false when it is not a
// Foreseer).
func (k *Keyed[K]) Foresee(key K, n int) (time.Duration, bool) {
	e, err := k.pin(key)
	if err != nil {
		return 0, false
	}
	defer k.unpin(key, e, Lease{})
	if f, ok := e.lim.(Foreseer); ok && !k.closed.Load() {
		return f.Foresee(n)
	}
	return 0, false
}

// Foresee is Foreseer's Foresee for key's bucket: the wait of n permits
// behind the Acquire calls queued on key.
func (k *KeyedTokenBucket[K]) Foresee(key K, n int) (time.Duration, bool) {
	if k.check(n) != reasonNone {
		return 0, false
	}
	c, now := k.cfg, int64(time.Since(k.origin))
	s := k.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	k.rebase(s, now)
	nows := (now - s.base) * c.n
	tat, queued := nows, int64(0)
	if t, found := s.tats[key]; found {
		tat = max(tat, t)
	}
	if q := s.waits[key]; q != nil {
		queued = q.Queued()
	}
	if queued > scaledLimit/c.d {
		return 0, false
	}
	over := tat + (queued+max(int64(n), 1))*c.d - c.tol - nows
	if over <= 0 {
		return 0, true
	}
	return time.Duration(ceilDiv(over, c.n)), true
}
