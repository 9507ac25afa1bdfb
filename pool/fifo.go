package pool

import "slices"

// fifo is a first-in, first-out queue on a slice: a key's waiting tasks, and
// the keys ready to be tried. Its array is reused once it empties, and a
// push moves the items down before it grows the array, so a queue that
// fills and drains does not allocate, and its array holds at most twice the
// items it held at once.
type fifo[T any] struct {
	items []T // items[head:] wait, oldest first
	head  int
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) front() T { return q.items[q.head] }

func (q *fifo[T]) push(x T) {
	if len(q.items) == cap(q.items) && q.head > 0 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, x)
}

// pushFront puts x back first, where pop took it from.
func (q *fifo[T]) pushFront(x T) {
	if q.head == 0 {
		q.items = slices.Insert(q.items, 0, x)
		return
	}
	q.head--
	q.items[q.head] = x
}

func (q *fifo[T]) pop() T {
	x := q.items[q.head]
	var zero T
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return x
}

// removeFunc removes the items for which del returns true, keeping the
// others in order. del is called once per item, oldest first.
func (q *fifo[T]) removeFunc(del func(T) bool) {
	kept := slices.DeleteFunc(q.items[q.head:], del) // clears what it removed
	q.items = q.items[:q.head+len(kept)]
	if q.len() == 0 {
		q.items, q.head = q.items[:0], 0
	}
}

// reset empties the queue, keeping its array.
func (q *fifo[T]) reset() {
	clear(q.items)
	q.items, q.head = q.items[:0], 0
}
