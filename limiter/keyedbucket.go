package limiter

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/internal/waitq"
)

// KeyedTokenBucket is a set of token buckets, one per key, all with the
// same rate and burst. A key's whole state is one 8-byte number in a Go map
// (under 64 bytes per key held, string header included: see
// bench/results/keyedmem.md), so millions of keys fit. A key whose bucket
// is full is as if new: such keys are dropped whenever a shard's map has
// doubled since it last dropped them, and by Prune, so memory follows the
// number of recently busy keys, with no goroutine.
//
// Bound: per key, as TokenBucket: at most Burst + Rate·t permits in every
// interval of length t.
//
// Acquire waits in a queue of the key's own, served in the order of
// Options.Queue (first in, first out by default), with its Limit; while a
// key has waiters, TryAcquire on it fails rather than jump them. Close fails
// the waiters with ErrClosed.
type KeyedTokenBucket[K comparable] struct {
	cfg    *gcraConfig
	q      QueueOptions
	origin time.Time
	seed   maphash.Seed
	closed atomic.Bool
	shards [keyedShards]bucketShard[K]
}

// bucketShard holds the keys whose hash falls in it.
type bucketShard[K comparable] struct {
	mu sync.Mutex
	// tats maps each key whose bucket is not full to its GCRA state, in
	// scaled units from base; a key not in it has a full bucket.
	tats map[K]int64
	base int64 // ns since origin at which the shard's scaled time is 0
	// sweepAt is the size at which the next insertion drops full buckets;
	// peak the most keys tats has held, to give memory back (a Go map
	// does not shrink).
	sweepAt, peak int
	// granted and rejected count outcomes, under mu.
	granted, rejected int64
	waits             map[K]*waitq.Queue // keys with Acquire calls waiting
	spare             *waitq.Queue       // a queue no waiter has used, for the next key
}

// NewKeyedTokenBucket returns an empty set of token buckets, or an
// *OptionError naming the first invalid option.
func NewKeyedTokenBucket[K comparable](opts TokenBucketOptions) (*KeyedTokenBucket[K], error) {
	if err := opts.Queue.validate(); err != nil {
		return nil, err
	}
	c, err := newGCRAConfig(opts.Rate, int64(opts.Burst), false)
	if err != nil {
		return nil, err
	}
	return &KeyedTokenBucket[K]{cfg: c, q: opts.Queue, origin: time.Now(), seed: maphash.MakeSeed()}, nil
}

// minSweep is the smallest size at which a shard's insertion sweeps.
const minSweep = 8

// sweep drops the keys whose bucket is full at nows (scaled), and makes a
// new map when the old one is mostly empty, so that memory follows the keys
// held. The next sweep comes when the map has doubled: sweeps cost O(1) per
// insertion, amortized. The caller holds s.mu.
func (s *bucketShard[K]) sweep(nows int64) {
	for key, tat := range s.tats {
		if tat <= nows {
			delete(s.tats, key)
		}
	}
	if len(s.tats)*4 < s.peak {
		s.tats = maps.Clone(s.tats) // sized for what is left
		s.peak = len(s.tats)
	}
	s.sweepAt = max(2*len(s.tats), minSweep)
}

// insert sets the state of key, which has none, sweeping first when the
// map has grown enough. The caller holds s.mu and has called rebase.
func (s *bucketShard[K]) insert(key K, tat, nows int64) {
	if s.tats == nil {
		s.tats, s.sweepAt = make(map[K]int64), minSweep
	}
	if len(s.tats)+1 >= s.sweepAt {
		s.sweep(nows)
	}
	s.tats[key] = tat
	s.peak = max(s.peak, len(s.tats))
}

// locate returns key's shard.
func (k *KeyedTokenBucket[K]) locate(key K) *bucketShard[K] {
	return &k.shards[maphash.Comparable(k.seed, key)>>(64-6)]
}

// rebase keeps now within reach of s's scaled time: it moves the shard's
// base to now, shifting every state and dropping the full buckets. The
// caller holds s.mu.
func (k *KeyedTokenBucket[K]) rebase(s *bucketShard[K], now int64) {
	if now-s.base <= k.cfg.maxDelta/2 {
		return
	}
	if now-s.base > k.cfg.maxDelta {
		// Every bucket is full (no state reaches that far ahead), and the
		// shift would overflow.
		clear(s.tats)
	} else {
		shift := (now - s.base) * k.cfg.n
		for key, tat := range s.tats {
			s.tats[key] = tat - shift
		}
		s.sweep(0)
	}
	s.base = now
}

