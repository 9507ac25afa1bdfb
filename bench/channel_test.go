package bench

// Chan[T] (package channel) against a plain buffered Go channel and against
// x/time/rate's Wait followed by a channel send.
//
// BenchmarkChanPair/<impl> is one Send followed by one Recv on one
// goroutine: the cost of moving one item through, lease taken and released.
// BenchmarkChanFlow/<impl> is one producer and one consumer goroutine: ns/op
// per item, with the consumer blocking whenever the buffer runs dry and the
// producer whenever it is full (chanBuf items: the Go channel's capacity, or
// a Concurrency limiter of chanBuf permits).
// The "unlimited" limiter grants every request with a lease that releases
// nothing: the Chan's own overhead. The other rows add the cost of a real
// limiter that never refuses.

import (
	"context"
	"testing"

	"github.com/rategate/rategate/channel"
	"github.com/rategate/rategate/limiter"
	"golang.org/x/time/rate"
)

// chanUnlimited is a Limiter that grants everything at once.
type chanUnlimited struct{}

func (chanUnlimited) TryAcquire(n int) limiter.Lease { return limiter.NewLease(n, nil) }

func (chanUnlimited) Acquire(_ context.Context, n int) (limiter.Lease, error) {
	return limiter.NewLease(n, nil), nil
}

var sinkInt int

const chanBuf = 1024

func chanLimiters() []struct {
	name string
	lim  func() limiter.Limiter
} {
	return []struct {
		name string
		lim  func() limiter.Limiter
	}{
		{"chan-unlimited", func() limiter.Limiter { return chanUnlimited{} }},
		{"chan-nil", func() limiter.Limiter { return nil }},
		{"chan-concurrency", func() limiter.Limiter { return admitConcurrency() }},
		{"chan-tokenbucket", func() limiter.Limiter { return admitTokenBucket() }},
	}
}

func BenchmarkChanPair(b *testing.B) {
	ctx := context.Background()
	b.Run("gochan", func(b *testing.B) {
		ch := make(chan int, chanBuf)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ch <- i
			i = <-ch
			i++
		}
		sinkInt = i
	})
	b.Run("xrate-wait-gochan", func(b *testing.B) {
		lim := rate.NewLimiter(rate.Inf, 1)
		ch := make(chan int, chanBuf)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := lim.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			ch <- i
			i = <-ch
			i++
		}
		sinkInt = i
	})
	b.Run("xrate-wait-gochan-huge", func(b *testing.B) {
		lim := admitXRate()
		ch := make(chan int, chanBuf)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := lim.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			ch <- i
			i = <-ch
			i++
		}
		sinkInt = i
	})
	// Each limiter with context.Background, and (but for the nil limiter)
	// with a cancellable context, as real callers pass: Send reads ctx.Err,
	// then asks TryAcquire, which grants.
	cancelled, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, suffix := range []string{"", "-cancelctx"} {
		for _, l := range chanLimiters() {
			ctx := ctx
			if suffix != "" {
				if l.name == "chan-nil" {
					continue
				}
				ctx = cancelled
			}
			b.Run(l.name+suffix, func(b *testing.B) {
				c := channel.New[int](l.lim())
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if err := c.Send(ctx, i); err != nil {
						b.Fatal(err)
					}
					v, err := c.Recv(ctx)
					if err != nil {
						b.Fatal(err)
					}
					i = v + 1
				}
				sinkInt = i
			})
		}
	}
	b.Run("chan-unlimited-try", func(b *testing.B) {
		c := channel.New[int](chanUnlimited{})
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := c.TrySend(i); err != nil {
				b.Fatal(err)
			}
			v, _ := c.TryRecv()
			i = v + 1
		}
		sinkInt = i
	})
}

func BenchmarkChanFlow(b *testing.B) {
	ctx := context.Background()
	b.Run("gochan", func(b *testing.B) {
		ch := make(chan int, chanBuf)
		b.ReportAllocs()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for v := range ch {
				sinkInt = v
			}
		}()
		i := 0
		for b.Loop() {
			ch <- i
			i++
		}
		close(ch)
		<-done
	})
	b.Run("chan-concurrency-bounded", func(b *testing.B) {
		chanFlow(b, ctx, channel.New[int](must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: chanBuf}))))
	})
	// Unbounded: the producer may run ahead, so the buffer (and its memory)
	// grows with the backlog.
	b.Run("chan-unlimited-unbounded", func(b *testing.B) {
		chanFlow(b, ctx, channel.New[int](chanUnlimited{}))
	})
}

