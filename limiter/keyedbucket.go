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

// KeyedTokenBucket is a compact set of token buckets, one per key, all with
// the same rate and burst. Each key costs its slot in an open-addressing
// table (the key, an 8-byte state and a tag byte, about 50 bytes for a string
// key at the table's typical load), so millions of keys fit. A key whose
// bucket is full is as if new: such keys are dropped whenever a shard of the
// table would grow, so memory follows the number of recently busy keys,
// with no goroutine.
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

// bucketShard is a linear-probing hash table. Entries are removed only by
// rebuilding the table, so probing never meets a deleted slot.
type bucketShard[K comparable] struct {
	mu    sync.Mutex
	ctrl  []uint8 // 0: empty; else 0x80 | 7 bits of the key's hash
	slots []bucketSlot[K]
	count int
	base  int64 // ns since origin at which the shard's scaled time is 0
	// granted and rejected count TryAcquire outcomes, under mu.
	granted, rejected int64
}

// bucketSlot's tat is the GCRA state in scaled units from the shard's base.
type bucketSlot[K comparable] struct {
	key K
	tat int64
}

// NewKeyedTokenBucket returns an empty set of token buckets, or an
// *OptionError naming the first invalid option. opts.Queue is not used.
func NewKeyedTokenBucket[K comparable](opts TokenBucketOptions) (*KeyedTokenBucket[K], error) {
	c, err := newGCRAConfig(opts.Rate, int64(opts.Burst), false)
	if err != nil {
		return nil, err
	}
	return &KeyedTokenBucket[K]{cfg: c, origin: time.Now(), seed: maphash.MakeSeed()}, nil
}

func tagOf(h uint64) uint8 { return 0x80 | uint8(h>>57)&0x7f }

// find returns the slot of key, or the empty slot where it would go.
func (s *bucketShard[K]) find(key K, h uint64) (int, bool) {
	mask := len(s.ctrl) - 1
	tag := tagOf(h)
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch c := s.ctrl[i]; {
		case c == 0:
			return i, false
		case c == tag && s.slots[i].key == key:
			return i, true
		}
	}
}

// rebuild rehashes the live keys of s into a table of size (a power of two),
// dropping keys whose bucket is full at nows, and rebasing scaled time to now.
func (k *KeyedTokenBucket[K]) rebuild(s *bucketShard[K], size int, now int64) {
	oldCtrl, oldSlots := s.ctrl, s.slots
	shift := (now - s.base) * k.cfg.n // now - base <= maxDelta/2: no overflow
	s.ctrl, s.slots, s.count, s.base = make([]uint8, size), make([]bucketSlot[K], size), 0, now
	for i, c := range oldCtrl {
		if c == 0 || oldSlots[i].tat <= shift {
			continue
		}
		h := maphash.Comparable(k.seed, oldSlots[i].key)
		j, _ := s.find(oldSlots[i].key, h)
		s.ctrl[j] = tagOf(h)
		s.slots[j] = bucketSlot[K]{key: oldSlots[i].key, tat: oldSlots[i].tat - shift}
		s.count++
	}
}

// makeRoom prepares s for one more key: past 3/4 load it drops full
// buckets, then grows so that at least a quarter of the table stays free
// (rebuilds are amortized O(1) per insert), or shrinks when mostly empty.
func (k *KeyedTokenBucket[K]) makeRoom(s *bucketShard[K], now int64) {
	if len(s.ctrl) == 0 {
		s.ctrl, s.slots, s.base = make([]uint8, 8), make([]bucketSlot[K], 8), now
		return
	}
	if (s.count+1)*4 <= len(s.ctrl)*3 {
		return
	}
	k.rebuild(s, len(s.ctrl), now)
	size := len(s.ctrl)
	for (s.count+1)*2 > size {
		size *= 2
	}
	for size > 8 && (s.count+1)*8 < size {
		size /= 2
	}
	if size != len(s.ctrl) {
		k.rebuild(s, size, now)
	}
}

// TryAcquire takes n permits from key's bucket if it holds them now. It does
// not allocate once the key exists.
func (k *KeyedTokenBucket[K]) TryAcquire(key K, n int) Lease { return k.try(key, n, 1) }

