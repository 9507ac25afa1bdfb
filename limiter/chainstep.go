package limiter

import (
	"cmp"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// part is a chain member whose decision is taken under its own lock, at the
// chain's one instant, and undone before the lock is released.
type part interface {
	mutex() *sync.Mutex
	// take takes n permits at t; the caller holds mutex.
	take(t time.Time, n int) (ok bool, why reason, retry int64)
	// undo exactly undoes this part's latest take of n at t.
	undo(t time.Time, n int)
	// settle publishes the part's state before its mutex is released.
	settle()
	// grant returns the member's lease after the chain granted at t.
	grant(t time.Time, n int) Lease
	// refuse counts the member's refusal.
	refuse()
}

// pinner keeps a keyed member's limiter from being evicted while a chain
// decides with it (unpin), and while a granted lease holds its permits (wrap).
type pinner interface {
	wrap(l Lease) Lease
	unpin()
}

// keyedMember is a key's Limiter from Keyed.For or KeyedTokenBucket.For.
type keyedMember interface {
	// resolve returns the key's limiter (pinned by pin, when not nil), or,
	// for a KeyedTokenBucket, the part that decides for the key.
	resolve() (inner Limiter, p part, pin pinner, err error)
	givesBack() bool
}

// basePart is one of this package's six limiters as a part.
type basePart struct{ b *base }

func (p basePart) mutex() *sync.Mutex { return &p.b.mu }

func (p basePart) take(t time.Time, n int) (bool, reason, int64) {
	b := p.b
	now := b.instant(t)
	switch {
	case int64(n) > b.pol.maxRequest():
		return false, reasonExceeds, 0
	case b.q.Closed() != nil:
		return false, reasonClosed, 0
	case b.q.Len() > 0:
		return false, reasonLimited, 0 // no barging: wait in its queue
	}
	b.pol.hold()
	ok, retry := b.pol.take(now, n)
	return ok, reasonLimited, retry
}

func (p basePart) undo(t time.Time, n int) { p.b.pol.untake(p.b.instant(t), n) }
func (p basePart) settle()                 { p.b.pol.unhold() }

func (p basePart) grant(t time.Time, n int) Lease { return p.b.grant(n, p.b.instant(t)) }
func (p basePart) refuse()                        { p.b.rejected.Add(1) }

// slot is one member of a chain decision: a part decided under its lock,
// or a member from outside this package, decided by TryAcquire.
type slot struct {
	member int     // index in chain.ls, for reporting
	p      part    // nil for a foreign member
	lim    Limiter // the foreign member
	pin    pinner  // the keyed member this slot belongs to, if any
	lease  Lease
	taken  bool
}

// decide takes n permits from every member at one instant, or from none.
// skip, if >= 0, is a member whose permits the caller already holds as
// have; on refusal they are given back too. On refusal it returns the
// refusing member's lease and index. The refusing member counts the
// refusal when count is set (TryAcquire's, which its caller sees), not the
// retries of Acquire's wait.
func (c *chain) decide(n, skip int, have Lease, count bool) (Lease, int) {
	if n < 0 {
		c.giveBack(skip, have)
		return denied(reasonInvalid, 0), 0
	}
	var buf [8]slot
	var pinBuf [4]pinner
	slots, pins, err := c.resolve(buf[:0], pinBuf[:0], skip)
	defer func() {
		for _, p := range pins {
			p.unpin()
		}
	}()
	if err != nil {
		c.giveBack(skip, have)
		return Denied(err, 0), 0
	}
	if refused, i := tryForeign(slots, n); i >= 0 {
		releaseTaken(slots)
		c.giveBack(skip, have)
		return refused, slots[i].member
	}
	refused, i, t := decideParts(slots, n, count)
	if i >= 0 {
		releaseTaken(slots)
		c.giveBack(skip, have)
		return refused, slots[i].member
	}
	return c.lease(slots, n, skip, have, t), -1
}

// resolve lists the chain's members as slots, resolving keyed members to
// their key's limiter, pinned.
func (c *chain) resolve(slots []slot, pins []pinner, skip int) ([]slot, []pinner, error) {
	for i, l := range c.ls {
		if i == skip {
			continue
		}
		var err error
		if slots, pins, err = appendSlots(slots, pins, i, l, nil); err != nil {
			return slots, pins, err
		}
	}
	return slots, pins, nil
}

func appendSlots(slots []slot, pins []pinner, i int, l Limiter, pin pinner) ([]slot, []pinner, error) {
	switch m := l.(type) {
	case based:
		return append(slots, slot{member: i, p: basePart{m.core()}, pin: pin}), pins, nil
	case *chain:
		var err error
		for _, x := range m.ls {
			if slots, pins, err = appendSlots(slots, pins, i, x, pin); err != nil {
				break
			}
		}
		return slots, pins, err
	case keyedMember:
		inner, p, kpin, err := m.resolve()
		if err != nil {
			return slots, pins, err
		}
		if kpin != nil {
			pins = append(pins, kpin)
			pin = kpin
		}
		if p != nil {
			return append(slots, slot{member: i, p: p, pin: pin}), pins, nil
		}
		return appendSlots(slots, pins, i, inner, pin)
	}
	return append(slots, slot{member: i, lim: l, pin: pin}), pins, nil
}

// tryForeign asks the members from outside this package, in order, before
// any lock is taken. On refusal it returns the refusal and the slot's index.
func tryForeign(slots []slot, n int) (Lease, int) {
	for i := range slots {
		s := &slots[i]
		if s.p != nil {
			continue
		}
		s.lease = s.lim.TryAcquire(n)
		if !s.lease.Granted() {
			return s.lease, i
		}
		s.taken = true
	}
	return grantedLease(nil, 0, 0), -1
}

// decideParts locks every part's mutex in one process-wide order (by
// address), takes n from each at one instant, and undoes every take if one
// refuses, before unlocking. It returns the refusal and the slot's index,
// or index -1 when every part granted, and the instant it decided at.
func decideParts(slots []slot, n int, count bool) (Lease, int, time.Time) {
	var mbuf [8]*sync.Mutex
	mus := mbuf[:0]
	for i := range slots {
		if slots[i].p != nil {
			mus = append(mus, slots[i].p.mutex())
		}
	}
	slices.SortFunc(mus, func(a, b *sync.Mutex) int {
		return cmp.Compare(uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b)))
	})
	mus = slices.Compact(mus)
	for _, mu := range mus {
		mu.Lock()
	}
	t := time.Now()
	refused, at := Lease{}, -1
	for i := range slots {
		s := &slots[i]
		if s.p == nil {
			continue
		}
		ok, why, retry := s.p.take(t, n)
		if !ok {
			refused, at = denied(why, time.Duration(max(retry, 0))), i
			if count {
				s.p.refuse()
			}
			break
		}
		s.taken = true
	}
	for i := len(slots) - 1; i >= 0; i-- {
		s := &slots[i]
		if s.p == nil {
			continue
		}
		if s.taken && at >= 0 {
			s.p.undo(t, n)
			s.taken = false
		}
		s.p.settle() // every part asked, the refusing one too; a no-op for others
	}
	for i := len(mus) - 1; i >= 0; i-- {
		mus[i].Unlock()
	}
	return refused, at, t
}

