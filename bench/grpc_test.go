package bench

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/rategate/rategate/grpclimit"
	"github.com/rategate/rategate/limiter"
)

// The gRPC benchmarks put each rate-limiting interceptor around the same
// empty unary handler:
//
//   - rategate: grpclimit with one limiter.TokenBucket (Options.Limiter),
//     sending the ratelimit metadata (the default);
//   - rategate-nometadata: the same with Options.NoMetadata;
//   - rategate-keyed: grpclimit with a limiter.KeyedTokenBucket keyed by
//     the peer's address (PeerAddr, the default key);
//   - go-grpc-middleware: go-grpc-middleware/v2's ratelimit interceptor
//     around an x/time/rate.Limiter (its Limiter interface has no
//     algorithm of its own: x/time/rate is what its examples use);
//   - bare: no interceptor, the floor.
//
// GRPC/server/* calls the unary server interceptor in memory, with a
// context that holds a peer and a transport stream (whose SetHeader keeps
// the metadata, as grpc-go's does), so it measures the interceptor alone.
// GRPC/client/* does the same for the client interceptors, around an
// invoker that returns at once. GRPCLoopback makes real calls over
// loopback TCP with grpc-go at both ends: bare is then what grpc-go itself
// costs per call, and the others add to it; client-rategate puts
// grpclimit's client interceptor (one token bucket) on the client, with a
// bare server.
//
// Each reports cpu-ns/op besides the wall-clock ns/op (see BenchmarkHTTP).

// xrate is go-grpc-middleware's ratelimit.Limiter over x/time/rate, as its
// examples write it.
type xrate struct{ l *rate.Limiter }

func (x xrate) Limit(context.Context) error {
	if !x.l.Allow() {
		return errors.New("rate limit exceeded")
	}
	return nil
}

// grpcLimits are the rates of the allowed and refused modes: allowed never
// refuses within a benchmark, refused refuses every call after the first.
func grpcLimits(refuse bool) (limiter.Rate, int, rate.Limit) {
	if refuse {
		return limiter.Per(1, time.Hour), 1, rate.Every(time.Hour)
	}
	return limiter.Per(1<<30, time.Millisecond), 1 << 30, rate.Inf
}

type grpcServerCase struct {
	name string
	make func(b *testing.B, refuse bool) grpc.UnaryServerInterceptor
}

func grpcServerCases() []grpcServerCase {
	newBucket := func(b *testing.B, refuse bool) *limiter.TokenBucket {
		r, burst, _ := grpcLimits(refuse)
		lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: r, Burst: burst})
		if err != nil {
			b.Fatal(err)
		}
		return lim
	}
	rategate := func(b *testing.B, o grpclimit.Options) grpc.UnaryServerInterceptor {
		s, err := grpclimit.New(o)
		if err != nil {
			b.Fatal(err)
		}
		return s.Unary
	}
	return []grpcServerCase{
		{"bare", nil},
		{"rategate", func(b *testing.B, refuse bool) grpc.UnaryServerInterceptor {
			return rategate(b, grpclimit.Options{Limiter: newBucket(b, refuse)})
		}},
		{"rategate-nometadata", func(b *testing.B, refuse bool) grpc.UnaryServerInterceptor {
			return rategate(b, grpclimit.Options{Limiter: newBucket(b, refuse), NoMetadata: true})
		}},
		{"rategate-keyed", func(b *testing.B, refuse bool) grpc.UnaryServerInterceptor {
			r, burst, _ := grpcLimits(refuse)
			keyed, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: r, Burst: burst})
			if err != nil {
				b.Fatal(err)
			}
			return rategate(b, grpclimit.Options{PerKey: keyed.For})
		}},
		{"go-grpc-middleware", func(_ *testing.B, refuse bool) grpc.UnaryServerInterceptor {
			_, burst, limit := grpcLimits(refuse)
			return ratelimit.UnaryServerInterceptor(xrate{rate.NewLimiter(limit, burst)})
		}},
	}
}

// transportStream is a grpc.ServerTransportStream that keeps the metadata
// set on it, as grpc-go's does until it sends it.
type transportStream struct{ hdr, trl metadata.MD }

func (*transportStream) Method() string { return "/bench.Nop/Call" }

func (s *transportStream) SetHeader(md metadata.MD) error  { s.hdr = md; return nil }
func (s *transportStream) SendHeader(md metadata.MD) error { s.hdr = md; return nil }
func (s *transportStream) SetTrailer(md metadata.MD) error { s.trl = md; return nil }

