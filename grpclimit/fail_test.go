package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rategate/rategate/limiter"
)

// errStoreDown stands for a shared store's "cannot decide" error, such as
// redislimit.ErrUnavailable.
var errStoreDown = errors.New("store: unavailable")

// storeDown is a limiter whose store cannot be reached: it refuses every
// request with an error wrapping errStoreDown, as redislimit does under
// FailClosed.
type storeDown struct{}

func (storeDown) TryAcquire(int) limiter.Lease {
	return limiter.Denied(fmt.Errorf("%w: dial tcp 127.0.0.1:6379: connection refused", errStoreDown), 0)
}

func (s storeDown) Acquire(_ context.Context, n int) (limiter.Lease, error) {
	l := s.TryAcquire(n)
	return l, l.Err()
}

// A limiter that cannot decide fails the call with codes.Unavailable, with
// no RetryInfo; Options.Code chooses another code.
func TestLimiterCannotDecide(t *testing.T) {
	closed := must(limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 1}))
	_ = closed.Close()
	for _, tc := range []struct {
		name string
		o    Options
		want codes.Code
	}{
		{"store down", Options{Limiter: storeDown{}}, codes.Unavailable},
		{"store down, queued", Options{Limiter: storeDown{}, Wait: time.Second}, codes.Unavailable},
		{"closed", Options{Limiter: closed}, codes.Unavailable},
		{"Code chooses", Options{Limiter: storeDown{}, Code: func(err error) codes.Code {
			if errors.Is(err, errStoreDown) {
				return codes.Internal
			}
			return codes.OK
		}}, codes.Internal},
		{"Code keeps the default", Options{Limiter: storeDown{}, Code: func(error) codes.Code { return codes.OK }}, codes.Unavailable},
		{"an error with its own status", Options{Limiter: statusLimiter{codes.PermissionDenied}}, codes.PermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, svc := serve(t, must(New(tc.o)))
			r := echo(t.Context(), dial(t, addr, nil))
			if got := status.Code(r.err); got != tc.want {
				t.Fatalf("code = %v (%v), want %v", got, r.err, tc.want)
			}
			if _, ok := serverRetryInfo(r.err); ok {
				t.Errorf("%v carries RetryInfo", r.err)
			}
			if n := len(svc.handled()); n != 0 {
				t.Errorf("handler ran %d times", n)
			}
		})
	}
}

// statusLimiter refuses with an error carrying a gRPC status.
type statusLimiter struct{ code codes.Code }

func (s statusLimiter) TryAcquire(int) limiter.Lease {
	return limiter.Denied(fmt.Errorf("quota service: %w", status.Error(s.code, "no")), 0)
}

func (s statusLimiter) Acquire(context.Context, int) (limiter.Lease, error) {
	l := s.TryAcquire(1)
	return l, l.Err()
}

