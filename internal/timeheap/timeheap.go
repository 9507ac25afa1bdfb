// Package timeheap is a min-heap of items ordered by instant, for
// container/heap, that keeps each item's index up to date so that an item can
// be removed or fixed in place (heap.Remove, heap.Fix). It serves the
// precise-wait alarm (internal/precise) and the pool's parked keys.
package timeheap

import "time"

// Item is what the heap holds: something with an instant, told its index.
type Item interface {
	// HeapAt is the instant the item is ordered by, earliest first.
	HeapAt() time.Time
	// SetHeapIndex records the item's index in the heap; -1 when it leaves.
	SetHeapIndex(i int)
}

// Heap is a min-heap of items by HeapAt; use it through container/heap.
type Heap[T Item] []T

// Len returns the number of items.
func (h Heap[T]) Len() int { return len(h) }

// Less orders items by instant.
func (h Heap[T]) Less(i, j int) bool { return h[i].HeapAt().Before(h[j].HeapAt()) }

// Swap swaps two items and their indexes.
func (h Heap[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].SetHeapIndex(i)
	h[j].SetHeapIndex(j)
}

// Push appends x, which must be a T; container/heap calls it.
func (h *Heap[T]) Push(x any) {
	it := x.(T)
	it.SetHeapIndex(len(*h))
	*h = append(*h, it)
}

// Pop removes the last item and returns it; container/heap calls it.
func (h *Heap[T]) Pop() any {
	old := *h
	it := old[len(old)-1]
	var zero T
	old[len(old)-1] = zero
	*h = old[:len(old)-1]
	it.SetHeapIndex(-1)
	return it
}
