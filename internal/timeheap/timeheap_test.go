package timeheap

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"
)

type item struct {
	at    time.Time
	index int
}

func (it *item) HeapAt() time.Time  { return it.at }
func (it *item) SetHeapIndex(i int) { it.index = i }

func TestOrderAndIndexes(t *testing.T) {
	base := time.Unix(0, 0)
	var h Heap[*item]
	items := make([]*item, 200)
	for i := range items {
		items[i] = &item{at: base.Add(time.Duration(rand.IntN(1000)))}
		heap.Push(&h, items[i])
	}
	for i, it := range h {
		if it.index != i {
			t.Fatalf("item at %d says index %d", i, it.index)
		}
	}
	// Remove a few by index, then pop the rest in order.
	for _, it := range items[:50] {
		heap.Remove(&h, it.index)
		if it.index != -1 {
			t.Fatalf("removed item keeps index %d", it.index)
		}
	}
	last := base.Add(-1)
	for h.Len() > 0 {
		it := heap.Pop(&h).(*item)
		if it.at.Before(last) {
			t.Fatalf("popped %v after %v", it.at, last)
		}
		if it.index != -1 {
			t.Fatalf("popped item keeps index %d", it.index)
		}
		last = it.at
	}
}