// releaseTaken releases the leases of the foreign members taken before a
// refusal: a concurrency permit comes back, a rate permit stays spent.
func releaseTaken(slots []slot) {
	for i := len(slots) - 1; i >= 0; i-- {
		if s := &slots[i]; s.p == nil && s.taken {
			s.lease.Release()
			s.taken = false
		}
	}
}

// lease builds the chain's granted lease.
func (c *chain) lease(slots []slot, n, skip int, have Lease, t time.Time) Lease {
	if skip >= 0 {
		if a, ok := c.ls[skip].(awaiter); ok {
			a.countGrant() // the member the chain waited in: now a grant
		}
	}
	if c.static {
		// The member whose lease the caller waited for (skip) is a
		// Concurrency, which releasing the chain releases too.
		for i := range slots {
			slots[i].p.grant(t, n)
		}
		return grantedLease(c, n, int64(t.Sub(c.origin)))
	}
	held := make(heldLeases, 0, len(slots)+1)
	for i := range slots {
		s := &slots[i]
		if s.p != nil {
			s.lease = s.p.grant(t, n)
		}
		if s.pin != nil {
			s.lease = s.pin.wrap(s.lease)
		}
		if skip >= 0 && s.member > skip {
			held = append(held, have) // in member order, for release in reverse
			skip = -1
		}
		held = append(held, s.lease)
	}
	if skip >= 0 {
		held = append(held, have)
	}
	return grantedLease(held, n, 0)
}
