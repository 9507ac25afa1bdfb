package httplimit

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"time"

	"github.com/rategate/rategate/internal/precise"
	"github.com/rategate/rategate/limiter"
)

// DefaultMaxKeys is the most keys a KeyedLog holds when
// KeyedLogOptions.MaxKeys is 0, as LimitByIP's does: about 48 MiB of keys
// at most.
const DefaultMaxKeys = 1 << 20

// KeyedLogOptions configures NewKeyedLog.
type KeyedLogOptions struct {
	// Limit is the most permits a key is granted in any window of length
	// Window.
	Limit int
	// Window is the window's length.
	Window time.Duration
	// MaxKeys caps the keys held (per shard of the table: a multiple of
	// 64, rounded down, and at least 64); 0 means DefaultMaxKeys. When it is
	// reached, the keys whose logs have emptied, which no longer affect
	// any decision, are dropped first. Should every key held still have
	// grants in its window (a flood of distinct clients), the key with the
	// fewest grants in its window, and of those the one whose newest grant
	// is oldest, of a few examined, is dropped: that client may then be
	// granted as many more as its log held within the window.
	MaxKeys int
}

// KeyedLog is a compact set of strict sliding logs, one per key: each key
// is granted at most Limit permits in any window of length Window (the
// bound of limiter.SlidingLog: at every instant t, the permits granted in
// (t-Window, t] number at most Limit). It is what LimitByIP uses, and an
// Options.Keyed for any key.
//
// A key costs its slot in an open-addressing table: a 96-bit fingerprint
// of the key (two seeded hashes: two keys share a log with a chance of
// about n²/2^97 among n keys, and a client cannot aim at another's, as
// the seeds are secret), the instant of its newest grant, and a link to
// the older grants of its window when it has any: 24 bytes, 32 to 48 per
// key held at the table's load. A key with more than one permit in its
// window also holds them (8 bytes each, one per permit) until they leave
// it: up to 8·Limit bytes, and a grant of n permits takes n steps. It is
// made for limits of requests (LimitByIP's); for a weighted limit of a
// large Limit (bytes of a body, request units), use a limiter.Keyed of
// limiter.SlidingLog, which keeps one entry per grant, or of a token
// bucket.
//
// Memory follows the keys that still affect a decision: a key whose
// grants have all left the window is as if new, and such keys are dropped
// whenever a shard of the table would grow, and by Prune; MaxKeys caps
// the rest. No goroutine runs. It is safe for concurrent use.
//
// Acquire waits until the key's log has room (it polls no faster than the
// log's next expiry; waiters of one key are not served in order).
type KeyedLog struct {
	limit, window int64
	shardCap      int
	origin        time.Time
	seed1, seed2  maphash.Seed
	shards        [logShards]logShard
}

const logShards = 64 // a power of two

// logShard is a linear-probing table of logSlot, indexed by fastrange of
// the fingerprint; keys are deleted by shifting back the keys after them.
type logShard struct {
	mu      sync.Mutex
	slots   []logSlot
	count   int
	inserts int       // keys added since the last sweep for emptied logs
	rings   []logRing // the older grants of keys that have some
	free    []uint32  // indexes of unused rings
}

// logSlot is one key: fp 0 marks an empty slot.
type logSlot struct {
	fp   uint64
	fp2  uint32
	more uint32 // 0: last is the key's only grant; else rings[more-1] holds all of them
	last int64  // the newest grant, ns since the KeyedLog's origin
}

// logRing holds a key's grants, oldest first, from t[head].
type logRing struct {
	t       []int64
	head, n int
}

