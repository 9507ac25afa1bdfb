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
	for _, l := range chanLimiters() {
		b.Run(l.name, func(b *testing.B) {
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
	// The same pair with a cancellable context, as real callers pass: the
	// limiter reads ctx.Err (a cancelCtx's), and Send wraps ctx to hear Close.
	b.Run("chan-unlimited-cancelctx", func(b *testing.B) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		c := channel.New[int](chanUnlimited{})
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
	flow := func(b *testing.B, c *channel.Chan[int]) {
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
	b.Run("chan-concurrency-bounded", func(b *testing.B) {
		flow(b, channel.New[int](must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: chanBuf}))))
	})
	// Unbounded: the producer may run ahead, so the buffer (and its memory)
	// grows with the backlog.
	b.Run("chan-unlimited-unbounded", func(b *testing.B) {
		flow(b, channel.New[int](chanUnlimited{}))
	})
}
