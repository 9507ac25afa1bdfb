package channel

import (
	"math/rand/v2"
	"testing"

	"github.com/rategate/rategate/limiter"
)

// TestRingModel drives the ring with random pushes, front pushes and pops
// and compares it with a slice, through growth, wrap-around and shrinking.
func TestRingModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var r ring[int]
	var model []int
	next := 0
	for step := range 200_000 {
		// Phases of mostly pushing and mostly popping, so the ring grows
		// large and shrinks back.
		pushBias := 6
		if (step/5000)%2 == 1 {
			pushBias = 3
		}
		switch op := rng.IntN(10); {
		case op < pushBias:
			l := limiter.NewLease(next, nil)
			r.push(next, &l)
			model = append(model, next)
			next++
		case op == 9 && len(model) > 0:
			// pop and push back at the front
			e := r.pop()
			r.pushFront(e)
		default:
			if len(model) == 0 {
				continue
			}
			e := r.pop()
			if e.v != model[0] || e.lease.Permits() != model[0] {
				t.Fatalf("step %d: popped %d (lease %d), want %d", step, e.v, e.lease.Permits(), model[0])
			}
			model = model[1:]
		}
		if r.n != len(model) {
			t.Fatalf("step %d: ring holds %d, model %d", step, r.n, len(model))
		}
		if r.n > len(r.buf) {
			t.Fatalf("step %d: ring of %d slots holds %d", step, len(r.buf), r.n)
		}
		if len(r.buf)&(len(r.buf)-1) != 0 {
			t.Fatalf("step %d: ring size %d is not a power of two", step, len(r.buf))
		}
	}
	for len(model) > 0 {
		if e := r.pop(); e.v != model[0] {
			t.Fatalf("final drain: popped %d, want %d", e.v, model[0])
		}
		model = model[1:]
	}
	for i, e := range r.buf {
		if e.v != 0 || e.lease.Granted() {
			t.Fatalf("slot %d not cleared after pop: %+v", i, e)
		}
	}
}

// TestRingMemory: a ring that fills and empties in cycles keeps its size
// (no reallocation per cycle); once the flow runs low, it shrinks back to
// minRing.
func TestRingMemory(t *testing.T) {
	var r ring[int]
	var l limiter.Lease
	cycle := func() {
		for i := range 1000 {
			r.push(i, &l)
		}
		for range 1000 {
			r.pop()
		}
	}
	cycle()
	buf := &r.buf[0]
	for range 20 {
		cycle()
	}
	if &r.buf[0] != buf || len(r.buf) != 1024 {
		t.Fatalf("the ring reallocated while cycling between empty and 1000 items (size %d)", len(r.buf))
	}
	allocs := testing.AllocsPerRun(10, cycle)
	if allocs != 0 {
		t.Fatalf("%v allocations per fill-and-drain cycle", allocs)
	}
	// A low flow: at most 2 items held at a time.
	for range 4 * 1024 {
		r.push(1, &l)
		r.push(2, &l)
		r.pop()
		r.pop()
	}
	if len(r.buf) != minRing {
		t.Fatalf("after a long low flow the ring has %d slots, want %d", len(r.buf), minRing)
	}
}

func TestRingPushFrontEmpty(t *testing.T) {
	var r ring[string]
	r.pushFront(entry[string]{v: "b"})
	r.pushFront(entry[string]{v: "a"})
	l := limiter.Lease{}
	r.push("c", &l)
	for _, want := range []string{"a", "b", "c"} {
		if got := r.pop().v; got != want {
			t.Fatalf("popped %q, want %q", got, want)
		}
	}
}