// A call whose key cannot be found is refused with KeyErrorCode
// (codes.InvalidArgument by default), or with the code of a KeyFunc's
// status error; no limiter is asked.
func TestKeyErrors(t *testing.T) {
	lim := must(limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
		return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 100, Window: time.Minute})
	}}))
	denied := func(context.Context, string) (string, error) {
		return "", status.Error(codes.PermissionDenied, "unknown API key")
	}
	for _, tc := range []struct {
		name string
		o    Options
		md   []string
		want codes.Code
	}{
		{"no metadata", Options{Key: MetadataKey("api-key")}, nil, codes.InvalidArgument},
		{"two values", Options{Key: MetadataKey("API-Key")}, []string{"api-key", "a", "api-key", "b"}, codes.InvalidArgument},
		{"empty value", Options{Key: MetadataKey("api-key")}, []string{"api-key", ""}, codes.InvalidArgument},
		{"KeyErrorCode", Options{Key: MetadataKey("api-key"), KeyErrorCode: codes.Unauthenticated}, nil, codes.Unauthenticated},
		{"status from the KeyFunc", Options{Key: denied, KeyErrorCode: codes.Unauthenticated}, nil, codes.PermissionDenied},
		{"first error of Keys", Options{Key: Keys(Method, MetadataKey("tenant"), denied)}, nil, codes.InvalidArgument},
		{"served", Options{Key: Keys(Method, MetadataKey("api-key"))}, []string{"api-key", "k1"}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Decision
			var mu sync.Mutex
			o := tc.o
			o.PerKey = lim.For
			o.OnDecision = func(_ context.Context, d Decision) {
				mu.Lock()
				got = append(got, d)
				mu.Unlock()
			}
			addr, _ := serve(t, must(New(o)))
			ctx := metadata.AppendToOutgoingContext(t.Context(), tc.md...)
			r := echo(ctx, dial(t, addr, nil))
			if status.Code(r.err) != tc.want {
				t.Fatalf("code = %v (%v), want %v", status.Code(r.err), r.err, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0].Code != tc.want {
				t.Fatalf("decisions %+v", got)
			}
			if tc.want == codes.InvalidArgument && !errors.Is(got[0].Err, ErrNoKey) {
				t.Errorf("decision's Err %v does not wrap ErrNoKey", got[0].Err)
			}
			if tc.want == codes.OK && got[0].Key != methodEcho+"\x00k1" {
				t.Errorf("key = %q", got[0].Key)
			}
		})
	}
	if lim.Len() != 1 {
		t.Errorf("%d keys made, want 1 (refused calls ask no limiter)", lim.Len())
	}
}

// A nil limiter, or a nil limiter for a key, limits nothing, as everywhere
// in rategate; a cost of 0 is never refused; a negative cost is a bug.
func TestNoLimitAndCosts(t *testing.T) {
	addr, svc := serve(t, must(New(Options{})))
	conn := dial(t, addr, nil)
	for range 20 {
		r := echo(t.Context(), conn)
		if r.err != nil || len(r.hdr.Get(MetadataRateLimit)) != 0 {
			t.Fatalf("no limiter: %v, header %v", r.err, r.hdr)
		}
	}
	if n, err := openChat(t.Context(), conn, 3); err != nil || n != 3 {
		t.Fatalf("no limiter, stream: %d echoes, %v", n, err)
	}
	if len(svc.handled()) != 21 {
		t.Fatalf("handler ran %d times", len(svc.handled()))
	}

	one := must(limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 1, Window: time.Minute}))
	perKey := func(key string) limiter.Limiter {
		if key == "free" {
			return nil
		}
		return one
	}
	addr, _ = serve(t, must(New(Options{PerKey: perKey, Key: MetadataKey("plan")})))
	conn = dial(t, addr, nil)
	for range 3 {
		if r := echo(metadata.AppendToOutgoingContext(t.Context(), "plan", "free"), conn); r.err != nil {
			t.Fatalf("a key with a nil limiter: %v", r.err)
		}
	}
	paid := metadata.AppendToOutgoingContext(t.Context(), "plan", "paid")
	if r := echo(paid, conn); r.err != nil {
		t.Fatal(r.err)
	}
	mustRetryInfo(t, echo(paid, conn).err)

	// one is spent: a call of cost 0 still passes, a negative cost fails.
	cost := func(_ context.Context, _ string, msg any) int {
		if msg == nil {
			return 0 // stream openings
		}
		if m, ok := msg.(*wrapperspb.StringValue); ok && m.GetValue() == "0" {
			return -1 // openChat's first message
		}
		return 0
	}
	addr, _ = serve(t, must(New(Options{Limiter: one, Cost: cost, PerMessage: true})))
	conn = dial(t, addr, nil)
	if r := echo(t.Context(), conn); r.err != nil {
		t.Fatalf("cost 0: %v", r.err)
	}
	if _, err := openChat(t.Context(), conn, 1); status.Code(err) != codes.Internal {
		t.Fatalf("negative cost of a message: %v, want codes.Internal", err)
	}
	negative := func(context.Context, string, any) int { return -1 }
	addr, _ = serve(t, must(New(Options{Limiter: one, Cost: negative})))
	if r := echo(t.Context(), dial(t, addr, nil)); status.Code(r.err) != codes.Internal {
		t.Fatalf("negative cost: %v, want codes.Internal", r.err)
	}
}

