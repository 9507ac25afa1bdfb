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
	// limiter, so eviction never changes a decision.
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
	pins int   // Acquire calls using lim; guarded by the shard's mu
	last int64 // ns since origin of the last call
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

// entry returns key's entry, making it if needed. The caller holds s.mu.
func (k *Keyed[K]) entry(s *keyedShard[K], key K, now int64) (*keyedEntry, error) {
	if e, ok := s.m[key]; ok {
		e.last = now
		return e, nil
	}
	lim, err := k.newLim(key)
	if err == nil && lim == nil {
		err = errors.New("factory returned a nil Limiter")
	}
	if err != nil {
		return nil, fmt.Errorf("%w %v: %w", ErrNoLimiter, key, err)
	}
	k.sweep(s, now)
	e := &keyedEntry{lim: lim, last: now}
	s.m[key] = e
	return e, nil
}

// sweep evicts idle keys among a few that map iteration (which starts at a
// random place) offers. The caller holds s.mu.
func (k *Keyed[K]) sweep(s *keyedShard[K], now int64) {
	seen := 0
	for key, e := range s.m {
		if seen++; seen > sweepPerInsert {
			return
		}
		if e.pins == 0 && k.idle(e, now) {
			delete(s.m, key)
		}
	}
}

func (k *Keyed[K]) idle(e *keyedEntry, now int64) bool {
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
	s := k.shard(key)
	s.mu.Lock()
	e, err := k.entry(s, key, k.now())
	if err != nil {
		s.mu.Unlock()
		return Lease{why: reasonNoLimiter}
	}
	l := e.lim.TryAcquire(n)
	s.mu.Unlock()
	return l
}

// Acquire waits until key's limiter grants n permits; see Limiter.
func (k *Keyed[K]) Acquire(ctx context.Context, key K, n int) (Lease, error) {
	if k.closed.Load() {
		return denied(reasonClosed, 0), ErrClosed
	}
	s := k.shard(key)
	s.mu.Lock()
	e, err := k.entry(s, key, k.now())
	if err != nil {
		s.mu.Unlock()
		return Lease{why: reasonNoLimiter}, err
	}
	e.pins++
	s.mu.Unlock()
	l, err := e.lim.Acquire(ctx, n)
	s.mu.Lock()
	e.pins--
	e.last = k.now()
	s.mu.Unlock()
	return l, err
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
			if e.pins == 0 && k.idle(e, now) {
				delete(s.m, key)
				evicted++
			}
		}
		s.mu.Unlock()
	}
	return evicted
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

// KeyedTokenBucket is a compact set of token buckets, one per key, all with
// the same rate and burst. A key costs its map entry and 16 bytes of state
// (about 60 bytes for a short string key), so millions of keys fit. A key
// whose bucket is full is as if new, and is evicted lazily as other keys are
// added, with no goroutine.
//
// Bound: per key, as TokenBucket: at most Burst + Rate·t permits in every
// interval of length t.
//
// Acquire does not queue: it sleeps until the bucket could grant and tries
// again, so waiters on one key are not served in arrival order.
type KeyedTokenBucket[K comparable] struct {
	cfg    *gcraConfig
	origin time.Time
	seed   maphash.Seed
	closed atomic.Bool
	shards [keyedShards]bucketShard[K]
}

type bucketShard[K comparable] struct {
	mu sync.Mutex
	m  map[K]bucketState
	_  [48]byte
}

// bucketState is a GCRA state whose scaled time counts from base (ns since
// origin), so a key never overflows however long it lives.
type bucketState struct{ base, tat int64 }

// NewKeyedTokenBucket returns an empty set of token buckets, or an
// *OptionError naming the first invalid option. opts.Queue is ignored.
func NewKeyedTokenBucket[K comparable](opts TokenBucketOptions) (*KeyedTokenBucket[K], error) {
	c, err := newGCRAConfig(opts.Rate, int64(opts.Burst), false)
	if err != nil {
		return nil, err
	}
	k := &KeyedTokenBucket[K]{cfg: c, origin: time.Now(), seed: maphash.MakeSeed()}
	for i := range k.shards {
		k.shards[i].m = make(map[K]bucketState)
	}
	return k, nil
}