// step decides n permits for key at now. The caller holds s.mu and has
// called rebase.
func (k *KeyedTokenBucket[K]) step(s *bucketShard[K], key K, now int64, n int) (ok bool, retry int64) {
	c := k.cfg
	nows := (now - s.base) * c.n
	tat, found := s.tats[key] // not found: a full bucket, as any tat <= nows
	next, retry, ok := c.step(tat, nows, int64(n))
	if !ok || next == tat {
		return ok, retry
	}
	if found {
		s.tats[key] = next
	} else {
		s.insert(key, next, nows)
	}
	return true, 0
}

// TryAcquire takes n permits from key's bucket if it holds them now and no
// Acquire waits on the key. It does not allocate once the key exists.
func (k *KeyedTokenBucket[K]) TryAcquire(key K, n int) Lease {
	if why := k.check(n); why != reasonNone {
		return denied(why, 0)
	}
	now := int64(time.Since(k.origin))
	s := k.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting(key) {
		s.rejected++
		return denied(reasonLimited, 0)
	}
	k.rebase(s, now)
	if ok, retry := k.step(s, key, now, n); !ok {
		s.rejected++
		return denied(reasonLimited, time.Duration(retry))
	}
	s.granted++
	return grantedLease(nil, n, now)
}

func (k *KeyedTokenBucket[K]) check(n int) reason {
	switch {
	case n < 0:
		return reasonInvalid
	case int64(n) > k.cfg.burst:
		return reasonExceeds
	case k.closed.Load():
		return reasonClosed
	}
	return reasonNone
}

// Acquire waits until key's bucket grants n permits, ctx is done, the key's
// queue is full, or the set is closed; see Limiter. Callers waiting on one
// key are served in Queue.Order. It fails at once with an error wrapping
// context.DeadlineExceeded when the bucket will not hold n permits before
// ctx's deadline.
func (k *KeyedTokenBucket[K]) Acquire(ctx context.Context, key K, n int) (Lease, error) {
	return k.acquire(ctx, key, n, false)
}

// acquire is Acquire; a silent one (a Chain's wait in the key's queue)
// counts neither its grant nor its failure.
func (k *KeyedTokenBucket[K]) acquire(ctx context.Context, key K, n int, silent bool) (Lease, error) {
	if ctx == nil {
		panic("limiter: nil Context")
	}
	if why := k.check(n); why != reasonNone {
		return k.fail(key, silent, denied(why, 0), k.requestErr(why, n))
	}
	if err := ctx.Err(); err != nil {
		return k.fail(key, silent, ctxDenied(err), err)
	}
	s := k.locate(key)
	s.mu.Lock()
	q, w, l, err := k.enqueue(ctx, s, key, n, silent)
	s.mu.Unlock()
	if w == nil {
		if err != nil {
			return k.fail(key, silent, l, err)
		}
		return l, nil
	}
	err = q.Wait(ctx, w, func(t time.Time) { k.serve(s, q, key, t) })
	s.mu.Lock()
	if q.Len() == 0 && s.waits[key] == q {
		delete(s.waits, key)
	}
	s.mu.Unlock()
	if err != nil {
		return k.fail(key, silent, denied(reasonOf(err), w.RetryAfter()), err)
	}
	return grantedLease(nil, n, w.Stamp), nil
}

// waiting reports whether Acquire calls wait on key. The caller holds s.mu.
func (s *bucketShard[K]) waiting(key K) bool {
	q := s.waits[key]
	return q != nil && q.Len() > 0
}

func (k *KeyedTokenBucket[K]) requestErr(why reason, n int) error {
	switch why {
	case reasonInvalid:
		return fmt.Errorf("%w: %d", ErrInvalidCount, n)
	case reasonExceeds:
		return fmt.Errorf("%w: %d permits asked, at most %d can be granted", ErrExceedsLimit, n, k.cfg.burst)
	}
	return why.err()
}

// fail counts a failed Acquire, unless silent.
func (k *KeyedTokenBucket[K]) fail(key K, silent bool, l Lease, err error) (Lease, error) {
	if !silent {
		s := k.locate(key)
		s.mu.Lock()
		s.rejected++
		s.mu.Unlock()
	}
	return l, err
}

