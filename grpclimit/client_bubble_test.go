package grpclimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/rategate/rategate/limiter"
)

// fake is a server the client interceptor calls through a fake invoker,
// in a bubble: it answers each call with the next scripted reply (then
// with success) and records when each call was sent.
type fake struct {
	start   time.Time
	replies []fakeReply
	sent    []time.Duration
	methods []string
}

type fakeReply struct {
	err error
	hdr metadata.MD // ratelimit metadata, say
	lag time.Duration
}

func newFake(replies ...fakeReply) *fake {
	return &fake{start: time.Now(), replies: replies}
}

func (f *fake) invoke(ctx context.Context, method string, _, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
	f.sent = append(f.sent, time.Since(f.start))
	f.methods = append(f.methods, method)
	var r fakeReply
	if len(f.replies) > 0 {
		r, f.replies = f.replies[0], f.replies[1:]
	}
	time.Sleep(r.lag)
	for _, o := range opts {
		if h, ok := o.(grpc.HeaderCallOption); ok && r.hdr != nil {
			*h.HeaderAddr = r.hdr
		}
	}
	return r.err
}

// call makes a unary call to target through c and the fake.
func (f *fake) call(ctx context.Context, c *Client, target, method string, opts ...grpc.CallOption) error {
	return c.unaryTo(ctx, target, method, "req", new(string), nil, f.invoke, opts)
}

// refused is a refusal with RetryInfo d, as the server sends it.
func refused(d time.Duration) fakeReply {
	return fakeReply{err: refusal(d, limiter.ErrLimited)}
}

// withRetryDelay is a refusal of code with the RetryInfo delay rd (nil:
// none), as a server of another make might send it.
func withRetryDelay(code codes.Code, rd *durationpb.Duration) fakeReply {
	st := status.New(code, "slow down")
	if rd != nil {
		st = must(st.WithDetails(&errdetails.RetryInfo{RetryDelay: rd}))
	}
	return fakeReply{err: st.Err()}
}

func rateLimit(v string) fakeReply { return fakeReply{hdr: metadata.Pairs(MetadataRateLimit, v)} }

// After a refusal with RetryInfo the client sends nothing to that target
// until the delay has passed: a call whose deadline ends first fails at
// once, unsent; one that may wait is sent when the delay ends, not before.
func TestClientKeepsRetryInfo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := must(NewClient(ClientOptions{}))
		f := newFake(refused(250 * time.Millisecond))
		if err := f.call(t.Context(), c, "a", methodEcho); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("refusal returned as %v", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := f.call(ctx, c, "a", methodEcho); status.Code(err) != codes.DeadlineExceeded || time.Since(f.start) != 0 {
			t.Fatalf("call with a short deadline: %v after %v, want codes.DeadlineExceeded at once", err, time.Since(f.start))
		}
		if err := f.call(t.Context(), c, "b", methodEcho); err != nil {
			t.Fatal(err) // another target is not held off
		}
		if err := f.call(t.Context(), c, "a", methodEcho); err != nil {
			t.Fatal(err)
		}
		if want := []time.Duration{0, 0, 250 * time.Millisecond}; fmt.Sprint(f.sent) != fmt.Sprint(want) {
			t.Errorf("calls sent at %v, want %v", f.sent, want)
		}
		// A cancelled wait returns the context's code.
		f.replies = []fakeReply{refused(time.Second)}
		_ = f.call(t.Context(), c, "a", methodEcho)
		ctx, cancel = context.WithCancel(t.Context())
		time.AfterFunc(10*time.Millisecond, cancel)
		if err := f.call(ctx, c, "a", methodEcho); status.Code(err) != codes.Canceled {
			t.Errorf("cancelled wait: %v", err)
		}
	})
}

