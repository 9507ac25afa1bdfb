package limiter

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoLimiter is returned when a Keyed limiter's factory fails for a key;
// Acquire wraps the factory's error with it.
var ErrNoLimiter = errors.New("limiter: keyed: no limiter for the key")

const keyedShards = 64 // a power of two

// sweepPerInsert is how many existing keys each new key examines for
// eviction: enough to keep the map near the number of busy keys, amortized
// O(1), with no goroutine.
const sweepPerInsert = 4

// KeyedOptions configures NewKeyed.
type KeyedOptions[K comparable] struct {
	// New makes the limiter of a key when the key is first used, and again
	// after the key was evicted. It is required.
	New func(key K) (Limiter, error)
	// IdleTimeout evicts keys whose limiter is not from this package (so its
	// state cannot be read) after this long without a call. Zero never
	// evicts them. This package's limiters are evicted as soon as they are
	// idle: nobody waits, no lease is held, and their state is that of a new
	// limiter. For token buckets, pacers, sliding logs and concurrency
	// limiters eviction therefore never changes a decision. A FixedWindow or
	// SlidingWindow is idle when its current window holds no grant; the one
	// made anew aligns its windows to the key's next use (as a counter with
	// an expiry does), so its window edges, and hence some decisions, may
	// differ from the evicted one's. Its bound holds in its own windows.
	IdleTimeout time.Duration
}

// Keyed holds one limiter per key (per client IP, per host, per tenant),
// made on first use by a factory. Idle keys are evicted lazily: each new key
// examines a few existing ones, so no goroutine or timer runs per key or per
// Keyed. It is safe for concurrent use.
//
// Use Keyed's own TryAcquire and Acquire rather than keeping the limiter of
// a key: a key may be evicted and made anew once idle.
type Keyed[K comparable] struct {
	newLim  func(K) (Limiter, error)
	idleFor int64
	origin  time.Time
	seed    maphash.Seed
	closed  atomic.Bool
	shards  [keyedShards]keyedShard[K]
}

type keyedShard[K comparable] struct {
	mu sync.Mutex
	m  map[K]*keyedEntry
	_  [48]byte // one shard per cache line
}

type keyedEntry struct {
	lim  Limiter
	pins int   // calls deciding with lim now; guarded by the shard's mu
	held int   // granted leases of lim not yet released, when they give permits back
	last int64 // ns since origin of the last call
	born int64 // ns since origin when the entry was made
}

type idler interface{ isIdle() bool }

// NewKeyed returns an empty Keyed, or an *OptionError.
func NewKeyed[K comparable](opts KeyedOptions[K]) (*Keyed[K], error) {
	if opts.New == nil {
		return nil, optErr("New", "a factory is required")
	}
	if opts.IdleTimeout < 0 {
		return nil, optErr("IdleTimeout", "must not be negative, got %v", opts.IdleTimeout)
	}
	k := &Keyed[K]{newLim: opts.New, idleFor: int64(opts.IdleTimeout), origin: time.Now(), seed: maphash.MakeSeed()}
	for i := range k.shards {
		k.shards[i].m = make(map[K]*keyedEntry)
	}
	return k, nil
}

func (k *Keyed[K]) shard(key K) *keyedShard[K] {
	return &k.shards[maphash.Comparable(k.seed, key)&(keyedShards-1)]
}

