package channel

import "context"

// Out returns a receive-only Go channel that delivers the Chan's items in
// order, for use in a select statement:
//
//	out := c.Out(ctx)
//	for {
//		select {
//		case v, ok := <-out:
//			if !ok {
//				return // c closed and drained, or ctx done
//			}
//			handle(v)
//		case <-tick:
//			...
//		}
//	}
//
// A goroutine serves the returned channel. It takes the oldest item out of
// the buffer and offers it on the channel, which is unbuffered; the
// hand-off, when a receiver takes the item from the channel, is the receive
// that releases the item's lease. So each Out view holds at most one item at
// a time, with its lease: that item still counts in Len and still holds its
// permits until the hand-off, and the limiter's bound is the same as with
// Recv. Items reach the views and Recv callers each exactly once and are
// taken out oldest first, but an item a view holds may be handed off after
// a newer one was received with Recv.
//
// The goroutine ends, and closes the returned channel, when:
//   - ctx is done: the item it holds, if any, goes back to the front of the
//     buffer (where the next receive finds it), unless Drain has run since
//     it was taken, in which case it is discarded;
//   - the Chan is closed and its buffer is empty (every item received or
//     drained): Close followed by Drain ends every view at once, each
//     discarding the item it held and releasing its lease.
//
// Until one of these happens it waits, so a view must be ended with ctx or
// Close when no one receives from it any more, or its goroutine leaks.
func (c *Chan[T]) Out(ctx context.Context) <-chan T {
	mustContext(ctx)
	out := make(chan T)
	go c.serve(ctx, out)
	return out
}

func (c *Chan[T]) serve(ctx context.Context, out chan<- T) {
	defer close(out)
	for {
		e, drain, err := c.take(ctx, true)
		if err != nil {
			return
		}
		select {
		case out <- e.v:
			c.unhold(nil, nil)
			e.lease.Release()
		case <-drain:
			c.unhold(nil, nil)
			e.lease.Release()
		case <-ctx.Done():
			if !c.unhold(&e, drain) {
				e.lease.Release()
			}
			return
		}
	}
}

// unhold ends a view's hold on an entry. If e is not nil, it goes back to
// the front of the buffer, unless Drain has closed drain since the view took
// it; unhold reports whether it went back.
func (c *Chan[T]) unhold(e *entry[T], drain chan struct{}) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.held--
	if e == nil {
		return false
	}
	select {
	case <-drain:
		return false
	default:
	}
	c.q.pushFront(*e)
	if c.nrecv > 0 {
		c.signal()
	}
	return true
}
