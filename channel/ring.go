package channel

import "github.com/rategate/rategate/limiter"

// entry is one buffered item and the lease its send took.
type entry[T any] struct {
	v     T
	lease limiter.Lease
}

// ring is a FIFO of entries in a power-of-two circular buffer. It grows by
// doubling when full. It shrinks by half when, over a generation of
// len(buf) pops, it never held more than a quarter of its size: a backlog's
// memory is given back once the flow runs low for a while, but a buffer
// that fills and empties in cycles (the common case of a producer and a
// consumer taking turns) keeps its size and never reallocates.
type ring[T any] struct {
	buf  []entry[T]
	head int // index of the oldest entry
	n    int // entries held
	peak int // most entries held in this generation
	pops int // pops in this generation
}

const minRing = 16

func (r *ring[T]) push(v T, lease *limiter.Lease) {
	if r.n == len(r.buf) {
		r.resize(max(2*len(r.buf), minRing))
	}
	slot := &r.buf[(r.head+r.n)&(len(r.buf)-1)]
	slot.v, slot.lease = v, *lease
	r.n++
	r.peak = max(r.peak, r.n)
}

// pushFront puts e back before the oldest entry.
func (r *ring[T]) pushFront(e entry[T]) {
	if r.n == len(r.buf) {
		r.resize(max(2*len(r.buf), minRing))
	}
	r.head = (r.head - 1) & (len(r.buf) - 1)
	r.buf[r.head] = e
	r.n++
	r.peak = max(r.peak, r.n)
}

// pop removes and returns the oldest entry; r must not be empty.
func (r *ring[T]) pop() entry[T] {
	var e entry[T]
	r.popInto(&e)
	return e
}

// popInto moves the oldest entry to *e; r must not be empty.
func (r *ring[T]) popInto(e *entry[T]) {
	slot := &r.buf[r.head]
	*e = *slot
	*slot = entry[T]{} // drop references for the garbage collector
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	if r.pops++; r.pops >= len(r.buf) {
		if r.peak <= len(r.buf)/4 && len(r.buf) > minRing {
			r.resize(len(r.buf) / 2)
		}
		r.pops, r.peak = 0, r.n
	}
}

// resize moves the entries, oldest first, to a buffer of size c (a power of
// two, at least r.n).
func (r *ring[T]) resize(c int) {
	buf := make([]entry[T], c)
	if r.n > 0 {
		k := copy(buf, r.buf[r.head:min(r.head+r.n, len(r.buf))])
		copy(buf[k:], r.buf[:r.n-k])
	}
	r.buf, r.head = buf, 0
}
