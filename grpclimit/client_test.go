package grpclimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rategate/rategate/limiter"
)

// decisions records the server's decisions and when it made them.
type decisions struct {
	mu sync.Mutex
	at []time.Time
	d  []Decision
}

func (ds *decisions) record(_ context.Context, d Decision) {
	ds.mu.Lock()
	ds.at = append(ds.at, time.Now())
	ds.d = append(ds.d, d)
	ds.mu.Unlock()
}

func (ds *decisions) get() ([]time.Time, []Decision) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return append([]time.Time(nil), ds.at...), append([]Decision(nil), ds.d...)
}

// Over a real connection: after a refusal the client sends nothing inside
// its RetryInfo window, and the call it holds back reaches the server no
// earlier than the window's end.
func TestClientSendsNothingInsideRetryInfoWindow(t *testing.T) {
	lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, 300*time.Millisecond), Burst: 1}))
	ds := &decisions{}
	// NoMetadata: the server's ratelimit field (r=0;t=1 after each call)
	// would hold the client off longer than RetryInfo.
	addr, _ := serve(t, must(New(Options{Limiter: lim, NoMetadata: true, OnDecision: ds.record})))
	conn := dial(t, addr, must(NewClient(ClientOptions{})))
	if r := echo(t.Context(), conn); r.err != nil {
		t.Fatal(r.err)
	}
	d := mustRetryInfo(t, echo(t.Context(), conn).err)
	ctx, cancel := context.WithTimeout(t.Context(), d/4)
	defer cancel()
	if r := echo(ctx, conn); status.Code(r.err) != codes.DeadlineExceeded {
		t.Fatalf("a call inside the window with a short deadline: %v", r.err)
	}
	if r := echo(t.Context(), conn); r.err != nil {
		t.Fatalf("the call held back until the window's end: %v", r.err)
	}
	at, dec := ds.get()
	if len(dec) != 3 || dec[1].Code != codes.ResourceExhausted || dec[2].Code != codes.OK {
		t.Fatalf("the server decided %+v, want served, refused, served", dec)
	}
	if gap := at[2].Sub(at[1]); gap < d {
		t.Errorf("the held-back call reached the server %v after the refusal, inside its %v window", gap, d)
	}
}

// A refused idempotent call is retried once its delay has passed and
// served, over a real connection.
func TestClientRetriesOverTCP(t *testing.T) {
	lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, 200*time.Millisecond), Burst: 1}))
	ds := &decisions{}
	// NoMetadata: the client would otherwise keep to the server's pace,
	// and not be refused.
	addr, _ := serve(t, must(New(Options{Limiter: lim, NoMetadata: true, OnDecision: ds.record})))
	conn := dial(t, addr, must(NewClient(ClientOptions{})))
	if r := echo(t.Context(), conn); r.err != nil {
		t.Fatal(r.err)
	}
	if r := echo(t.Context(), conn, Idempotent()); r.err != nil {
		t.Fatalf("retried call: %v", r.err)
	}
	at, dec := ds.get()
	if len(dec) != 3 || dec[1].Code != codes.ResourceExhausted || dec[2].Code != codes.OK {
		t.Fatalf("the server decided %+v, want served, refused, served", dec)
	}
	if gap := at[2].Sub(at[1]); gap < dec[1].RetryAfter {
		t.Errorf("retried %v after the refusal, before its RetryInfo %v", gap, dec[1].RetryAfter)
	}
}

// The client reads the ratelimit metadata and waits for the window rather
// than be refused: a server allowing 3 calls a second refuses none of 5
// calls made back to back.
func TestClientKeepsToRateLimitMetadata(t *testing.T) {
	lim := must(limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 3, Window: time.Second}))
	ds := &decisions{}
	addr, _ := serve(t, must(New(Options{Limiter: lim, OnDecision: ds.record})))
	conn := dial(t, addr, must(NewClient(ClientOptions{})))
	for i := range 5 {
		if r := echo(t.Context(), conn); r.err != nil {
			t.Fatalf("call %d: %v", i, r.err)
		}
	}
	if _, dec := ds.get(); len(dec) != 5 {
		t.Errorf("the server decided %d calls, want 5, all served", len(dec))
	}
}

// A stream holds the client's permits until it ends (read to its end, its
// one response received, or its context ended); a stream refused at open
// teaches the client the server's RetryInfo.
func TestClientStreams(t *testing.T) {
	own := must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1}))
	c := must(NewClient(ClientOptions{Limiter: own}))
	addr, _ := serve(t, nil)
	conn := dial(t, addr, c)
	for i := range 2 {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		if n, err := openChat(ctx, conn, 2); err != nil || n != 2 {
			t.Fatalf("chat %d: %d echoes, %v", i, n, err)
		}
		cancel()
	}
	waitFor(t, func() bool { return own.Stats().Available == 1 })

	cs := must(conn.NewStream(t.Context(), countDesc, methodCount))
	_ = cs.CloseSend()
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	if own.Stats().Available != 1 {
		t.Error("a client stream's permit is held after its response")
	}

	ctx, cancel := context.WithCancel(t.Context())
	_ = must(conn.NewStream(ctx, chatDesc, methodChat))
	if own.Stats().Available != 0 {
		t.Fatal("an open stream holds no permit")
	}
	cancel()
	waitFor(t, func() bool { return own.Stats().Available == 1 })

	// Refused at open: the next stream waits out the RetryInfo.
	lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, 200*time.Millisecond), Burst: 1}))
	ds := &decisions{}
	addr, _ = serve(t, must(New(Options{Limiter: lim, NoMetadata: true, OnDecision: ds.record})))
	conn = dial(t, addr, must(NewClient(ClientOptions{})))
	if _, err := openChat(t.Context(), conn, 1); err != nil {
		t.Fatal(err)
	}
	_, err := openChat(t.Context(), conn, 1)
	mustRetryInfo(t, err)
	if _, err := openChat(t.Context(), conn, 1); err != nil {
		t.Fatalf("the stream after the refusal: %v", err)
	}
	at, dec := ds.get()
	if len(dec) != 3 || at[2].Sub(at[1]) < dec[1].RetryAfter {
		t.Errorf("decisions %+v at %v: the third stream opened inside the RetryInfo window", dec, at)
	}
}

// A stream the streamer cannot open gives its permits back.
func TestClientStreamOpenFails(t *testing.T) {
	own := must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1}))
	c := must(NewClient(ClientOptions{Limiter: own}))
	broken := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
		return nil, status.Error(codes.Unavailable, "no connection")
	}
	for range 2 {
		_, err := c.streamTo(t.Context(), "a", chatDesc, nil, methodChat, broken, nil)
		if status.Code(err) != codes.Unavailable {
			t.Fatal(err)
		}
	}
	if own.Stats().Available != 1 {
		t.Error("a stream that did not open holds its permit")
	}
}