// enqueue grants at once when the key's queue lets a newcomer be served
// first and the bucket holds n, fails at once (see waitq.Queue.Take), or
// queues a waiter in the key's queue (w != nil). The caller holds s.mu.
func (k *KeyedTokenBucket[K]) enqueue(ctx context.Context, s *bucketShard[K], key K, n int, silent bool) (*waitq.Queue, *waitq.Waiter, Lease, error) {
	if k.closed.Load() { // Close walks the shards under their locks: see Close
		return nil, nil, denied(reasonClosed, 0), ErrClosed
	}
	t := time.Now()
	now := int64(t.Sub(k.origin))
	q := s.waits[key]
	if q == nil {
		if q = s.spare; q == nil {
			q = &waitq.Queue{}
			q.Init(&s.mu, k.q.waitq())
		}
		s.spare = nil
	}
	w, granted, retry, err := q.Take(ctx, t, int64(n), func(n int64) (bool, time.Duration) {
		k.rebase(s, now)
		ok, retry := k.step(s, key, now, int(n))
		return ok, time.Duration(retry)
	})
	if w == nil {
		if q.Len() == 0 && s.waits[key] == nil {
			s.spare = q // no waiter used it
		}
		if granted {
			s.granted += boolInt(!silent)
			return nil, nil, grantedLease(nil, n, now), nil
		}
		return nil, nil, denied(reasonOf(err), retry), err
	}
	if s.waits == nil {
		s.waits = make(map[K]*waitq.Queue)
	}
	s.waits[key] = q
	w.Silent = silent
	return q, w, Lease{}, nil
}

// serve grants the waiters of key's queue in order while its bucket holds
// their permits at t. The caller holds s.mu.
func (k *KeyedTokenBucket[K]) serve(s *bucketShard[K], q *waitq.Queue, key K, t time.Time) {
	now := int64(t.Sub(k.origin))
	k.rebase(s, now)
	q.Serve(t, func(w *waitq.Waiter) (bool, time.Duration) {
		ok, retry := k.step(s, key, now, int(w.N()))
		if ok {
			w.Stamp = now
			s.granted += boolInt(!w.Silent)
		}
		return ok, time.Duration(retry)
	})
}

// Len returns the number of keys held; full buckets not yet dropped count.
func (k *KeyedTokenBucket[K]) Len() int {
	n := 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		n += len(s.tats)
		s.mu.Unlock()
	}
	return n
}

// Prune drops every key whose bucket is full, making a new, smaller map
// for a shard whose map is left mostly empty (a Go map does not shrink),
// and returns how many keys it dropped. Full buckets are also dropped
// whenever a shard's map has doubled; Prune gives memory back at once.
func (k *KeyedTokenBucket[K]) Prune() int {
	now, dropped := int64(time.Since(k.origin)), 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		before := len(s.tats)
		k.rebase(s, now)
		s.sweep((now - s.base) * k.cfg.n)
		dropped += before - len(s.tats)
		s.mu.Unlock()
	}
	return dropped
}

// Stats returns, over all keys, the leases granted, the acquisitions
// refused (TryAcquire refusals and failed Acquire calls), the Acquire calls
// waiting and their permits, and as Available the permits of a key not yet
// seen: Burst.
func (k *KeyedTokenBucket[K]) Stats() Stats {
	st := Stats{Available: k.cfg.burst}
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		st.Granted += s.granted
		st.Rejected += s.rejected
		for _, q := range s.waits {
			st.Waiters += q.Len()
			st.Queued += q.Queued()
		}
		s.mu.Unlock()
	}
	return st
}

// For returns the Limiter of one key: its TryAcquire and Acquire are those
// of k with key, so it can be handed to anything that takes a Limiter.
func (k *KeyedTokenBucket[K]) For(key K) Limiter { return &forKey[K]{k, key} }

// Close fails every waiting Acquire with ErrClosed and makes later calls
// fail with ErrClosed. It returns nil, also when called again.
func (k *KeyedTokenBucket[K]) Close() error {
	if k.closed.Swap(true) {
		return nil
	}
	// An Acquire that queues after its shard was walked finds the set
	// closed under the shard's lock (enqueue).
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		for _, q := range s.waits {
			q.Close(ErrClosed)
		}
		s.mu.Unlock()
	}
	return nil
}

// Quota returns the Quota of key's bucket (see Quota): a key not seen, or
// whose bucket is full, reports a full bucket.
func (k *KeyedTokenBucket[K]) Quota(key K) Quota {
	c := k.cfg
	now := int64(time.Since(k.origin))
	s := k.locate(key)
	s.mu.Lock()
	k.rebase(s, now)
	debt := max(s.tats[key]-(now-s.base)*c.n, 0)
	waiting := s.waiting(key)
	s.mu.Unlock()
	window, ok := mulDivCeil(c.burst, c.d, c.n)
	if !ok {
		window = int64(1<<63 - 1)
	}
	q := Quota{
		Limit:     c.burst,
		Window:    time.Duration(window),
		Remaining: max((c.tol-debt)/c.d, 0),
		Reset:     time.Duration(ceilDiv(debt, c.n)),
	}
	if waiting {
		q.Remaining = 0
	}
	return q
}