// A RetryInfo that is negative, malformed or absent holds nothing off; a
// huge one, also one beyond the protobuf range, holds the target off for
// MaxWait, and is not retried.
func TestClientBadRetryInfo(t *testing.T) {
	const maxWait = time.Minute
	for _, tc := range []struct {
		name  string
		reply fakeReply
		next  time.Duration // when the next call is sent
	}{
		{"absent", withRetryDelay(codes.ResourceExhausted, nil), 0},
		{"negative", withRetryDelay(codes.ResourceExhausted, durationpb.New(-time.Second)), 0},
		{"malformed", withRetryDelay(codes.ResourceExhausted, &durationpb.Duration{Seconds: 1, Nanos: -5}), 0},
		{"beyond the proto range", withRetryDelay(codes.ResourceExhausted, &durationpb.Duration{Seconds: 1 << 60}), maxWait},
		{"huge", withRetryDelay(codes.ResourceExhausted, &durationpb.Duration{Seconds: 100 * 365 * 86400}), maxWait},
		{"on another code", withRetryDelay(codes.Unavailable, durationpb.New(time.Second)), time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := must(NewClient(ClientOptions{MaxWait: maxWait, MaxRetryWait: 2 * maxWait}))
				f := newFake(tc.reply)
				if err := f.call(t.Context(), c, "a", methodEcho, Idempotent()); err == nil && tc.next > time.Second {
					t.Fatal("a huge RetryInfo was retried")
				}
				if err := f.call(t.Context(), c, "a", methodEcho); err != nil {
					t.Fatal(err)
				}
				if got := f.sent[len(f.sent)-1]; got != tc.next {
					t.Errorf("the next call was sent at %v, want %v (sent %v)", got, tc.next, f.sent)
				}
			})
		})
	}
}

// A refused idempotent call is retried when its delay ends, within the
// retries, MaxRetryWait, its deadline and the retry budget.
func TestClientRetries(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	emptyBudget := func() limiter.Limiter {
		b := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 1}))
		b.TryAcquire(1)
		return b
	}
	for _, tc := range []struct {
		name    string
		o       ClientOptions
		opts    []grpc.CallOption
		timeout time.Duration
		replies []fakeReply
		sent    []time.Duration
		ok      bool
	}{
		{"Idempotent call option", ClientOptions{}, []grpc.CallOption{Idempotent()}, 0,
			[]fakeReply{refused(ms(100)), refused(ms(200))}, []time.Duration{0, ms(100), ms(300)}, true},
		{"ClientOptions.Idempotent", ClientOptions{Idempotent: func(m string) bool { return m == methodEcho }}, nil, 0,
			[]fakeReply{refused(ms(100))}, []time.Duration{0, ms(100)}, true},
		{"Unavailable with RetryInfo", ClientOptions{}, []grpc.CallOption{Idempotent()}, 0,
			[]fakeReply{withRetryDelay(codes.Unavailable, durationpb.New(ms(100)))}, []time.Duration{0, ms(100)}, true},
		{"not idempotent", ClientOptions{}, nil, 0, []fakeReply{refused(ms(100))}, []time.Duration{0}, false},
		{"Retries", ClientOptions{Retries: 1}, []grpc.CallOption{Idempotent()}, 0,
			[]fakeReply{refused(ms(100)), refused(ms(100))}, []time.Duration{0, ms(100)}, false},
		{"no retries", ClientOptions{Retries: -1}, []grpc.CallOption{Idempotent()}, 0, []fakeReply{refused(ms(100))}, []time.Duration{0}, false},
		{"MaxRetryWait", ClientOptions{MaxRetryWait: ms(50)}, []grpc.CallOption{Idempotent()}, 0, []fakeReply{refused(ms(100))}, []time.Duration{0}, false},
		{"past the deadline", ClientOptions{}, []grpc.CallOption{Idempotent()}, ms(80), []fakeReply{refused(ms(100))}, []time.Duration{0}, false},
		{"no RetryInfo", ClientOptions{}, []grpc.CallOption{Idempotent()}, 0, []fakeReply{withRetryDelay(codes.ResourceExhausted, nil)}, []time.Duration{0}, false},
		{"other codes", ClientOptions{}, []grpc.CallOption{Idempotent()}, 0, []fakeReply{withRetryDelay(codes.Aborted, durationpb.New(ms(100)))}, []time.Duration{0}, false},
		{"empty retry budget", ClientOptions{}, []grpc.CallOption{Idempotent()}, 0, []fakeReply{refused(ms(100))}, []time.Duration{0}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := tc.o
				if tc.name == "empty retry budget" {
					o.RetryBudget = emptyBudget()
				}
				c := must(NewClient(o))
				f := newFake(tc.replies...)
				ctx := t.Context()
				if tc.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.timeout)
					defer cancel()
				}
				err := f.call(ctx, c, "a", methodEcho, tc.opts...)
				if (err == nil) != tc.ok || fmt.Sprint(f.sent) != fmt.Sprint(tc.sent) {
					t.Errorf("err %v, sent at %v; want ok=%v, sent at %v", err, f.sent, tc.ok, tc.sent)
				}
				if !tc.ok && time.Since(f.start) != f.sent[len(f.sent)-1] {
					t.Errorf("the refusal was returned %v after the last call", time.Since(f.start)-f.sent[len(f.sent)-1])
				}
			})
		})
	}
}