func nopUnary(_ context.Context, req any) (any, error) { return req, nil }

func BenchmarkGRPC(b *testing.B) {
	addr := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}
	info := &grpc.UnaryServerInfo{FullMethod: "/bench.Nop/Call"}
	req := &emptypb.Empty{}
	for _, mode := range []struct {
		name   string
		refuse bool
	}{{"allowed", false}, {"refused", true}} {
		for _, c := range grpcServerCases() {
			if c.make == nil && mode.refuse {
				continue
			}
			b.Run("server/"+mode.name+"/"+c.name, func(b *testing.B) {
				intercept := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
					return h(ctx, req)
				}
				if c.make != nil {
					intercept = c.make(b, mode.refuse)
				}
				ts := &transportStream{}
				ctx := grpc.NewContextWithServerTransportStream(peer.NewContext(context.Background(), &peer.Peer{Addr: addr}), ts)
				_, _ = intercept(ctx, req, info, nopUnary) // the first call of a refusing limit is allowed
				var err error
				cpu := pipeCPU()
				for b.Loop() {
					_, err = intercept(ctx, req, info, nopUnary)
				}
				reportCPU(b, cpu)
				if want := map[bool]codes.Code{false: codes.OK, true: codes.ResourceExhausted}[mode.refuse]; status.Code(err) != want {
					b.Fatalf("code %v, want %v", status.Code(err), want)
				}
			})
		}
	}
	grpcClientBench(b)
}

// rategateClient is grpclimit's client interceptor with one token bucket
// that never refuses within a benchmark.
func rategateClient(b *testing.B) grpc.UnaryClientInterceptor {
	r, burst, _ := grpcLimits(false)
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: r, Burst: burst})
	if err != nil {
		b.Fatal(err)
	}
	cl, err := grpclimit.NewClient(grpclimit.ClientOptions{Limiter: lim})
	if err != nil {
		b.Fatal(err)
	}
	return cl.Unary
}

func grpcClientBench(b *testing.B) {
	conn, err := grpc.NewClient("passthrough:///bench", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	for _, c := range []struct {
		name string
		make func(b *testing.B) grpc.UnaryClientInterceptor
	}{
		{"bare", nil},
		{"rategate", rategateClient},
		{"go-grpc-middleware", func(*testing.B) grpc.UnaryClientInterceptor {
			_, burst, limit := grpcLimits(false)
			return ratelimit.UnaryClientInterceptor(xrate{rate.NewLimiter(limit, burst)})
		}},
	} {
		b.Run("client/allowed/"+c.name, func(b *testing.B) {
			intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				return inv(ctx, method, req, reply, cc, opts...)
			}
			if c.make != nil {
				intercept = c.make(b)
			}
			ctx := context.Background()
			req, reply := &emptypb.Empty{}, &emptypb.Empty{}
			cpu := pipeCPU()
			for b.Loop() {
				if err := intercept(ctx, "/bench.Nop/Call", req, reply, conn, invoker); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// The Nop service, described by hand: one unary method taking and
// returning google.protobuf.Empty.
var nopDesc = grpc.ServiceDesc{
	ServiceName: "bench.Nop",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(emptypb.Empty)
		if err := dec(in); err != nil {
			return nil, err
		}
		if icpt == nil {
			return nopUnary(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/bench.Nop/Call"}, nopUnary)
	}}},
}

func BenchmarkGRPCLoopback(b *testing.B) {
	cases := grpcServerCases()
	cases = append(cases, grpcServerCase{"client-rategate", nil})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var sopts []grpc.ServerOption
			if c.make != nil {
				sopts = append(sopts, grpc.ChainUnaryInterceptor(c.make(b, false)))
			}
			srv := grpc.NewServer(sopts...)
			srv.RegisterService(&nopDesc, struct{}{})
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = srv.Serve(lis)
			}()
			defer func() { srv.Stop(); <-done }()
			copts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
			if c.name == "client-rategate" {
				copts = append(copts, grpc.WithChainUnaryInterceptor(rategateClient(b)))
			}
			conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), copts...)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			ctx := context.Background()
			req, reply := &emptypb.Empty{}, &emptypb.Empty{}
			if err := conn.Invoke(ctx, "/bench.Nop/Call", req, reply); err != nil {
				b.Fatal(err) // connect before measuring
			}
			cpu := pipeCPU()
			for b.Loop() {
				if err := conn.Invoke(ctx, "/bench.Nop/Call", req, reply); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}