// pin returns key's entry, pinned so that it is not evicted until unpin,
// making its limiter if needed. The factory runs without any lock held, so
// it may call back into k, and a slow one stalls only its own key.
func (k *Keyed[K]) pin(key K) (*keyedEntry, error) {
	s := k.shard(key)
	s.mu.Lock()
	if e, ok := s.m[key]; ok {
		e.pins++
		e.last = k.now()
		s.mu.Unlock()
		return e, nil
	}
	s.mu.Unlock()
	lim, err := k.newLim(key)
	if err == nil && lim == nil {
		err = errors.New("factory returned a nil Limiter")
	}
	if err != nil {
		return nil, fmt.Errorf("%w %v: %w", ErrNoLimiter, key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := k.now()
	e, ok := s.m[key]
	if ok {
		// Another call made the key's limiter first: use that one.
		if c, closer := lim.(interface{ Close() error }); closer {
			_ = c.Close()
		}
	} else {
		k.sweep(s, now)
		e = &keyedEntry{lim: lim, born: now}
		s.m[key] = e
	}
	e.pins++
	e.last = now
	return e, nil
}

// unpin ends a call's use of e; l is the lease it was granted, if any,
// which it returns wrapped so that e stays while l holds permits.
func (k *Keyed[K]) unpin(key K, e *keyedEntry, l Lease) Lease {
	s := k.shard(key)
	s.mu.Lock()
	e.pins--
	e.last = k.now()
	hold := l.Holds()
	if hold {
		e.held++
	}
	s.mu.Unlock()
	if hold {
		l.rel = &keyedHold[K]{k: k, s: s, e: e, inner: l.rel}
	}
	return l
}

// keyedHold is the Releaser of a key's lease that gives permits back: it
// keeps the key from eviction until the lease is released.
type keyedHold[K comparable] struct {
	k     *Keyed[K]
	s     *keyedShard[K]
	e     *keyedEntry
	inner Releaser
}

// ReleasePermits releases the key's permits; the key's idle time counts
// from now.
func (h *keyedHold[K]) ReleasePermits(n int) {
	h.inner.ReleasePermits(n)
	h.s.mu.Lock()
	h.e.held = max(h.e.held-1, 0)
	h.e.last = h.k.now()
	h.s.mu.Unlock()
}

// sweep evicts idle keys among a few that map iteration (which starts at a
// random place) offers. The caller holds s.mu.
func (k *Keyed[K]) sweep(s *keyedShard[K], now int64) {
	seen := 0
	for key, e := range s.m {
		if seen++; seen > sweepPerInsert {
			return
		}
		if k.evictable(e, now) {
			delete(s.m, key)
		}
	}
}

// evictable reports whether e can go: nobody is deciding with it, no lease
// of it holds permits, and its limiter is as if new (or, when its state
// cannot be read, it was not used for IdleTimeout).
func (k *Keyed[K]) evictable(e *keyedEntry, now int64) bool {
	if e.pins > 0 || e.held > 0 {
		return false
	}
	if i, ok := e.lim.(idler); ok {
		return i.isIdle()
	}
	return k.idleFor > 0 && now-e.last >= k.idleFor
}

func (k *Keyed[K]) now() int64 { return int64(time.Since(k.origin)) }

// TryAcquire takes n permits from key's limiter if they are available now.
// When the factory fails, the lease's Err is ErrNoLimiter.
func (k *Keyed[K]) TryAcquire(key K, n int) Lease {
	if k.closed.Load() {
		return denied(reasonClosed, 0)
	}
	e, err := k.pin(key)
	if err != nil {
		return Denied(err, 0)
	}
	return k.unpin(key, e, e.lim.TryAcquire(n))
}

// Acquire waits until key's limiter grants n permits; see Limiter.
func (k *Keyed[K]) Acquire(ctx context.Context, key K, n int) (Lease, error) {
	if ctx == nil {
		panic("limiter: nil Context")
	}
	if k.closed.Load() {
		return denied(reasonClosed, 0), ErrClosed
	}
	e, err := k.pin(key)
	if err != nil {
		return Denied(err, 0), err
	}
	l, err := e.lim.Acquire(ctx, n)
	return k.unpin(key, e, l), err
}

// Len returns the number of keys held.
func (k *Keyed[K]) Len() int {
	n := 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Prune evicts every idle key now and returns how many it evicted. Eviction
// also happens lazily; Prune is for callers that want memory back at once.
func (k *Keyed[K]) Prune() int {
	now, evicted := k.now(), 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		for key, e := range s.m {
			if k.evictable(e, now) {
				delete(s.m, key)
				evicted++
			}
		}
		s.mu.Unlock()
	}
	return evicted
}

// For returns the Limiter of one key: its TryAcquire and Acquire are those
// of k with key (so eviction stays safe), and it can be handed to anything
// that takes a Limiter: a pool per host, a pipe per tenant.
func (k *Keyed[K]) For(key K) Limiter { return &forKey[K]{k, key} }

// keyedSet is what For needs of a keyed limiter.
type keyedSet[K comparable] interface {
	TryAcquire(key K, n int) Lease
	Acquire(ctx context.Context, key K, n int) (Lease, error)
	Quota(key K) Quota
	// adopt makes a lease of key granted through the For limiter f one
	// that f settles, where the key's limiter settles (or may be evicted
	// before the lease is settled); settle settles it.
	adopt(f Releaser, l Lease) Lease
	settle(key K, at int64, granted, actual int)
	// resolve and givesBack serve a key's limiter as a Chain member.
	resolve(key K, rel Releaser) (Limiter, part, pinner, error)
	givesBack(key K) bool
	await(ctx context.Context, key K, n int) (Lease, error)
	countGrant(key K)
}

// forKey is one key of a keyed limiter, as a Limiter. It is also the
// Releaser of the rate leases it grants, which settle by key (Lease.Settle).
type forKey[K comparable] struct {
	set keyedSet[K]
	key K
}

func (f *forKey[K]) TryAcquire(n int) Lease { return f.set.adopt(f, f.set.TryAcquire(f.key, n)) }
func (f *forKey[K]) Acquire(ctx context.Context, n int) (Lease, error) {
	l, err := f.set.Acquire(ctx, f.key, n)
	return f.set.adopt(f, l), err
}
func (f *forKey[K]) Quota() Quota    { return f.set.Quota(f.key) }
func (f *forKey[K]) givesBack() bool { return f.set.givesBack(f.key) }
func (f *forKey[K]) resolve() (Limiter, part, pinner, error) {
	return f.set.resolve(f.key, f)
}
func (f *forKey[K]) await(ctx context.Context, n int) (Lease, error) {
	return f.set.await(ctx, f.key, n)
}
func (f *forKey[K]) countGrant() { f.set.countGrant(f.key) }

// ReleasePermits does nothing: the leases f is the Releaser of are rate
// leases, whose permits are spent.
func (f *forKey[K]) ReleasePermits(int) {}

// SettlePermits settles a lease whose grant instant is not known: overuse
// becomes debt, nothing comes back.
func (f *forKey[K]) SettlePermits(granted, actual int) { f.set.settle(f.key, -1, granted, actual) }

func (f *forKey[K]) settleAt(at int64, granted, actual int) { f.set.settle(f.key, at, granted, actual) }

// Spent reports true: a rate limiter's permits are spent when granted.
func (f *forKey[K]) Spent() bool { return true }

// Spender is implemented by a Releaser whose leases hold no permits that
// Release gives back (its ReleasePermits gives nothing back: a rate
// limiter's lease that is a Releaser only to settle or to learn from
// outcomes). Spent returns true for such leases, and Lease.Holds reports
// false for them.
type Spender interface{ Spent() bool }

// Spent reports true: a rate limiter's permits are spent when granted.
func (*rateLease) Spent() bool { return true }

// Spent reports whether no member of the chain gives permits back.
func (c *chain) Spent() bool { return !givesBack(c) }

// Spent reports whether no member's lease holds permits.
func (h heldLeases) Spent() bool {
	for _, l := range h {
		if l.Holds() {
			return false
		}
	}
	return true
}

// Holds reports whether l holds permits that its Release gives back: a
// granted lease of a Concurrency, of a Chain or a key holding one, or of a
// limiter from outside this package whose Releaser is not a Spender that
// says it is spent. A rate limiter's lease (its permits are spent when
// granted), a refused lease and the zero Lease hold nothing. Code that
// wraps leases (to time how long they are held, say) can leave the others
// as they are.
func (l Lease) Holds() bool {
	if !l.granted() || l.rel == nil {
		return false
	}
	s, ok := l.rel.(Spender)
	return !ok || !s.Spent()
}

// Stats sums the Stats of every key's limiter that has a Stats method
// (this package's limiters do). Evicted keys no longer count.
func (k *Keyed[K]) Stats() Stats {
	var st Stats
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if sl, ok := e.lim.(interface{ Stats() Stats }); ok {
				x := sl.Stats()
				st.Available += x.Available
				st.Queued += x.Queued
				st.Waiters += x.Waiters
				st.Granted += x.Granted
				st.Rejected += x.Rejected
			}
		}
		s.mu.Unlock()
	}
	return st
}