// The client keeps to the ratelimit metadata: after the r more calls a
// response allows, it waits for the window t; of several policies the
// one with the least left governs; policy names may be Strings or Tokens;
// malformed metadata is ignored; a huge window counts as MaxWait.
func TestClientRateLimitMetadata(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := must(NewClient(ClientOptions{}))
		f := newFake(rateLimit(`"default";r=2;t=1`), rateLimit(`"default";r=1;t=1`), rateLimit(`"default";r=0;t=1`))
		for range 4 {
			if err := f.call(t.Context(), c, "a", methodEcho); err != nil {
				t.Fatal(err)
			}
		}
		if want := []time.Duration{0, 0, 0, time.Second}; fmt.Sprint(f.sent) != fmt.Sprint(want) {
			t.Errorf("sent at %v, want %v", f.sent, want)
		}

		// Of several policies, the one with the least left governs.
		f = newFake(rateLimit(`"burst";r=5;t=1, "day";r=0;t=30`))
		for range 2 {
			_ = f.call(t.Context(), c, "b", methodEcho)
		}
		if f.sent[1] != 30*time.Second {
			t.Errorf("sent at %v, want the second after 30s", f.sent)
		}

		f = newFake(rateLimit(`token;r=0;t=5`))
		for range 2 {
			_ = f.call(t.Context(), c, "t", methodEcho)
		}
		if f.sent[1] != 5*time.Second {
			t.Errorf("a Token policy name: sent at %v, want the second after 5s", f.sent)
		}

		for _, bad := range []string{`"d";r=x;t=5`, `"d";r=-1;t=5`, `"d";t=5`, `"d"x;r=0;t=5`, `"d;r=0;t=5`, `"d";r=0;t=9223372036854775807`} {
			f = newFake(rateLimit(bad))
			for range 2 {
				_ = f.call(t.Context(), c, "c", methodEcho)
			}
			if f.sent[1] != 0 {
				t.Errorf("malformed %q held the target off: sent at %v", bad, f.sent)
			}
		}

		// A huge window (the largest integer a structured field holds)
		// counts as MaxWait.
		c = must(NewClient(ClientOptions{MaxWait: time.Minute}))
		f = newFake(rateLimit(`"d";r=0;t=999999999999999`))
		for range 2 {
			_ = f.call(t.Context(), c, "d", methodEcho)
		}
		if f.sent[1] != time.Minute {
			t.Errorf("sent at %v, want the second after MaxWait", f.sent)
		}
	})
}

// fakeStream is the grpc.ServerTransportStream of a call made to a Server's
// interceptor in memory: it keeps the metadata the server sets.
type fakeStream struct {
	method   string
	hdr, trl metadata.MD
}

func (s *fakeStream) Method() string                  { return s.method }
func (s *fakeStream) SetHeader(md metadata.MD) error  { s.hdr = metadata.Join(s.hdr, md); return nil }
func (s *fakeStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }
func (s *fakeStream) SetTrailer(md metadata.MD) error { s.trl = metadata.Join(s.trl, md); return nil }

// bridge is an invoker that calls srv's unary interceptor in memory, with
// a handler taking latency, and gives the client the metadata it sets;
// served and refused count the server's decisions.
func bridge(srv *Server, latency time.Duration, served, refused *atomic.Int64) grpc.UnaryInvoker {
	return func(ctx context.Context, method string, req, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
		st := &fakeStream{method: method}
		_, err := srv.Unary(grpc.NewContextWithServerTransportStream(ctx, st), req, &grpc.UnaryServerInfo{FullMethod: method},
			func(context.Context, any) (any, error) {
				time.Sleep(latency)
				return "resp", nil
			})
		if err != nil {
			refused.Add(1)
		} else {
			served.Add(1)
		}
		for _, o := range opts {
			switch o := o.(type) {
			case grpc.HeaderCallOption:
				*o.HeaderAddr = st.hdr
			case grpc.TrailerCallOption:
				*o.TrailerAddr = st.trl
			}
		}
		return err
	}
}