// NewKeyedLog returns an empty KeyedLog, or an *limiter.OptionError naming
// the first invalid option.
func NewKeyedLog(o KeyedLogOptions) (*KeyedLog, error) {
	switch {
	case o.Limit <= 0:
		return nil, &limiter.OptionError{Field: "Limit", Problem: fmt.Sprintf("%d is not positive", o.Limit)}
	case o.Window <= 0:
		return nil, &limiter.OptionError{Field: "Window", Problem: fmt.Sprintf("%v is not positive", o.Window)}
	case o.MaxKeys < 0:
		return nil, &limiter.OptionError{Field: "MaxKeys", Problem: fmt.Sprintf("%d is negative", o.MaxKeys)}
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	return &KeyedLog{
		limit: int64(o.Limit), window: int64(o.Window),
		shardCap: max(o.MaxKeys/logShards, 1),
		origin:   time.Now(), seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(),
	}, nil
}

func (k *KeyedLog) now() int64 { return int64(time.Since(k.origin)) }

// locate returns key's shard and fingerprint.
func (k *KeyedLog) locate(key string) (*logShard, uint64, uint32) {
	h := maphash.String(k.seed1, key)
	return &k.shards[h&(logShards-1)], h | 1, uint32(maphash.String(k.seed2, key))
}

func home(fp uint64, size int) int {
	hi, _ := bits.Mul64(fp, uint64(size))
	return int(hi)
}

// find returns the slot of the key, or the empty slot where it would go.
func (s *logShard) find(fp uint64, fp2 uint32) (int, bool) {
	for i := home(fp, len(s.slots)); ; {
		switch sl := &s.slots[i]; {
		case sl.fp == 0:
			return i, false
		case sl.fp == fp && sl.fp2 == fp2:
			return i, true
		}
		if i++; i == len(s.slots) {
			i = 0
		}
	}
}

// TryAcquire grants n permits to key if its log has room for them now.
// It does not allocate once the key is held and has one grant or none in
// its window.
func (k *KeyedLog) TryAcquire(key string, n int) limiter.Lease {
	l, _ := k.decide(key, n, false)
	return l
}

// tryQuota is TryAcquire and the key's Quota after it, in one look-up.
func (k *KeyedLog) tryQuota(key string, n int) (limiter.Lease, limiter.Quota) {
	return k.decide(key, n, true)
}

func (k *KeyedLog) decide(key string, n int, wantQuota bool) (limiter.Lease, limiter.Quota) {
	if n < 0 {
		return limiter.Denied(fmt.Errorf("%w: %d", limiter.ErrInvalidCount, n), 0), limiter.Quota{}
	}
	if int64(n) > k.limit {
		return limiter.Denied(fmt.Errorf("%w: %d permits asked, at most %d can be granted", limiter.ErrExceedsLimit, n, k.limit), 0), limiter.Quota{}
	}
	now := k.now()
	s, fp, fp2 := k.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := -1, false
	if len(s.slots) > 0 {
		i, found = s.find(fp, fp2)
	}
	var held int64
	if found {
		held = k.held(s, i, now)
	}
	var lease limiter.Lease
	switch need := max(int64(n), 1); { // a zero-permit request needs room for one, as limiter.SlidingLog's does
	case held+need > k.limit:
		lease = limiter.Denied(nil, time.Duration(k.leaves(s, i, held+need-k.limit)-now))
	case n == 0:
		lease = limiter.NewLease(0, nil)
	default:
		if !found {
			i = k.insert(s, fp, fp2, now)
		}
		k.record(s, i, held, now, n)
		held += int64(n)
		lease = limiter.NewLease(n, nil)
	}
	if !wantQuota {
		return lease, limiter.Quota{}
	}
	return lease, k.quotaOf(s, i, held, now)
}

// held returns the grants in slot i's window at now, dropping older ones.
func (k *KeyedLog) held(s *logShard, i int, now int64) int64 {
	sl := &s.slots[i]
	cut := now - k.window // grants at or before cut have left the window
	if sl.more == 0 {
		if sl.last > cut {
			return 1
		}
		return 0
	}
	r := &s.rings[sl.more-1]
	for r.n > 0 && r.t[r.head] <= cut {
		r.head, r.n = (r.head+1)%len(r.t), r.n-1
	}
	n := int64(r.n)
	if n <= 1 {
		k.freeRing(s, i) // back to one slot: the idle key's whole cost
	}
	return n
}

// leaves returns when the j-th oldest grant of slot i (1-based) leaves
// the window.
func (k *KeyedLog) leaves(s *logShard, i int, j int64) int64 {
	sl := &s.slots[i]
	if sl.more == 0 {
		return sl.last + k.window
	}
	r := &s.rings[sl.more-1]
	return r.t[(r.head+int(j)-1)%len(r.t)] + k.window
}

// record adds n grants at now to slot i, which holds held grants.
func (k *KeyedLog) record(s *logShard, i int, held, now int64, n int) {
	sl := &s.slots[i]
	if held == 0 && n == 1 {
		k.freeRing(s, i)
		sl.last = now
		return
	}
	if sl.more == 0 {
		k.newRing(s, i, held)
	}
	r := &s.rings[sl.more-1]
	for range n {
		if r.n == len(r.t) {
			grown := make([]int64, min(max(2*len(r.t), 4), int(k.limit)))
			for j := range r.n {
				grown[j] = r.t[(r.head+j)%len(r.t)]
			}
			r.t, r.head = grown, 0
		}
		r.t[(r.head+r.n)%len(r.t)] = now
		r.n++
	}
	sl.last = now
}

// newRing gives slot i a ring holding its inline grant, if held.
func (k *KeyedLog) newRing(s *logShard, i int, held int64) {
	var idx uint32
	if n := len(s.free); n > 0 {
		idx, s.free = s.free[n-1], s.free[:n-1]
	} else {
		s.rings = append(s.rings, logRing{})
		idx = uint32(len(s.rings))
	}
	r := &s.rings[idx-1]
	r.t, r.head, r.n = make([]int64, min(4, int(k.limit))), 0, 0
	if held == 1 {
		r.t[0], r.n = s.slots[i].last, 1
	}
	s.slots[i].more = idx
}

// freeRing gives slot i's ring back, keeping its newest grant inline.
func (k *KeyedLog) freeRing(s *logShard, i int) {
	sl := &s.slots[i]
	if sl.more == 0 {
		return
	}
	r := &s.rings[sl.more-1]
	*r = logRing{}
	s.free = append(s.free, sl.more)
	sl.more = 0
}

func (k *KeyedLog) quotaOf(s *logShard, i int, held, now int64) limiter.Quota {
	q := limiter.Quota{Limit: k.limit, Window: time.Duration(k.window), Remaining: k.limit - held}
	if held > 0 {
		q.Reset = time.Duration(s.slots[i].last + k.window - now)
	}
	return q
}

// insert adds a key to s, making room, and returns its slot.
func (k *KeyedLog) insert(s *logShard, fp uint64, fp2 uint32, now int64) int {
	k.makeRoom(s, fp, now)
	i, _ := s.find(fp, fp2)
	s.slots[i] = logSlot{fp: fp, fp2: fp2}
	s.count++
	s.inserts++
	return i
}

// makeRoom prepares s for one more key: at MaxKeys it drops emptied logs
// (sweeping at most once per eighth of the cap in new keys), then evicts;
// past 4/5 load it drops emptied logs and resizes to a load near 1/2.
func (k *KeyedLog) makeRoom(s *logShard, fp uint64, now int64) {
	if s.count+1 > k.shardCap {
		if s.inserts >= max(k.shardCap/8, 1) {
			k.resize(s, now, 0)
		}
		for s.count+1 > k.shardCap {
			k.evict(s, home(fp, len(s.slots)), now)
		}
	}
	if len(s.slots) == 0 || (s.count+1)*5 > len(s.slots)*4 {
		k.resize(s, now, 1)
	}
}

// resize drops the keys whose logs have emptied and rebuilds s at a load
// near 1/2 with room for extra more keys (at least 8 slots).
func (k *KeyedLog) resize(s *logShard, now int64, extra int) {
	live := 0
	for i := range s.slots {
		if s.slots[i].fp != 0 && k.held(s, i, now) > 0 {
			live++
		}
	}
	size := max(8, (live+extra)*2)
	old := s.slots
	s.slots, s.count, s.inserts = make([]logSlot, size), 0, 0
	for i := range old {
		sl := &old[i]
		if sl.fp == 0 {
			continue
		}
		if sl.more == 0 && sl.last <= now-k.window {
			continue // emptied: as if new
		}
		j, _ := s.find(sl.fp, sl.fp2)
		s.slots[j] = *sl
		s.count++
	}
}

// evict drops, of the up to 8 keys from slot start on, the one that
// affects decisions least: the one with the fewest grants in its window
// (an emptied log first), of those the one whose newest grant is oldest.
func (k *KeyedLog) evict(s *logShard, start int, now int64) {
	victim, vHeld, seen := -1, int64(0), 0
	for i := start; seen < 8; {
		if sl := &s.slots[i]; sl.fp != 0 {
			held := k.held(s, i, now)
			if victim < 0 || held < vHeld || (held == vHeld && sl.last < s.slots[victim].last) {
				victim, vHeld = i, held
			}
			seen++
		}
		if i++; i == len(s.slots) {
			i = 0
		}
		if i == start {
			break
		}
	}
	if victim >= 0 {
		k.remove(s, victim)
	}
}

// remove deletes slot i, shifting back the keys after it that would not
// be found otherwise.
func (k *KeyedLog) remove(s *logShard, i int) {
	k.freeRing(s, i)
	s.slots[i] = logSlot{}
	s.count--
	size := len(s.slots)
	for j := (i + 1) % size; s.slots[j].fp != 0; j = (j + 1) % size {
		h := home(s.slots[j].fp, size)
		// j stays if its home lies cyclically in (i, j].
		if (i < j && i < h && h <= j) || (i > j && (h > i || h <= j)) {
			continue
		}
		s.slots[i], s.slots[j] = s.slots[j], logSlot{}
		i = j
	}
}

// Acquire waits until key's log has room for n permits, ctx is done, or
// ctx's deadline is sooner than the log can have room (it then fails at
// once, with an error wrapping context.DeadlineExceeded).
func (k *KeyedLog) Acquire(ctx context.Context, key string, n int) (limiter.Lease, error) {
	var timer precise.Timer
	defer timer.Stop()
	for {
		l := k.TryAcquire(key, n)
		if l.Granted() {
			return l, nil
		}
		wait := l.RetryAfter()
		if wait <= 0 {
			return l, l.Err() // never grantable
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			err := fmt.Errorf("httplimit: key's log has room in %v, past the context deadline: %w", wait, context.DeadlineExceeded)
			return limiter.Denied(err, wait), err
		}
		if timer.Until(ctx, nil, time.Now().Add(wait), 0) == precise.Done {
			return limiter.Denied(ctx.Err(), 0), ctx.Err()
		}
	}
}

// Foresee returns how long a request for n permits of key would wait now
// (waiters ahead are not counted: the log keeps no queue); false when n
// can never be granted.
func (k *KeyedLog) Foresee(key string, n int) (time.Duration, bool) {
	if n < 0 || int64(n) > k.limit {
		return 0, false
	}
	now := k.now()
	s, fp, fp2 := k.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.slots) == 0 {
		return 0, true
	}
	i, found := s.find(fp, fp2)
	if !found {
		return 0, true
	}
	if held, need := k.held(s, i, now), max(int64(n), 1); held+need > k.limit {
		return time.Duration(k.leaves(s, i, held+need-k.limit) - now), true
	}
	return 0, true
}