// try is TryAcquire; a refusal adds reject to the shard's count.
func (k *KeyedTokenBucket[K]) try(key K, n int, reject int64) Lease {
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
	h := maphash.Comparable(k.seed, key)
	s := &k.shards[h>>(64-6)]
	s.mu.Lock()
	if now-s.base > c.maxDelta/2 && len(s.ctrl) > 0 {
		k.rebuild(s, len(s.ctrl), now)
	}
	var tat int64
	i, found := 0, false
	if len(s.ctrl) > 0 {
		i, found = s.find(key, h)
		if found {
			tat = s.slots[i].tat
		}
	}
	nows := (now - s.base) * c.n
	t0 := max(tat, nows)
	if over := t0 + max(int64(n), 1)*c.d - nows - c.tol; over > 0 {
		s.rejected += reject
		s.mu.Unlock()
		return denied(reasonLimited, time.Duration(ceilDiv(over, c.n)))
	}
	s.granted++
	if n > 0 {
		if !found {
			k.makeRoom(s, now)
			nows = (now - s.base) * c.n
			t0 = nows
			i, _ = s.find(key, h)
			s.ctrl[i] = tagOf(h)
			s.slots[i].key = key
			s.count++
		}
		s.slots[i].tat = t0 + int64(n)*c.d
	}
	s.mu.Unlock()
	return Lease{permits: n, granted: true}
}

// Acquire waits until key's bucket grants n permits, ctx is done, or the
// set is closed. It fails at once with context.DeadlineExceeded when the
// bucket will not hold n permits before ctx's deadline.
func (k *KeyedTokenBucket[K]) Acquire(ctx context.Context, key K, n int) (Lease, error) {
	l, err := k.acquire(ctx, key, n)
	if err != nil {
		s := &k.shards[maphash.Comparable(k.seed, key)>>(64-6)]
		s.mu.Lock()
		s.rejected++
		s.mu.Unlock()
	}
	return l, err
}

func (k *KeyedTokenBucket[K]) acquire(ctx context.Context, key K, n int) (Lease, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return ctxDenied(err), err
		}
		l := k.try(key, n, 0)
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
		if err := pastDeadline(ctx, d); err != nil {
			l.why = reasonDeadline
			return l, err
		}
		if err := sleep(ctx, &timer, d); err != nil {
			return ctxDenied(err), err
		}
	}
}

// Len returns the number of keys held; full buckets not yet dropped count.
func (k *KeyedTokenBucket[K]) Len() int {
	n := 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		n += s.count
		s.mu.Unlock()
	}
	return n
}

// Prune drops every key whose bucket is full, shrinking tables that become
// mostly empty, and returns how many keys it dropped. Full buckets are also
// dropped whenever a shard would grow; Prune gives memory back at once.
func (k *KeyedTokenBucket[K]) Prune() int {
	now, dropped := int64(time.Since(k.origin)), 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		if before := s.count; before > 0 {
			size := len(s.ctrl)
			for size > 8 && (s.count+1)*8 < size {
				size /= 2
			}
			k.rebuild(s, size, now)
			dropped += before - s.count
		}
		s.mu.Unlock()
	}
	return dropped
}

// Stats returns, over all keys, the leases granted and the acquisitions
// refused (TryAcquire refusals for want of permits, and failed Acquire
// calls), and as Available the permits of a key not yet seen: Burst.
func (k *KeyedTokenBucket[K]) Stats() Stats {
	st := Stats{Available: k.cfg.burst}
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		st.Granted += s.granted
		st.Rejected += s.rejected
		s.mu.Unlock()
	}
	return st
}

// For returns the Limiter of one key: its TryAcquire and Acquire are those
// of k with key, so it can be handed to anything that takes a Limiter.
func (k *KeyedTokenBucket[K]) For(key K) Limiter { return forKey[K]{k, key} }

// Close makes later calls fail with ErrClosed. It returns nil.
func (k *KeyedTokenBucket[K]) Close() error {
	k.closed.Store(true)
	return nil
}

// Quota returns the Quota of key's bucket (see Quota): a key not seen, or
// whose bucket is full, reports a full bucket.
func (k *KeyedTokenBucket[K]) Quota(key K) Quota {
	c := k.cfg
	now := int64(time.Since(k.origin))
	h := maphash.Comparable(k.seed, key)
	s := &k.shards[h>>(64-6)]
	s.mu.Lock()
	var debt int64
	if len(s.ctrl) > 0 {
		if i, found := s.find(key, h); found {
			debt = max(s.slots[i].tat-(now-s.base)*c.n, 0)
		}
	}
	s.mu.Unlock()
	window, ok := mulDivCeil(c.burst, c.d, c.n)
	if !ok {
		window = int64(1<<63 - 1)
	}
	return Quota{
		Limit:     c.burst,
		Window:    time.Duration(window),
		Remaining: max((c.tol-debt)/c.d, 0),
		Reset:     time.Duration(ceilDiv(debt, c.n)),
	}
}
