package precise

import "time"

// entry is one wait pending on the alarm.
type entry struct {
	at    time.Time
	ch    chan struct{} // signalled (without blocking) when at is reached
	index int           // in the alarm's heap; -1 when not in it
}

// entries is a min-heap of pending waits by instant (container/heap).
type entries []*entry

func (h entries) Len() int           { return len(h) }
func (h entries) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h entries) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *entries) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}

func (h *entries) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}
