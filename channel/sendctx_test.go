package channel

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/rategate/rategate/limiter"
)

// retainingLimiter refuses TryAcquire (so that every send waits in
// Acquire), grants Acquire at once, and keeps every context it was given,
// as a limiter may (for tracing, or with context.AfterFunc) after Acquire
// has returned.
type retainingLimiter struct {
	mu   sync.Mutex
	ctxs []context.Context
	// fired counts the context.AfterFunc callbacks that ran, per context.
	fired []int
	after bool // register a context.AfterFunc on each context
}

func (l *retainingLimiter) TryAcquire(int) limiter.Lease {
	return limiter.Denied(limiter.ErrLimited, 0)
}

func (l *retainingLimiter) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	l.mu.Lock()
	i := len(l.ctxs)
	l.ctxs = append(l.ctxs, ctx)
	l.fired = append(l.fired, 0)
	l.mu.Unlock()
	if l.after {
		context.AfterFunc(ctx, func() {
			l.mu.Lock()
			l.fired[i]++
			l.mu.Unlock()
		})
	}
	return limiter.NewLease(n, nil), nil
}

type sendKey struct{}

// TestSendContextRetained: the context a limiter is given stays a valid
// context after Send returns, whatever the next Sends do: its values are
// its own caller's, and it is done (Done closed, Err non-nil, AfterFuncs
// run), as a context made with context.WithCancel and cancelled when the
// call returns.
func TestSendContextRetained(t *testing.T) {
	for _, after := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			lim := &retainingLimiter{after: after}
			c := New[int](lim)
			const sends = 50
			for i := range sends {
				ctx := context.WithValue(t.Context(), sendKey{}, i)
				if err := c.Send(ctx, i); err != nil {
					t.Fatal(err)
				}
				c.Recv(t.Context())
			}
			synctest.Wait()
			lim.mu.Lock()
			defer lim.mu.Unlock()
			for i, ctx := range lim.ctxs {
				if v := ctx.Value(sendKey{}); v != i {
					t.Fatalf("after=%v: context of send %d has value %v, want %d", after, i, v, i)
				}
				select {
				case <-ctx.Done():
				default:
					t.Fatalf("after=%v: context of send %d not done after Send returned", after, i)
				}
				if ctx.Err() == nil {
					t.Fatalf("after=%v: context of send %d: Done closed but Err nil", after, i)
				}
				if after && lim.fired[i] != 1 {
					t.Fatalf("context of send %d: AfterFunc ran %d times, want 1", i, lim.fired[i])
				}
			}
		})
	}
}

// TestSendBackgroundContextRetained: sends with context.Background share
// one context, which a limiter may keep: it has no values and no deadline,
// and is done exactly when the Chan is closed.
func TestSendBackgroundContextRetained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := &retainingLimiter{after: true}
		c := New[int](lim)
		for i := range 3 {
			if err := c.Send(context.Background(), i); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		lim.mu.Lock()
		ctxs, fired := slices.Clone(lim.ctxs), slices.Clone(lim.fired)
		lim.mu.Unlock()
		for i, ctx := range ctxs {
			if ctx.Value(sendKey{}) != nil || ctx.Err() != nil || fired[i] != 0 {
				t.Fatalf("send %d's context before Close: value %v, Err %v, AfterFunc ran %d times",
					i, ctx.Value(sendKey{}), ctx.Err(), fired[i])
			}
			if _, ok := ctx.Deadline(); ok {
				t.Fatalf("send %d's context has a deadline", i)
			}
		}
		c.Close()
		synctest.Wait()
		lim.mu.Lock()
		defer lim.mu.Unlock()
		for i, ctx := range ctxs {
			select {
			case <-ctx.Done():
			default:
				t.Fatalf("send %d's context not done after Close", i)
			}
			if !errors.Is(ctx.Err(), context.Canceled) || lim.fired[i] != 1 {
				t.Fatalf("send %d's context after Close: Err %v, AfterFunc ran %d times", i, ctx.Err(), lim.fired[i])
			}
		}
	})
}
