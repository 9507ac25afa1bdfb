package limiter

import (
	"math/rand/v2"
	"testing"
)

// refLog is the plain model of a grantLog: every entry with its own count.
type refLog struct{ keys, ns []int64 }

func (r *refLog) total() (t int64) {
	for _, n := range r.ns {
		t += n
	}
	return t
}

// grantLog agrees with the plain model under random adds (merging at equal
// or earlier keys), expiries, untakes and searches, and its ring is more
// than four times its entries (and above minLogCap) after an expiry only
// while a shrink is pending, for less than a window.
func TestGrantLogModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := grantLog{span: 30}
	var r refLog
	key, cursor := int64(0), int64(-30)
	for step := range 200_000 {
		op := rng.IntN(10)
		switch {
		case op < 5: // add, at a later key or (merging) the same or an earlier one
			key += int64(rng.IntN(3))
			n := int64(rng.IntN(4))
			k := key - int64(rng.IntN(2))
			l.add(k, n)
			if n > 0 {
				if len(r.keys) > 0 && k <= r.keys[len(r.keys)-1] {
					r.ns[len(r.ns)-1] += n
				} else {
					r.keys, r.ns = append(r.keys, k), append(r.ns, n)
				}
			}
		case op < 7: // expire up to a recent key
			upTo := max(key-int64(rng.IntN(40)), cursor) // the cursor never decreases
			l.expire(upTo)
			cursor = upTo
			for len(r.keys) > 0 && r.keys[0] <= upTo {
				r.keys, r.ns = r.keys[1:], r.ns[1:]
			}
		case op < 8: // untake part or all of the newest entry
			if len(r.ns) > 0 {
				last := len(r.ns) - 1
				n := 1 + rng.Int64N(r.ns[last])
				l.untake(n)
				if r.ns[last] -= n; r.ns[last] == 0 {
					r.keys, r.ns = r.keys[:last], r.ns[:last]
				}
			}
		default: // search
			total := r.total()
			if total == 0 {
				break
			}
			excess := 1 + rng.Int64N(total)
			got, ok := l.keyFreeing(uint64(excess))
			var sum int64
			for i, n := range r.ns {
				if sum += n; sum >= excess {
					if !ok || got != r.keys[i] {
						t.Fatalf("step %d: keyFreeing(%d) = %d, %v; want %d", step, excess, got, ok, r.keys[i])
					}
					break
				}
			}
		}
		if l.total() != r.total() || l.size != len(r.keys) {
			t.Fatalf("step %d: total %d size %d, model %d and %d", step, l.total(), l.size, r.total(), len(r.keys))
		}
		if k, n, ok := l.newest(); ok != (l.size > 0) || ok && (k != r.keys[len(r.keys)-1] || n != r.ns[len(r.ns)-1]) {
			t.Fatalf("step %d: newest %d %d %v, model %v %v", step, k, n, ok, r.keys, r.ns)
		}
		// An expiry sees to the ring's size: more than four times the
		// entries only while a shrink is pending, for less than a window.
		if c := len(l.ents); op >= 5 && op < 7 && c > minLogCap && l.size <= c/4 && (!l.low || cursor-l.lowAt >= l.span) {
			t.Fatalf("step %d: a ring of %d for %d entries, low %v since %d, cursor %d", step, c, l.size, l.low, l.lowAt, cursor)
		}
	}
}

// The ring reallocates only when it is full, or after it has been at most a
// quarter full for a whole window: a log that drains and fills again within
// a window keeps its ring; one that stays small for a window gives it back.
func TestGrantLogHysteresis(t *testing.T) {
	l := grantLog{span: 100}
	next := int64(0)
	fill := func(n int) {
		for range n {
			l.add(next, 1)
			next++
		}
	}
	fill(64)
	if len(l.ents) != 64 {
		t.Fatalf("ring of %d for 64 entries, want 64", len(l.ents))
	}
	ring := &l.ents[0]
	for range 1000 { // drain, then fill again, within the window
		l.expire(next - 1) // empty: 64 keys after the last drain, under a window
		fill(64)
	}
	if &l.ents[0] != ring {
		t.Fatal("the ring was reallocated by drains and fills within a window")
	}
	// 49 entries that leave, then 15 far newer ones that stay.
	l.expire(next - 1)
	base := next
	fill(49)
	next = base + 1000
	fill(15)
	l.expire(base + 48) // 15 left of 64: under a quarter
	l.expire(base + 147)
	if len(l.ents) != 64 || l.size != 15 {
		t.Fatalf("ring of %d for %d entries after less than a window under a quarter full, want 64 for 15", len(l.ents), l.size)
	}
	l.expire(base + 148) // a window under a quarter full: shrunk to fit
	if len(l.ents) != 32 || l.size != 15 || l.total() != 15 {
		t.Fatalf("ring of %d for %d entries (%d permits) a window after it went under a quarter, want 32 for 15", len(l.ents), l.size, l.total())
	}
}