// bucketPart is one key of a KeyedTokenBucket as a Chain part.
type bucketPart[K comparable] struct {
	k     *KeyedTokenBucket[K]
	s     *bucketShard[K]
	key   K
	rel   Releaser // the key's For limiter, which settles its leases
	debt  int64    // the key's debt, in scaled units, before the chain's first take
	takes int
}

func (k *KeyedTokenBucket[K]) resolve(key K, rel Releaser) (Limiter, part, pinner, error) {
	return nil, &bucketPart[K]{k: k, s: k.locate(key), key: key, rel: rel}, nil, nil
}

func (k *KeyedTokenBucket[K]) givesBack(K) bool { return false }

// await is a Chain's wait in key's queue: it counts nothing.
func (k *KeyedTokenBucket[K]) await(ctx context.Context, key K, n int) (Lease, error) {
	return k.acquire(ctx, key, n, true)
}

// countGrant counts a grant to key that a Chain made through await.
func (k *KeyedTokenBucket[K]) countGrant(key K) {
	s := k.locate(key)
	s.mu.Lock()
	s.granted++
	s.mu.Unlock()
}

func (p *bucketPart[K]) mutex() *sync.Mutex { return &p.s.mu }

func (p *bucketPart[K]) take(t time.Time, n int) (bool, reason, int64) {
	k, s := p.k, p.s
	if why := k.check(n); why != reasonNone {
		return false, why, 0
	}
	if s.waiting(p.key) {
		return false, reasonLimited, 0
	}
	now := int64(t.Sub(k.origin))
	if p.takes == 0 {
		// Rebase before recording the state to restore: at the chain's one
		// instant no later take rebases again, so base stays put until the
		// undo.
		k.rebase(s, now)
		p.debt = max(s.tats[p.key]-(now-s.base)*k.cfg.n, 0)
	}
	ok, retry := k.step(s, p.key, now, n)
	if ok {
		p.takes++
	}
	return ok, reasonLimited, retry
}

// undo restores the key's debt at the chain's instant: exactly its state
// before (a full bucket, as for a new key, is any state at or before now).
func (p *bucketPart[K]) undo(t time.Time, _ int) {
	if p.takes--; p.takes == 0 {
		s := p.s
		if p.debt == 0 {
			delete(s.tats, p.key)
			return
		}
		now := int64(t.Sub(p.k.origin))
		s.tats[p.key] = p.debt + (now-s.base)*p.k.cfg.n
	}
}

func (p *bucketPart[K]) settle() {}

func (p *bucketPart[K]) grant(t time.Time, n int) Lease {
	p.s.mu.Lock()
	p.s.granted++
	p.s.mu.Unlock()
	return grantedLease(p.rel, n, int64(t.Sub(p.k.origin)))
}

func (p *bucketPart[K]) refuse() { p.s.rejected++ }

// adopt makes a lease of key's bucket, granted by the For limiter f, one
// that f settles.
func (k *KeyedTokenBucket[K]) adopt(f Releaser, l Lease) Lease {
	if l.granted() {
		l.rel = f
	}
	return l
}

// settle settles a lease of key's bucket granted at instant at of k (see
// Lease.Settle), as a TokenBucket does, and serves the key's queue again.
func (k *KeyedTokenBucket[K]) settle(key K, at int64, granted, actual int) {
	if granted < 0 || actual < 0 {
		return
	}
	c := k.cfg
	t := time.Now()
	now := int64(t.Sub(k.origin))
	s := k.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	k.rebase(s, now)
	ago := int64(-1)
	if at >= 0 && at <= now && int64(granted) <= c.maxReq {
		ago = now - at
	}
	nows := (now - s.base) * c.n
	tat, found := s.tats[key]
	if !found {
		// A full bucket, whose state was at or before now when it was
		// dropped: from now is the safe side for a debt.
		tat = nows
	}
	switch next := c.settled(tat, nows, ago, int64(granted), int64(actual)); {
	case next > nows && found:
		s.tats[key] = next
	case next > nows:
		s.insert(key, next, nows)
	default:
		delete(s.tats, key) // full: as if new
	}
	if q := s.waits[key]; q != nil && q.Len() > 0 {
		k.serve(s, q, key, t)
	}
}
