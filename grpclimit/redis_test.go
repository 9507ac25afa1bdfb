package grpclimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/redislimit"
)

// Two servers, as two processes would, share one per-tenant limit in a
// real Redis: a tenant gets its quota across both, refusals carry
// RetryInfo; once Redis is gone, FailClosed fails calls with
// codes.Unavailable, which this package tells from a refusal without
// importing redislimit.
func TestRedisLimiter(t *testing.T) {
	rs, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	t.Logf("redis: %s", rs.Kind())
	client := rs.Client()
	defer client.Close()

	var conns []*grpc.ClientConn
	for range 2 {
		keyed, err := redislimit.NewKeyedSlidingLog(redislimit.Options{Client: client, Key: "grpclimit-test", Timeout: 200 * time.Millisecond},
			limiter.SlidingLogOptions{Limit: 3, Window: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		defer keyed.Close()
		addr, _ := serve(t, must(New(Options{PerKey: keyed.For, Key: MetadataKey("tenant")})))
		conns = append(conns, dial(t, addr, nil))
	}
	for _, tenant := range []string{"a", "b"} {
		served := 0
		for i := range 6 {
			r := echo(withTenant(t.Context(), tenant), conns[i%2])
			if r.err == nil {
				served++
				continue
			}
			mustRetryInfo(t, r.err)
		}
		if served != 3 {
			t.Errorf("tenant %s: %d calls served across both servers, want 3", tenant, served)
		}
	}

	rs.Kill()
	r := echo(withTenant(t.Context(), "c"), conns[0])
	if status.Code(r.err) != codes.Unavailable {
		t.Fatalf("with Redis gone: %v, want codes.Unavailable", r.err)
	}
	if _, ok := serverRetryInfo(r.err); ok {
		t.Errorf("%v carries RetryInfo", r.err)
	}
	// The error the limiter gave is redislimit's, as Options.Code sees it.
	var seen error
	s := must(New(Options{Limiter: must(redislimit.NewSlidingLog(redislimit.Options{Client: client, Key: "k", Timeout: 100 * time.Millisecond},
		limiter.SlidingLogOptions{Limit: 1, Window: time.Second})), Code: func(err error) codes.Code {
		seen = err
		return codes.OK
	}}))
	u := &unary{s: s}
	if err := u.call(metadata.NewIncomingContext(context.Background(), nil)); status.Code(err) != codes.Unavailable || !errors.Is(seen, redislimit.ErrUnavailable) {
		t.Errorf("call %v, Code saw %v; want codes.Unavailable and redislimit.ErrUnavailable", err, seen)
	}
}