// full reports whether st is a full bucket at now, as a new key would be.
func (k *KeyedTokenBucket[K]) full(st bucketState, now int64) bool {
	delta := now - st.base
	return delta > k.cfg.maxDelta || st.tat <= delta*k.cfg.n
}

// TryAcquire takes n permits from key's bucket if it holds them now. It does
// not allocate once the key exists.
func (k *KeyedTokenBucket[K]) TryAcquire(key K, n int) Lease {
	if n < 0 {
		return denied(reasonInvalid, 0)
	}
	c := k.cfg
	if int64(n) > c.burst {
		return denied(reasonExceeds, 0)
	}
	if k.closed.Load() {
		return denied(reasonClosed, 0)
	}
	now := int64(time.Since(k.origin))
	s := &k.shards[maphash.Comparable(k.seed, key)&(keyedShards-1)]
	s.mu.Lock()
	st, ok := s.m[key]
	if !ok {
		if n == 0 {
			s.mu.Unlock()
			return Lease{granted: true}
		}
		k.sweep(s, now)
	}
	if !ok || k.full(st, now) {
		st = bucketState{base: now}
	} else if delta := now - st.base; delta > c.maxDelta/2 {
		st = bucketState{base: now, tat: st.tat - delta*c.n}
	}
	nows := (now - st.base) * c.n
	t0 := max(st.tat, nows)
	if over := t0 + max(int64(n), 1)*c.d - nows - c.tol; over > 0 {
		s.mu.Unlock()
		return denied(reasonLimited, time.Duration(ceilDiv(over, c.n)))
	}
	if n > 0 {
		st.tat = t0 + int64(n)*c.d
		s.m[key] = st
	}
	s.mu.Unlock()
	return Lease{permits: n, granted: true}
}

func (k *KeyedTokenBucket[K]) sweep(s *bucketShard[K], now int64) {
	seen := 0
	for key, st := range s.m {
		if seen++; seen > sweepPerInsert {
			return
		}
		if k.full(st, now) {
			delete(s.m, key)
		}
	}
}

// Acquire waits until key's bucket grants n permits, ctx is done, or the
// set is closed. It fails at once with context.DeadlineExceeded when the
// bucket will not hold n permits before ctx's deadline.
func (k *KeyedTokenBucket[K]) Acquire(ctx context.Context, key K, n int) (Lease, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return Lease{why: reasonCanceled}, err
		}
		l := k.TryAcquire(key, n)
		if l.Granted() {
			return l, nil
		}
		d := l.RetryAfter()
		if d <= 0 {
			err := l.Err()
			if errors.Is(err, ErrInvalidCount) {
				err = fmt.Errorf("%w: %d", err, n)
			}
			return l, err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return l, fmt.Errorf("limiter: the wait of %v would end after the context deadline: %w", d, context.DeadlineExceeded)
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			return Lease{why: reasonCanceled}, ctx.Err()
		}
	}
}

// Len returns the number of keys held; full buckets not yet evicted count.
func (k *KeyedTokenBucket[K]) Len() int {
	n := 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Prune evicts every key whose bucket is full and returns how many.
func (k *KeyedTokenBucket[K]) Prune() int {
	now, evicted := int64(time.Since(k.origin)), 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		for key, st := range s.m {
			if k.full(st, now) {
				delete(s.m, key)
				evicted++
			}
		}
		s.mu.Unlock()
	}
	return evicted
}

// Close makes later calls fail with ErrClosed. It returns nil.
func (k *KeyedTokenBucket[K]) Close() error {
	k.closed.Store(true)
	return nil
}
