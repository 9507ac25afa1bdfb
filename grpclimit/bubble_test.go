package grpclimit

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rategate/rategate/limiter"
)

// unary calls s's unary interceptor as grpc-go would, with a handler that
// counts the calls it serves.
type unary struct {
	s      *Server
	served atomic.Int64
}

func (u *unary) call(ctx context.Context) error {
	info := &grpc.UnaryServerInfo{FullMethod: methodEcho}
	_, err := u.s.Unary(ctx, "req", info, func(context.Context, any) (any, error) {
		u.served.Add(1)
		return "resp", nil
	})
	return err
}

// RetryInfo is exact: a call a nanosecond before the delay ends is refused,
// one at its end is served.
func TestRetryInfoExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 2}))
		u := &unary{s: must(New(Options{Limiter: lim}))}
		for range 2 {
			if err := u.call(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 5 {
			d := mustRetryInfo(t, u.call(t.Context()))
			if d != 100*time.Millisecond {
				t.Fatalf("round %d: RetryInfo %v, want the bucket's 100ms", i, d)
			}
			time.Sleep(d - time.Nanosecond)
			if early := mustRetryInfo(t, u.call(t.Context())); early != 1 {
				t.Fatalf("1ns early: RetryInfo %v, want 1ns", early)
			}
			time.Sleep(time.Nanosecond)
			if err := u.call(t.Context()); err != nil {
				t.Fatalf("round %d, after exactly the delay: %v", i, err)
			}
		}
	})
}

// With Wait, calls are served in turn at the limiter's pace; a call that
// cannot be served within Wait is refused at once, with the wait behind
// the queue as its RetryInfo.
func TestWaitServesInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 1}))
		u := &unary{s: must(New(Options{Limiter: lim, Wait: 250 * time.Millisecond}))}
		start := time.Now()
		type result struct {
			at  time.Duration
			err error
		}
		results := make(chan result, 4)
		for range 4 {
			go func() {
				err := u.call(t.Context())
				results <- result{time.Since(start), err}
			}()
			synctest.Wait() // queued in this order
		}
		var served []time.Duration
		for range 4 {
			r := <-results
			if r.err == nil {
				served = append(served, r.at)
				continue
			}
			if r.at != 0 {
				t.Errorf("refusal after %v, want at once", r.at)
			}
			if d := mustRetryInfo(t, r.err); d != 300*time.Millisecond {
				t.Errorf("RetryInfo %v, want the 300ms behind the queue", d)
			}
		}
		if len(served) != 3 || served[0] != 0 || served[1] != 100*time.Millisecond || served[2] != 200*time.Millisecond {
			t.Errorf("served at %v, want 0s, 100ms, 200ms", served)
		}

		// A call whose deadline comes before its turn is refused at once:
		// the client hears when to come back before its deadline passes.
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if d := mustRetryInfo(t, u.call(ctx)); d != 100*time.Millisecond {
			t.Errorf("a call with a short deadline: RetryInfo %v, want 100ms", d)
		}
		if time.Since(start) != 200*time.Millisecond {
			t.Errorf("refused after %v, want at once", time.Since(start)-200*time.Millisecond)
		}
	})
}

// A queued call whose client cancels leaves the queue at once and takes
// nothing: the call queued after it is served when the first token comes.
func TestQueuedCancelExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, 100*time.Millisecond), Burst: 1}))
		var codesSeen []codes.Code
		u := &unary{s: must(New(Options{Limiter: lim, Wait: time.Second, OnDecision: func(_ context.Context, d Decision) {
			codesSeen = append(codesSeen, d.Code)
		}}))}
		start := time.Now()
		if err := u.call(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- u.call(ctx) }()
		time.Sleep(50 * time.Millisecond)
		cancel()
		if err := <-done; status.Code(err) != codes.Canceled || time.Since(start) != 50*time.Millisecond {
			t.Fatalf("cancelled call: %v after %v", err, time.Since(start))
		}
		if err := u.call(t.Context()); err != nil {
			t.Fatal(err)
		}
		if at := time.Since(start); at != 100*time.Millisecond {
			t.Errorf("the call after the cancelled one was served at %v, want 100ms", at)
		}
		if u.served.Load() != 2 || len(codesSeen) != 3 || codesSeen[1] != codes.Canceled {
			t.Errorf("served %d, decisions %v", u.served.Load(), codesSeen)
		}
	})
}