// chanFlow sends b.N items on c with ctx while a goroutine receives them
// with All, then closes c.
func chanFlow(b *testing.B, ctx context.Context, c *channel.Chan[int]) {
	b.ReportAllocs()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := range c.All(ctx) {
			sinkInt = v
		}
	}()
	i := 0
	for b.Loop() {
		if err := c.Send(ctx, i); err != nil {
			b.Fatal(err)
		}
		i++
	}
	c.Close()
	<-done
}

// chanDoneLimiter refuses TryAcquire, so that a send takes its waiting
// path, and in Acquire asks the context for its Done channel and checks it,
// as a limiter that has to wait does (it selects on ctx.Done with its timer
// or its queue), then grants.
type chanDoneLimiter struct{}

func (chanDoneLimiter) TryAcquire(int) limiter.Lease { return limiter.Denied(limiter.ErrLimited, 0) }

func (chanDoneLimiter) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	select {
	case <-ctx.Done():
		return limiter.Lease{}, ctx.Err()
	default:
		return limiter.NewLease(n, nil), nil
	}
}

// BenchmarkChanSendContext measures what a Send costs to hear the Chan's
// Close while it waits. A Send must hand the limiter one context that ends
// with the caller's ctx and also with Close; channel builds it the plain
// way, context.WithCancel(ctx) plus context.AfterFunc(closing, cancel), but
// only on the path that waits: it asks TryAcquire first, which needs no
// context. The rows, each one Send and one Recv with a cancellable ctx:
//
//   - chan-*: Chan.Send as it is;
//   - plain-*: the context built around every Acquire, and a Chan with no
//     limiter of its own;
//   - floor-*: Acquire with the caller's ctx as it is (a send that would
//     not hear Close): what either way adds is its row minus this one.
//
// *-grant uses a limiter that grants at once (the fast path of every
// limiter: chan-grant takes it through TryAcquire); *-wait one whose
// TryAcquire refuses and whose Acquire asks for ctx.Done first, as a
// limiter about to wait does (chan-wait then builds the plain context). The
// parallel rows run the same on every P (GOMAXPROCS goroutines on one
// Chan). chan-blocking: sends that really wait, on a Concurrency limiter of
// one permit drained by a receiver goroutine, for scale.
func BenchmarkChanSendContext(b *testing.B) {
	lims := []struct {
		name string
		lim  limiter.Limiter
	}{{"grant", chanUnlimited{}}, {"wait", chanDoneLimiter{}}}
	type sendFunc func(ctx context.Context, i int) error
	shapes := []struct {
		name string
		make func(lim limiter.Limiter) (send sendFunc, recv func(context.Context) (int, error), stop func())
	}{
		{"chan", func(lim limiter.Limiter) (sendFunc, func(context.Context) (int, error), func()) {
			c := channel.New[int](lim)
			return c.Send, c.Recv, func() { c.Close() }
		}},
		{"plain", func(lim limiter.Limiter) (sendFunc, func(context.Context) (int, error), func()) {
			c := channel.New[int](nil)
			closing, closeAll := context.WithCancel(context.Background())
			send := func(ctx context.Context, i int) error {
				actx, cancel := context.WithCancel(ctx)
				stop := context.AfterFunc(closing, cancel)
				lease, err := lim.Acquire(actx, 1)
				stop()
				cancel()
				if err != nil {
					return err
				}
				lease.Release() // a real Chan keeps it until the receive; these release nothing
				return c.Send(ctx, i)
			}
			return send, c.Recv, func() { closeAll(); c.Close() }
		}},
		{"floor", func(lim limiter.Limiter) (sendFunc, func(context.Context) (int, error), func()) {
			c := channel.New[int](nil)
			send := func(ctx context.Context, i int) error {
				lease, err := lim.Acquire(ctx, 1)
				if err != nil {
					return err
				}
				lease.Release()
				return c.Send(ctx, i)
			}
			return send, c.Recv, func() { c.Close() }
		}},
	}
	// chan-blocking: sends that really wait, on a Concurrency limiter of one
	// permit drained by a receiver goroutine: what the waiting path's
	// context costs beside the wait itself (both goroutines' CPU time per item).
	b.Run("chan-blocking", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		chanFlow(b, ctx, channel.New[int](must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1}))))
	})
	for _, sh := range shapes {
		for _, l := range lims {
			b.Run(sh.name+"-"+l.name, func(b *testing.B) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				send, recv, stop := sh.make(l.lim)
				defer stop()
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if err := send(ctx, i); err != nil {
						b.Fatal(err)
					}
					v, err := recv(ctx)
					if err != nil {
						b.Fatal(err)
					}
					i = v + 1
				}
				sinkInt = i
			})
			b.Run(sh.name+"-"+l.name+"-parallel", func(b *testing.B) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				send, recv, stop := sh.make(l.lim)
				defer stop()
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := send(ctx, 1); err != nil {
							b.Error(err)
							return
						}
						if _, err := recv(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
