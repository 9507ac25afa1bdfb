package main

import (
	"context"
	"errors"
	"io"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The Quotes service, described by hand so that the example needs no
// protoc: with generated code, register the service and call its client as
// usual; the interceptors are the same. Messages are
// wrapperspb.StringValue, which grpc-go's default codec carries.
const (
	methodGet    = "/quotes.Quotes/Get"
	methodUpload = "/quotes.Quotes/Upload"
)

var quotesDesc = grpc.ServiceDesc{
	ServiceName: "quotes.Quotes",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Get", Handler: getHandler}},
	Streams:     []grpc.StreamDesc{{StreamName: "Upload", Handler: uploadHandler, ClientStreams: true}},
}

var uploadDesc = &quotesDesc.Streams[0]

var quotes = []string{
	"Simplicity is complicated.",
	"Clear is better than clever.",
	"A little copying is better than a little dependency.",
}

// getHandler answers Get: the quote of the index asked for.
func getHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	get := func(context.Context, any) (any, error) {
		i, _ := strconv.Atoi(in.GetValue())
		return wrapperspb.String(quotes[max(i, 0)%len(quotes)]), nil
	}
	if interceptor == nil {
		return get(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: methodGet}, get)
}

// uploadHandler answers Upload: the number of messages received.
func uploadHandler(_ any, ss grpc.ServerStream) error {
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
