package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rategate/rategate/internal/ratelimit"
	"github.com/rategate/rategate/limiter"
)

// must returns v, and panics on a setup error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// mustRetryInfo returns the RetryInfo delay of a refusal, failing the test
// when err is not codes.ResourceExhausted or carries none.
func mustRetryInfo(t testing.TB, err error) time.Duration {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("err = %v, want codes.ResourceExhausted", err)
	}
	d, ok := serverRetryInfo(err)
	if !ok || d <= 0 {
		t.Fatalf("refusal %v carries no positive RetryInfo", err)
	}
	return d
}

func withTenant(ctx context.Context, tenant string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "tenant", tenant)
}

// Many clients of several tenants call at once: each tenant gets exactly
// its quota, every refusal carries RetryInfo and the quota metadata.
func TestServerBoundPerKey(t *testing.T) {
	const limit, tenants, callers = 5, 4, 16
	keyed := must(limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
		return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: limit, Window: time.Minute})
	}}))
	s := must(New(Options{PerKey: keyed.For, Key: MetadataKey("tenant")}))
	addr, svc := serve(t, s)
	conn := dial(t, addr, nil)

	var mu sync.Mutex
	served := map[string]int{}
	var wg sync.WaitGroup
	for i := range tenants * callers {
		tenant := fmt.Sprint("tenant-", i%tenants)
		wg.Go(func() {
			r := echo(withTenant(t.Context(), tenant), conn)
			if r.err == nil {
				mu.Lock()
				served[tenant]++
				mu.Unlock()
				return
			}
			d := mustRetryInfo(t, r.err)
			if d > time.Minute {
				t.Errorf("RetryInfo %v is longer than the window", d)
			}
			if got := r.trl.Get(MetadataRateLimit); len(got) != 1 || !strings.HasPrefix(got[0], `"default";r=0;t=`) {
				t.Errorf("refusal's ratelimit trailer = %q", got)
			}
		})
	}
	wg.Wait()
	for i := range tenants {
		if got := served[fmt.Sprint("tenant-", i)]; got != limit {
			t.Errorf("tenant-%d: %d calls served, want %d", i, got, limit)
		}
	}
	if got := len(svc.handled()); got != limit*tenants {
		t.Errorf("handler ran %d times, want %d", got, limit*tenants)
	}
}

// A served call carries the quota in its header metadata, in the syntax
// of HTTP's RateLimit-Policy and RateLimit fields.
func TestServerQuotaMetadata(t *testing.T) {
	lim := must(limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 3, Window: time.Minute}))
	s := must(New(Options{Limiter: lim, Policy: "per-minute"}))
	addr, _ := serve(t, s)
	conn := dial(t, addr, nil)
	for want := 2; want >= 0; want-- {
		r := echo(t.Context(), conn)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := r.hdr.Get(MetadataPolicy); len(got) != 1 || got[0] != `"per-minute";q=3;w=60` {
			t.Errorf("ratelimit-policy = %q", got)
		}
		got := r.hdr.Get(MetadataRateLimit)
		prefix := fmt.Sprintf(`"per-minute";r=%d;t=`, want)
		if len(got) != 1 || !strings.HasPrefix(got[0], prefix) {
			t.Errorf("ratelimit = %q, want %s...", got, prefix)
		}
	}
	r := echo(t.Context(), conn)
	d := mustRetryInfo(t, r.err)
	if got, want := r.trl.Get(MetadataRateLimit), fmt.Sprintf(`"per-minute";r=0;t=%d`, ratelimit.CeilSeconds(d)); len(got) != 1 || got[0] != want {
		t.Errorf("refusal's ratelimit trailer = %q, want %q", got, want)
	}

	// NoMetadata leaves them out, and a refusal still carries RetryInfo.
	s = must(New(Options{Limiter: lim, NoMetadata: true}))
	addr, _ = serve(t, s)
	r = echo(t.Context(), dial(t, addr, nil))
	mustRetryInfo(t, r.err)
	if len(r.hdr.Get(MetadataRateLimit))+len(r.trl.Get(MetadataRateLimit))+len(r.trl.Get(MetadataPolicy)) != 0 {
		t.Errorf("NoMetadata: header %v, trailer %v", r.hdr, r.trl)
	}
}

// A client that waits exactly the RetryInfo delay it was given is served,
// over a real connection (the exact instant is checked in a bubble, in
// TestRetryInfoExact).
func TestRetryInfoNeverEarly(t *testing.T) {
	const interval = 150 * time.Millisecond
	lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, interval), Burst: 1}))
	s := must(New(Options{Limiter: lim}))
	addr, _ := serve(t, s)
	conn := dial(t, addr, nil)
	if r := echo(t.Context(), conn); r.err != nil {
		t.Fatal(r.err)
	}
	for range 5 {
		r := echo(t.Context(), conn)
		d := mustRetryInfo(t, r.err)
		if d > interval {
			t.Fatalf("RetryInfo %v is longer than the bucket's interval %v", d, interval)
		}
		time.Sleep(d)
		if r := echo(t.Context(), conn); r.err != nil {
			t.Fatalf("after waiting the RetryInfo delay %v: %v", d, r.err)
		}
	}
}

// openChat opens a Chat stream, sends msgs and reads their echoes; it
// returns the echoes received and the stream's end (nil after a clean
// close).
func openChat(ctx context.Context, conn *grpc.ClientConn, msgs int) (int, error) {
	cs, err := conn.NewStream(ctx, chatDesc, methodChat)
	if err != nil {
		return 0, err
	}
	echoes := 0
	for i := range msgs {
		if err := cs.SendMsg(wrapperspb.String(fmt.Sprint(i))); err != nil {
			break // io.EOF: the stream ended; RecvMsg says how
		}
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			return echoes, err
		}
		echoes++
	}
	_ = cs.CloseSend()
	err = cs.RecvMsg(new(wrapperspb.StringValue))
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return echoes, err
}

