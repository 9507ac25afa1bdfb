package precise

import (
	"time"

	"github.com/rategate/rategate/internal/timeheap"
)

// entry is one wait pending on the alarm.
type entry struct {
	at    time.Time
	ch    chan struct{} // signalled (without blocking) when at is reached
	index int           // in the alarm's heap; -1 when not in it
}

// HeapAt orders pending waits by instant (internal/timeheap).
func (e *entry) HeapAt() time.Time { return e.at }

// SetHeapIndex records e's place in the alarm's heap.
func (e *entry) SetHeapIndex(i int) { e.index = i }

// entries is a min-heap of pending waits by instant (container/heap).
type entries = timeheap.Heap[*entry]