// Quota returns the Quota of key's log: Limit per Window, the permits it
// can be granted now, and when its newest grant leaves the window.
func (k *KeyedLog) Quota(key string) limiter.Quota {
	now := k.now()
	s, fp, fp2 := k.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	i, held := -1, int64(0)
	if len(s.slots) > 0 {
		var found bool
		if i, found = s.find(fp, fp2); found {
			held = k.held(s, i, now)
		}
	}
	return k.quotaOf(s, i, held, now)
}

// Len returns the number of keys held, emptied logs not yet dropped
// included.
func (k *KeyedLog) Len() int {
	n := 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		n += s.count
		s.mu.Unlock()
	}
	return n
}

// Prune drops every key whose log has emptied and shrinks the tables to
// the keys left, giving their memory back; it returns how many keys it
// dropped. Emptied logs are also dropped whenever a shard would grow.
func (k *KeyedLog) Prune() int {
	dropped := 0
	for i := range k.shards {
		s := &k.shards[i]
		s.mu.Lock()
		before := s.count
		if before > 0 {
			k.resize(s, k.now(), 0)
			s.rings, s.free = compactRings(s)
		}
		dropped += before - s.count
		s.mu.Unlock()
	}
	return dropped
}

// compactRings returns s's rings without the unused ones, renumbering the
// slots' links.
func compactRings(s *logShard) ([]logRing, []uint32) {
	if len(s.free) == 0 {
		return s.rings, s.free
	}
	var rings []logRing
	for i := range s.slots {
		if sl := &s.slots[i]; sl.more != 0 {
			rings = append(rings, s.rings[sl.more-1])
			sl.more = uint32(len(rings))
		}
	}
	return rings, nil
}