// A stream takes its permit when it opens.
func TestStreamOpenTakesPermit(t *testing.T) {
	lim := must(limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 2, Window: time.Minute}))
	s := must(New(Options{Limiter: lim}))
	addr, svc := serve(t, s)
	conn := dial(t, addr, nil)
	for i := range 2 {
		if n, err := openChat(t.Context(), conn, 3); err != nil || n != 3 {
			t.Fatalf("stream %d: %d echoes, %v", i, n, err)
		}
	}
	n, err := openChat(t.Context(), conn, 3)
	mustRetryInfo(t, err)
	if n != 0 {
		t.Errorf("a refused stream echoed %d messages", n)
	}
	if got := len(svc.handled()); got != 2 {
		t.Errorf("handler ran %d times, want 2", got)
	}
}

// A concurrency limit caps the open streams: a stream's permit is held
// until its handler returns.
func TestStreamHoldsConcurrencyPermit(t *testing.T) {
	lim := must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1}))
	s := must(New(Options{Limiter: lim}))
	addr, _ := serve(t, s)
	conn := dial(t, addr, nil)

	first := must(conn.NewStream(t.Context(), chatDesc, methodChat))
	if err := first.SendMsg(wrapperspb.String("x")); err != nil {
		t.Fatal(err)
	}
	if err := first.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	_, err := openChat(t.Context(), conn, 1)
	if d := mustRetryInfo(t, err); d != time.Second {
		t.Errorf("RetryInfo of a concurrency limit = %v, want the 1s default", d)
	}
	_ = first.CloseSend()
	if err := first.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if _, err := openChat(t.Context(), conn, 1); err != nil {
		t.Fatalf("after the first stream ended: %v", err)
	}
}

// With PerMessage each received message takes a permit: the message over
// the limit is refused, with RetryInfo, and ends the stream.
func TestPerMessage(t *testing.T) {
	lim := must(limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 4, Window: time.Minute}))
	s := must(New(Options{Limiter: lim, PerMessage: true}))
	addr, _ := serve(t, s)
	conn := dial(t, addr, nil)
	n, err := openChat(t.Context(), conn, 10)
	mustRetryInfo(t, err)
	if n != 3 { // the opening took one permit
		t.Errorf("%d messages echoed, want 3", n)
	}

	// A client stream counts its messages the same way.
	lim = must(limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 4, Window: time.Minute}))
	s = must(New(Options{Limiter: lim, PerMessage: true}))
	addr, _ = serve(t, s)
	conn = dial(t, addr, nil)
	cs := must(conn.NewStream(t.Context(), countDesc, methodCount))
	for i := range 3 {
		if err := cs.SendMsg(wrapperspb.String(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	_ = cs.CloseSend()
	out := new(wrapperspb.StringValue)
	if err := cs.RecvMsg(out); err != nil || out.GetValue() != "3" {
		t.Fatalf("count = %q, %v", out.GetValue(), err)
	}
}

// With PerMessage and Wait, a stream's messages are paced: a pacer of one
// grant per 40 ms lets the opening and six messages through in no less
// than six intervals.
func TestPerMessageWaitPaces(t *testing.T) {
	const interval, msgs = 40 * time.Millisecond, 6
	lim := must(limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(1, interval)}))
	s := must(New(Options{Limiter: lim, PerMessage: true, Wait: time.Second}))
	addr, _ := serve(t, s)
	conn := dial(t, addr, nil)
	start := time.Now()
	n, err := openChat(t.Context(), conn, msgs)
	if err != nil || n != msgs {
		t.Fatalf("%d echoes, %v", n, err)
	}
	// Seven grants, each at least one interval after the one before.
	if elapsed := time.Since(start); elapsed < msgs*interval {
		t.Errorf("%d paced messages took %v, under %v", msgs, elapsed, msgs*interval)
	}
}

// A queued call whose client cancels leaves the queue and consumes
// nothing: the next call is granted the token the cancelled one waited for.
func TestQueuedCallCancelledConsumesNothing(t *testing.T) {
	const interval = 300 * time.Millisecond
	lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, interval), Burst: 1}))
	var mu sync.Mutex
	var codesSeen []codes.Code
	s := must(New(Options{Limiter: lim, Wait: 5 * time.Second, OnDecision: func(_ context.Context, d Decision) {
		mu.Lock()
		codesSeen = append(codesSeen, d.Code)
		mu.Unlock()
	}}))
	addr, svc := serve(t, s)
	conn := dial(t, addr, nil)
	if r := echo(t.Context(), conn); r.err != nil {
		t.Fatal(r.err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- echo(ctx, conn).err }()
	waitFor(t, func() bool { return lim.Stats().Waiters == 1 })
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled call: %v", err)
	}
	waitFor(t, func() bool { return lim.Stats().Waiters == 0 })
	if r := echo(t.Context(), conn); r.err != nil {
		t.Fatal(r.err)
	}
	calls := svc.handled()
	if len(calls) != 2 {
		t.Fatalf("handler ran %d times, want 2", len(calls))
	}
	// Had the cancelled call taken the second token, the third would have
	// waited for a third, two intervals after the first; scheduling delays
	// on a loaded machine stay well under the half interval allowed.
	if gap := calls[1].Sub(calls[0]); gap > interval*3/2 {
		t.Errorf("the call after the cancelled one ran %v after the first: the cancelled call consumed a token", gap)
	}
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(codesSeen) == 3
	})
	if codesSeen[1] != codes.Canceled {
		t.Errorf("decisions %v: the cancelled call's is not codes.Canceled", codesSeen)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
