package grpclimit

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The test service, written without protoc: a unary Echo, a bidirectional
// Chat that echoes each message, and a client stream Count that answers
// with the number of messages it received. Messages are
// wrapperspb.StringValue, so the default proto codec carries them.
const (
	methodEcho  = "/rategate.test.Echo/Echo"
	methodChat  = "/rategate.test.Echo/Chat"
	methodCount = "/rategate.test.Echo/Count"
)

var echoDesc = grpc.ServiceDesc{
	ServiceName: "rategate.test.Echo",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Echo", Handler: echoHandler}},
	Streams: []grpc.StreamDesc{
		{StreamName: "Chat", Handler: chatHandler, ServerStreams: true, ClientStreams: true},
		{StreamName: "Count", Handler: countHandler, ClientStreams: true},
	},
}

var (
	chatDesc  = &echoDesc.Streams[0]
	countDesc = &echoDesc.Streams[1]
)

// echoService records the calls its handlers run.
type echoService struct {
	mu    sync.Mutex
	calls []time.Time // when each handler started
	fail  error       // returned by Echo, if set
}

func (e *echoService) record() {
	e.mu.Lock()
	e.calls = append(e.calls, time.Now())
	e.mu.Unlock()
}

func (e *echoService) handled() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.calls...)
}

func echoHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	e := srv.(*echoService)
	h := func(ctx context.Context, req any) (any, error) {
		e.record()
		if e.fail != nil {
			return nil, e.fail
		}
		return req, nil
	}
	if interceptor == nil {
		return h(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: methodEcho}, h)
}

func chatHandler(srv any, ss grpc.ServerStream) error {
	srv.(*echoService).record()
	for {
		m := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(m); err != nil {
			return err
		}
	}
}

func countHandler(srv any, ss grpc.ServerStream) error {
	srv.(*echoService).record()
	n := 0
	for {
		err := ss.RecvMsg(new(wrapperspb.StringValue))
		if errors.Is(err, io.EOF) {
			return ss.SendMsg(wrapperspb.String(strconv.Itoa(n)))
		}
		if err != nil {
			return err
		}
		n++
	}
}

// serve starts a grpc-go server with the test service, s's interceptors
// (s may be nil) and extra options, on a loopback TCP port, and returns its
// address and the service.
func serve(t testing.TB, s *Server, extra ...grpc.ServerOption) (string, *echoService) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := extra
	if s != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(s.Unary), grpc.ChainStreamInterceptor(s.Stream))
	}
	srv := grpc.NewServer(opts...)
	svc := &echoService{}
	srv.RegisterService(&echoDesc, svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String(), svc
}

// dial returns a client connection to addr through c's interceptors (c may
// be nil).
func dial(t testing.TB, addr string, c *Client, extra ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, extra...)
	if c != nil {
		opts = append(opts, grpc.WithChainUnaryInterceptor(c.Unary), grpc.WithChainStreamInterceptor(c.Stream))
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// reply is what a unary call returned.
type reply struct {
	hdr, trl metadata.MD
	err      error
}

func echo(ctx context.Context, conn *grpc.ClientConn, opts ...grpc.CallOption) reply {
	var r reply
	out := new(wrapperspb.StringValue)
	opts = append(opts, grpc.Header(&r.hdr), grpc.Trailer(&r.trl))
	r.err = conn.Invoke(ctx, methodEcho, wrapperspb.String("hi"), out, opts...)
	if r.err == nil && out.GetValue() != "hi" {
		r.err = errors.New("echo answered " + strconv.Quote(out.GetValue()))
	}
	return r
}