// Close closes every key's limiter that has a Close method and makes later
// calls fail with ErrClosed.
func (k *Keyed[K]) Close() error {
	if k.closed.Swap(true) {
		return nil
	}
	var errs []error
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		for _, e := range s.m {
			if c, ok := e.lim.(interface{ Close() error }); ok {
				errs = append(errs, c.Close())
			}
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Quota returns the Quota of key's limiter (made if the key is new), or the
// zero Quota when that limiter does not report one or the factory fails.
func (k *Keyed[K]) Quota(key K) Quota {
	if k.closed.Load() {
		return Quota{}
	}
	e, err := k.pin(key)
	if err != nil {
		return Quota{}
	}
	q, _ := QuotaOf(e.lim)
	k.unpin(key, e, Lease{})
	return q
}

// keyPin is a key's entry pinned for a Chain's decision.
type keyPin[K comparable] struct {
	k   *Keyed[K]
	key K
	e   *keyedEntry
}

func (p *keyPin[K]) wrap(l Lease) Lease {
	if !l.Holds() {
		return l
	}
	s := p.k.shard(p.key)
	s.mu.Lock()
	p.e.held++
	s.mu.Unlock()
	l.rel = &keyedHold[K]{k: p.k, s: s, e: p.e, inner: l.rel}
	return l
}

func (p *keyPin[K]) unpin() { p.k.unpin(p.key, p.e, Lease{}) }

func (k *Keyed[K]) resolve(key K, _ Releaser) (Limiter, part, pinner, error) {
	if k.closed.Load() {
		return nil, nil, nil, ErrClosed
	}
	e, err := k.pin(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return e.lim, nil, &keyPin[K]{k: k, key: key, e: e}, nil
}

// await is a Chain's wait in key's limiter's queue: it counts nothing
// where the limiter can wait so (see awaiter).
func (k *Keyed[K]) await(ctx context.Context, key K, n int) (Lease, error) {
	if k.closed.Load() {
		return denied(reasonClosed, 0), ErrClosed
	}
	e, err := k.pin(key)
	if err != nil {
		return Denied(err, 0), err
	}
	var l Lease
	if a, ok := e.lim.(awaiter); ok {
		l, err = a.await(ctx, n)
	} else {
		l, err = e.lim.Acquire(ctx, n)
	}
	return k.unpin(key, e, l), err
}

// adopt makes a rate lease of key's limiter, granted through For, one that
// the For limiter f settles, with its instant in k's time: should the
// key's limiter be evicted before the lease is settled, its debt then goes
// to the key's next limiter.
func (k *Keyed[K]) adopt(f Releaser, l Lease) Lease {
	if r, ok := l.rel.(*rateLease); ok && l.granted() {
		l.x = ^(l.at() + int64(r.b.origin.Sub(k.origin)))
		l.rel = f
	}
	return l
}

// settle settles a lease of key granted at instant at of k (see
// Lease.Settle) with key's limiter: the one that granted it, or, if that
// one was evicted, the key's limiter now, which takes the debt of an
// overuse and gives nothing back.
func (k *Keyed[K]) settle(key K, at int64, granted, actual int) {
	if k.closed.Load() {
		return
	}
	e, err := k.pin(key)
	if err != nil {
		return
	}
	defer k.unpin(key, e, Lease{})
	b, ok := e.lim.(based)
	if !ok {
		return
	}
	inner := b.core()
	innerAt := at - int64(inner.origin.Sub(k.origin))
	if at < 0 || e.born > at {
		innerAt = -1 // granted by a limiter since evicted
	}
	inner.settleAt(innerAt, granted, actual)
}

// countGrant counts, in key's limiter, a grant a Chain made through await.
func (k *Keyed[K]) countGrant(key K) {
	e, err := k.pin(key)
	if err != nil {
		return
	}
	if a, ok := e.lim.(awaiter); ok {
		a.countGrant()
	}
	k.unpin(key, e, Lease{})
}

func (k *Keyed[K]) givesBack(key K) bool {
	e, err := k.pin(key)
	if err != nil {
		return true
	}
	defer k.unpin(key, e, Lease{})
	return givesBack(e.lim)
}