func TestOptionErrors(t *testing.T) {
	lim := must(limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1}))
	for _, tc := range []struct {
		field string
		err   error
	}{
		{"Limiter", second(New(Options{Limiter: lim, PerKey: func(string) limiter.Limiter { return lim }}))},
		{"Wait", second(New(Options{Wait: -time.Second}))},
		{"KeyErrorCode", second(New(Options{KeyErrorCode: 17}))},
		{"Policy", second(New(Options{Policy: "per\nsecond"}))},
		{"Header", second(PeerKey(PeerOptions{Header: "x-real-ip"}))},
		{"IPv6Prefix", second(PeerKey(PeerOptions{IPv6Prefix: 129}))},
		{"IPv6Prefix", second(PeerKey(PeerOptions{IPv6Prefix: -1}))},
		{"MaxRetryWait", second(NewClient(ClientOptions{MaxRetryWait: -1}))},
		{"MaxWait", second(NewClient(ClientOptions{MaxWait: -1}))},
	} {
		var oe *limiter.OptionError
		if !errors.As(tc.err, &oe) || oe.Field != tc.field {
			t.Errorf("%s: err = %v, want an OptionError naming it", tc.field, tc.err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// recorder is a limiter whose leases record the outcomes reported to them.
type recorder struct {
	mu       sync.Mutex
	outcomes []limiter.Outcome
	latency  []time.Duration
	released int
}

func (r *recorder) TryAcquire(n int) limiter.Lease { return limiter.NewLease(n, r) }

func (r *recorder) Acquire(_ context.Context, n int) (limiter.Lease, error) {
	return limiter.NewLease(n, r), nil
}

func (r *recorder) ReleasePermits(int) {
	r.mu.Lock()
	r.released++
	r.mu.Unlock()
}

func (r *recorder) ReportOutcome(_ int, o limiter.Outcome, latency time.Duration) {
	r.mu.Lock()
	r.outcomes = append(r.outcomes, o)
	r.latency = append(r.latency, latency)
	r.mu.Unlock()
}

func (r *recorder) seen() ([]limiter.Outcome, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]limiter.Outcome(nil), r.outcomes...), r.released
}

// The server reports each call's outcome to its lease: a handler's
// RESOURCE_EXHAUSTED is Throttled, so that an adaptive limiter learns that
// the work behind it is overloaded.
func TestServerReportsOutcomes(t *testing.T) {
	rec := &recorder{}
	addr, svc := serve(t, must(New(Options{Limiter: rec})))
	conn := dial(t, addr, nil)
	for _, fail := range []error{nil, status.Error(codes.ResourceExhausted, "db overloaded"), status.Error(codes.NotFound, "no such row")} {
		svc.mu.Lock()
		svc.fail = fail
		svc.mu.Unlock()
		_ = echo(t.Context(), conn)
	}
	if _, err := openChat(t.Context(), conn, 2); err != nil {
		t.Fatal(err)
	}
	got, released := rec.seen()
	want := []limiter.Outcome{limiter.Succeeded, limiter.Throttled, limiter.Failed, limiter.Succeeded}
	if fmt.Sprint(got) != fmt.Sprint(want) || released != len(want) {
		t.Errorf("outcomes %v, %d released; want %v, each released", got, released, want)
	}
}

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want limiter.Outcome
	}{
		{nil, limiter.Succeeded},
		{status.Error(codes.ResourceExhausted, ""), limiter.Throttled},
		{fmt.Errorf("call: %w", limiter.ErrThrottled), limiter.Throttled},
		{status.Error(codes.Canceled, ""), limiter.Unknown},
		{context.Canceled, limiter.Unknown},
		{status.Error(codes.Internal, ""), limiter.Failed},
		{status.Error(codes.DeadlineExceeded, ""), limiter.Failed},
	} {
		if got := OutcomeOf(tc.err); got != tc.want {
			t.Errorf("OutcomeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