// The client paces its calls by the server's policy, as httplimit's
// Transport does, so that a limit finer than the metadata's whole seconds
// is followed call by call: against a server allowing 10 calls a second
// with a burst of 1 (ratelimit-policy q=10;w=1, and r=0;t=1 after each
// call) or 5, 4 goroutines calling for 10 s are served at least 90 calls
// (each call goes 100 ms after the last response, which comes 5 ms after
// its call: 95 a second), never more than the bucket allows, and are
// refused only in their first round, before any response.
func TestClientPacesByPolicy(t *testing.T) {
	for _, burst := range []int{1, 5} {
		t.Run(fmt.Sprintf("burst %d", burst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: burst}))
				var served, refused atomic.Int64
				invoke := bridge(must(New(Options{Limiter: lim})), 5*time.Millisecond, &served, &refused)
				c := must(NewClient(ClientOptions{}))
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						for ctx.Err() == nil {
							err := c.unaryTo(ctx, "a", methodEcho, "req", new(string), nil, invoke, nil)
							if status.Code(err) == codes.DeadlineExceeded {
								return // a wait past the deadline fails at once
							}
						}
					})
				}
				wg.Wait()
				t.Logf("burst %d: %d served in 10 s, %d refused", burst, served.Load(), refused.Load())
				if most := int64(10*10 + burst); served.Load() < 90 || served.Load() > most || refused.Load() > int64(max(0, 4-burst)) {
					t.Errorf("%d served, %d refused; want 90 to %d, and refusals only in the first round", served.Load(), refused.Load(), most)
				}
			})
		})
	}
}

// The client takes a permit from its limiters (one for every call, one
// per method, one per target) before each call; one that cannot be had
// fails the call with a status, unsent.
func TestClientOwnLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pacer := func() limiter.Limiter {
			return must(limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(10, time.Second)}))
		}
		echoPacer, targetPacer := pacer(), pacer()
		c := must(NewClient(ClientOptions{
			PerMethod: func(m string) limiter.Limiter {
				if m == methodEcho {
					return echoPacer
				}
				return nil
			},
			PerTarget: func(target string) limiter.Limiter {
				if target == "slow" {
					return targetPacer
				}
				return nil
			},
		}))
		f := newFake()
		for _, m := range []string{methodEcho, methodCount, methodEcho, methodCount, methodEcho} {
			if err := f.call(t.Context(), c, "fast", m); err != nil {
				t.Fatal(err)
			}
		}
		if want := "[0s 0s 100ms 100ms 200ms]"; fmt.Sprint(f.sent) != want {
			t.Errorf("per method: sent at %v, want %s", f.sent, want)
		}
		f = newFake()
		for _, target := range []string{"slow", "fast", "slow"} {
			if err := f.call(t.Context(), c, target, methodCount); err != nil {
				t.Fatal(err)
			}
		}
		if want := "[0s 0s 100ms]"; fmt.Sprint(f.sent) != want {
			t.Errorf("per target: sent at %v, want %s", f.sent, want)
		}

		// A permit the deadline does not leave time for: at once, unsent.
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		f = newFake()
		err := f.call(ctx, c, "slow", methodCount)
		if status.Code(err) != codes.DeadlineExceeded || len(f.sent) != 0 || time.Since(f.start) != 0 {
			t.Errorf("short deadline: %v, sent %v", err, f.sent)
		}
		closed := pacer()
		_ = closed.(*limiter.LeakyBucket).Close()
		c = must(NewClient(ClientOptions{Limiter: closed}))
		if err := f.call(t.Context(), c, "a", methodEcho); status.Code(err) != codes.Unavailable || len(f.sent) != 0 {
			t.Errorf("closed limiter: %v, sent %v", err, f.sent)
		}
		c = must(NewClient(ClientOptions{Limiter: storeDown{}}))
		if err := f.call(t.Context(), c, "a", methodEcho); status.Code(err) != codes.Unavailable {
			t.Errorf("store down: %v", err)
		}
	})
}

// The leases of a call are told its outcome and latency: a server's
// RESOURCE_EXHAUSTED is Throttled, so that an adaptive limiter backs off.
func TestClientReportsOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		c := must(NewClient(ClientOptions{Limiter: rec, PerTarget: func(string) limiter.Limiter { return rec }}))
		f := newFake(
			fakeReply{lag: 30 * time.Millisecond},
			fakeReply{err: refusal(time.Millisecond, limiter.ErrLimited), lag: 20 * time.Millisecond},
			fakeReply{err: status.Error(codes.NotFound, "no")},
		)
		for range 3 {
			_ = f.call(t.Context(), c, "a", methodEcho)
		}
		got, released := rec.seen()
		want := []limiter.Outcome{limiter.Succeeded, limiter.Succeeded, limiter.Throttled, limiter.Throttled, limiter.Failed, limiter.Failed}
		if fmt.Sprint(got) != fmt.Sprint(want) || released != 6 {
			t.Errorf("outcomes %v, %d released; want %v, each released", got, released, want)
		}
		if rec.latency[0] != 30*time.Millisecond || rec.latency[2] != 20*time.Millisecond {
			t.Errorf("latencies %v", rec.latency)
		}
	})
}
