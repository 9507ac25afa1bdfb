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
// or earlier keys), expiries, untakes and searches, and its ring stays
// within four times its entries (and at least minLogCap).
func TestGrantLogModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l grantLog
	var r refLog
	key := int64(0)
	for step := range 200_000 {
		switch op := rng.IntN(10); {
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
			upTo := key - int64(rng.IntN(40))
			l.expire(upTo)
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
		if c := len(l.ents); c > minLogCap && l.size <= c/4 {
			t.Fatalf("step %d: a ring of %d for %d entries", step, c, l.size)
		}
	}
}

// The ring reallocates only when it is full or a quarter full: a log whose
// size goes back and forth across a boundary keeps its ring.
func TestGrantLogHysteresis(t *testing.T) {
	var l grantLog
	for k := range int64(64) {
		l.add(k, 1)
	}
	if len(l.ents) != 64 {
		t.Fatalf("ring of %d for 64 entries, want 64", len(l.ents))
	}
	l.expire(31) // 32 entries left: half full
	ring := &l.ents[0]
	next := int64(64)
	for range 1000 {
		l.add(next, 1) // 33
		l.untake(1)    // 32
		l.expire(next - 33)
		l.add(next, 1)
		next++
		l.expire(next - 33) // back to 32
	}
	if &l.ents[0] != ring {
		t.Fatal("the ring was reallocated while its size moved between 31 and 33 of 64")
	}
	l.expire(next - 16) // 15 left: under a quarter
	if len(l.ents) != 32 {
		t.Fatalf("ring of %d for %d entries, want 32", len(l.ents), l.size)
	}
	l.expire(next)
	if len(l.ents) != minLogCap || l.total() != 0 {
		t.Fatalf("empty log keeps a ring of %d and %d permits", len(l.ents), l.total())
	}
}
