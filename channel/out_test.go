package channel

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestOutSelect: the view delivers in order in a select; it holds one item,
// which keeps its permit (and counts in Len) until the hand-off.
func TestOutSelect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustConc(t, 3)
		c := New[int](lim)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		out := c.Out(ctx)
		for i := range 3 {
			c.Send(t.Context(), i)
		}
		synctest.Wait() // the view has taken item 0 and offers it
		if c.Len() != 3 || lim.InUse() != 3 {
			t.Fatalf("Len %d, InUse %d; want 3, 3: the held item keeps its lease", c.Len(), lim.InUse())
		}
		if err := c.TrySend(9); err == nil {
			t.Fatal("TrySend went over the bound while the view held an item")
		}
		tick := time.After(time.Second)
		var got []int
		for len(got) < 3 {
			select {
			case v := <-out:
				got = append(got, v)
				synctest.Wait()
				if c.Len() != 3-len(got) || lim.InUse() != 3-len(got) {
					t.Fatalf("after %d hand-offs: Len %d, InUse %d", len(got), c.Len(), lim.InUse())
				}
			case <-tick:
				t.Fatal("tick before the items")
			}
		}
		if !slices.Equal(got, []int{0, 1, 2}) {
			t.Fatalf("got %v", got)
		}
	})
}

// TestOutContextPutsBack: when the view's ctx ends, its held item goes back
// to the front, and its channel is closed.
func TestOutContextPutsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := mustConc(t, 5)
		c := New[int](lim)
		for i := range 3 {
			c.Send(t.Context(), i)
		}
		ctx, cancel := context.WithCancel(t.Context())
		out := c.Out(ctx)
		synctest.Wait()
		if v, _ := c.Recv(t.Context()); v != 1 {
			t.Fatalf("Recv while the view holds item 0 = %d, want 1", v)
		}
		cancel()
		synctest.Wait()
		if _, ok := <-out; ok {
			t.Fatal("view still open after its ctx ended")
		}
		if c.Len() != 2 || lim.InUse() != 2 {
			t.Fatalf("Len %d, InUse %d; want 2, 2", c.Len(), lim.InUse())
		}
		for _, want := range []int{0, 2} {
			if v, _ := c.Recv(t.Context()); v != want {
				t.Fatalf("Recv = %d, want %d (the view's item back at the front)", v, want)
			}
		}
	})
}

// TestOutClose: after Close the view delivers what is left, then closes.
func TestOutClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New[int](mustConc(t, 5))
		out := c.Out(context.Background())
		c.Send(t.Context(), 1)
		c.Send(t.Context(), 2)
		c.Close()
		var got []int
		for v := range out {
			got = append(got, v)
		}
		if !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("got %v", got)
		}
		// An empty Chan's view ends on Close too.
		c2 := New[int](nil)
		out2 := c2.Out(context.Background())
		synctest.Wait()
		c2.Close()
		if _, ok := <-out2; ok {
			t.Fatal("view of a closed empty Chan delivered")
		}
	})
}

// TestOutCloseDrain: Close then Drain ends views that nobody reads, each
// releasing the lease of the item it held.
func TestOutCloseDrain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := &countingLimiter{}
		c := New[int](lim)
		for i := range 10 {
			c.Send(t.Context(), i)
		}
		outs := []<-chan int{c.Out(context.Background()), c.Out(context.Background())}
		synctest.Wait()
		if c.Len() != 10 {
			t.Fatalf("Len %d", c.Len())
		}
		c.Close()
		if n := c.Drain(); n != 8 {
			t.Fatalf("Drain = %d, want 8 (2 held by the views)", n)
		}
		synctest.Wait()
		for _, out := range outs {
			if _, ok := <-out; ok {
				t.Fatal("view delivered after Close and Drain")
			}
		}
		if c.Len() != 0 {
			t.Fatalf("Len %d", c.Len())
		}
		if err := lim.check(10); err != nil {
			t.Fatal(err)
		}
	})
}

// TestOutDrainOpen: Drain on an open Chan discards the view's item too; the
// view goes on with later items.
func TestOutDrainOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := &countingLimiter{}
		c := New[int](lim)
		ctx, cancel := context.WithCancel(t.Context())
		out := c.Out(ctx)
		c.Send(t.Context(), 1)
		c.Send(t.Context(), 2)
		synctest.Wait()
		c.Drain()
		synctest.Wait()
		if c.Len() != 0 {
			t.Fatalf("Len %d after Drain", c.Len())
		}
		c.Send(t.Context(), 3)
		if v := <-out; v != 3 {
			t.Fatalf("view delivered %d, want 3", v)
		}
		cancel()
		synctest.Wait()
		if err := lim.check(3); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Recv(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Recv: %v", err)
		}
	})
}
