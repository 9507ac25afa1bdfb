package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rategate/rategate/grpclimit"
	"github.com/rategate/rategate/limiter"
)

// A server that gives each tenant (named by the "tenant" metadata) two
// calls a minute, and a client whose third call is refused with the time
// to come back.
func Example() {
	keyed, _ := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
		return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 2, Window: time.Minute})
	}})
	lim, err := grpclimit.New(grpclimit.Options{PerKey: keyed.For, Key: grpclimit.MetadataKey("tenant")})
	if err != nil {
		panic(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(lim.Unary), grpc.ChainStreamInterceptor(lim.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, _ := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "tenant", "acme")
	for range 3 {
		var hdr metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr))
		if err != nil {
			st := status.Convert(err)
			for _, d := range st.Details() {
				if ri, ok := d.(*errdetails.RetryInfo); ok {
					fmt.Println(st.Code(), "retry in", ri.GetRetryDelay().AsDuration().Round(time.Minute))
				}
			}
			continue
		}
		fmt.Println("served:", hdr.Get(grpclimit.MetadataPolicy)[0], hdr.Get(grpclimit.MetadataRateLimit)[0])
	}
	// Output:
	// served: "default";q=2;w=60 "default";r=1;t=60
	// served: "default";q=2;w=60 "default";r=0;t=60
	// ResourceExhausted retry in 1m0s
}

// A client that keeps to a server's limit of 10 calls a second with a
// burst of 1: it reads the server's policy (q=10;w=1) and spreads its
// calls 100 ms apart, so every call is served; a call the server refused
// (a Check call, which is idempotent) would be sent again once the
// RetryInfo delay had passed.
func ExampleNewClient() {
	bucket, _ := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 1})
	lim, _ := grpclimit.New(grpclimit.Options{Limiter: bucket})
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(lim.Unary))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	c, err := grpclimit.NewClient(grpclimit.ClientOptions{
		Idempotent: func(method string) bool { return method == healthpb.Health_Check_FullMethodName },
	})
	if err != nil {
		panic(err)
	}
	conn, _ := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(c.Unary),
		grpc.WithChainStreamInterceptor(c.Stream),
	)
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	start := time.Now()
	for range 3 {
		resp, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
		fmt.Println(resp.GetStatus(), status.Code(err))
	}
	fmt.Println("three calls took at least two intervals:", time.Since(start) >= 200*time.Millisecond)
	// Output:
	// SERVING OK
	// SERVING OK
	// SERVING OK
	// three calls took at least two intervals: true
}
