package pool

// fifo is a first-in, first-out queue on a ring buffer: the tasks handed
// to the workers, a key's waiting tasks, and the keys ready to be tried.
// Its buffer doubles when full and is reused as it drains, so a queue that
// fills and drains does not allocate, and it holds at most twice the items
// it held at once.
type fifo[T any] struct {
	buf  []T // len(buf) is 0 or a power of two
	head int // buf[head] is the oldest item
	n    int
}

func (q *fifo[T]) len() int { return q.n }

// at is the i-th item, oldest first.
func (q *fifo[T]) at(i int) *T { return &q.buf[(q.head+i)&(len(q.buf)-1)] }

func (q *fifo[T]) front() T { return *q.at(0) }

func (q *fifo[T]) push(x T) {
	q.grow()
	*q.at(q.n) = x
	q.n++
}

// pushFront puts x first, where pop takes it from.
func (q *fifo[T]) pushFront(x T) {
	q.grow()
	q.head = (q.head - 1) & (len(q.buf) - 1)
	q.buf[q.head] = x
	q.n++
}

func (q *fifo[T]) pop() T {
	p := q.at(0)
	x := *p
	var zero T
	*p = zero
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	return x
}

// grow makes room for one more item.
func (q *fifo[T]) grow() {
	if q.n < len(q.buf) {
		return
	}
	buf := make([]T, max(1, 2*len(q.buf)))
	for i := range q.n {
		buf[i] = *q.at(i)
	}
	q.buf, q.head = buf, 0
}

// removeFunc removes the items for which del returns true, keeping the
// others in order. del is called once per item, oldest first.
func (q *fifo[T]) removeFunc(del func(T) bool) {
	kept := 0
	for i := range q.n {
		if x := *q.at(i); !del(x) {
			*q.at(kept) = x
			kept++
		}
	}
	var zero T
	for i := kept; i < q.n; i++ {
		*q.at(i) = zero
	}
	q.n = kept
}

// reset empties the queue, keeping its buffer.
func (q *fifo[T]) reset() {
	clear(q.buf)
	q.head, q.n = 0, 0
}
