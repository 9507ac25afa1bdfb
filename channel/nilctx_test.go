//lint:file-ignore SA1012 these tests pass a nil Context on purpose

package channel

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
)

// panicValue runs f and returns what it panicked with (nil if it did not).
func panicValue(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestNilContext (issue 12, bug 10): every method that takes a context
// panics with "channel: nil Context" when given nil, at once: before it
// takes a lock, asks the limiter or changes anything. Recv(nil) used to
// panic inside the Chan's mutex and leave it locked, so every later call
// blocked forever; here the mutexes are probed with TryLock, so the old
// code fails at once rather than hanging, and then the Chan must still
// move an item from a waiting receiver's send as before.
func TestNilContext(t *testing.T) {
	calls := []struct {
		name string
		call func(c *Chan[int])
	}{
		{"Send", func(c *Chan[int]) { c.Send(nil, 1) }},
		{"SendN", func(c *Chan[int]) { c.SendN(nil, 1, 2) }},
		{"Recv", func(c *Chan[int]) { c.Recv(nil) }},
		{"All", func(c *Chan[int]) { c.All(nil) }},
		{"All-range", func(c *Chan[int]) {
			for range c.All(nil) {
			}
		}},
		{"Out", func(c *Chan[int]) { c.Out(nil) }},
	}
	for _, tc := range calls {
		for _, buffered := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/buffered=%d", tc.name, buffered), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					checkNilContext(t, tc.call, buffered)
				})
			})
		}
	}
}

func checkNilContext(t *testing.T, call func(*Chan[int]), buffered int) {
	const limit = 10
	lim := mustConc(t, limit)
	c := New[int](lim)
	ctx := t.Context()
	for i := range buffered {
		if err := c.Send(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	if got := panicValue(func() { call(c) }); got != "channel: nil Context" {
		t.Fatalf("panicked with %#v, want \"channel: nil Context\"", got)
	}
	if !c.mu.TryLock() {
		t.Fatal("the Chan's mutex is still locked after the panic")
	}
	c.mu.Unlock()
	if c.Len() != buffered || c.nrecv != 0 || c.held != 0 {
		t.Fatalf("after the panic: Len %d, nrecv %d, held %d; want %d, 0, 0", c.Len(), c.nrecv, c.held, buffered)
	}
	if av := lim.Stats().Available; av != limit-int64(buffered) {
		t.Fatalf("after the panic the limiter has %d permits available, want %d", av, limit-buffered)
	}
	// The Chan works as before: the buffered item comes first, then a
	// receiver waiting in another goroutine gets the next send.
	for i := range buffered {
		if v, err := c.Recv(ctx); v != i || err != nil {
			t.Fatalf("Recv = %d, %v; want %d, nil", v, err, i)
		}
	}
	got := make(chan int, 1)
	go func() {
		v, err := c.Recv(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	synctest.Wait()
	if err := c.Send(context.Background(), 42); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	select {
	case v := <-got:
		if v != 42 {
			t.Fatalf("the waiting receiver got %d, want 42", v)
		}
	default:
		t.Fatal("the waiting receiver did not get the send")
	}
	if av := lim.Stats().Available; av != limit {
		t.Fatalf("after every receive the limiter has %d permits available, want %d", av, limit)
	}
	c.Close()
}
