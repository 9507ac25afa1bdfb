// Command grpc runs a rate-limited gRPC service on loopback and clients of
// it, to show package grpclimit from both ends:
//
//   - quotes.Quotes/Get allows each tenant (named by the "tenant"
//     metadata) -rate calls a second, with a burst of -burst (a token
//     bucket per tenant); beyond that it answers RESOURCE_EXHAUSTED with
//     google.rpc.RetryInfo, and every answer carries the ratelimit
//     metadata.
//   - quotes.Quotes/Upload is a client stream whose messages the server
//     paces: each waits for a permit of a -upload-rate pacer, up to -wait.
//
// First a plain gRPC client calls Get -calls times for tenant "eager" as
// fast as it can, and is refused what is over the quota. Then a client
// through grpclimit.Client makes as many calls for tenant "polite" from
// -clients goroutines: it keeps to its own limiter and to the ratelimit
// metadata, so the server refuses it nothing (and would it refuse one, the
// client would send it again after its RetryInfo). Last, an upload of
// -messages messages is paced by the server. Each side prints what it saw.
//
//	go run ./examples/grpc
//	go run ./examples/grpc -rate 10 -burst 10 -calls 40
//
// (-h lists the flags; it takes no arguments.) It exits with status 1 if
// the grpclimit client was refused or lost a call, or the server served a
// tenant more than its quota.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rategate/rategate/grpclimit"
	"github.com/rategate/rategate/limiter"
)

type config struct {
	Rate       int           // Get calls per second per tenant
	Burst      int           // Get burst per tenant
	Calls      int           // Get calls each client makes
	Clients    int           // goroutines of the grpclimit client
	Messages   int           // messages of the upload
	UploadRate int           // upload messages per second
	Wait       time.Duration // longest wait of an upload message
}

var defaultConfig = config{Rate: 5, Burst: 5, Calls: 20, Clients: 3, Messages: 10, UploadRate: 20, Wait: time.Second}

// result is what run measured.
type result struct {
	EagerServed, EagerRefused   int
	PoliteServed, PoliteRefused int // as the polite client saw them
	PoliteLost                  int // calls that failed for another reason
	Uploaded                    int // messages the server counted
	Served, Refused             map[string]int
	MaxServed                   int // the most Get calls of a tenant the bucket's bound allowed
}

func main() {
	os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// cli parses args, runs the demonstration and returns the exit status: 0
// when the limits held and the grpclimit client was served every call, 1
// when not, 2 for bad arguments (0 for -h).
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig
	fs := flag.NewFlagSet("grpc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "Get calls per second per tenant")
	fs.IntVar(&cfg.Burst, "burst", cfg.Burst, "Get burst per tenant")
	fs.IntVar(&cfg.Calls, "calls", cfg.Calls, "Get calls each client makes")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "goroutines of the grpclimit client")
	fs.IntVar(&cfg.Messages, "messages", cfg.Messages, "messages of the upload")
	fs.IntVar(&cfg.UploadRate, "upload-rate", cfg.UploadRate, "upload messages the server accepts per second")
	fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "longest wait of an upload message")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: grpc [flags]\n\n"+
			"Runs a rate-limited gRPC service on loopback (Get: -rate calls a second\n"+
			"per tenant; Upload: messages paced at -upload-rate) and clients of it: a\n"+
			"plain one, and a grpclimit.Client that keeps to the server's limits.\n"+
			"It takes no arguments.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "grpc: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := cfg.check(); err != nil {
		fmt.Fprintln(stderr, "grpc:", err)
		return 2
	}
	res, err := run(ctx, stdout, cfg)
	if err == nil && (res.PoliteRefused > 0 || res.PoliteLost > 0 || res.Served["eager"] > res.MaxServed || res.Served["polite"] > res.MaxServed) {
		err = fmt.Errorf("the grpclimit client was refused %d calls and lost %d; the server served eager %d and polite %d calls (at most %d allowed)",
			res.PoliteRefused, res.PoliteLost, res.Served["eager"], res.Served["polite"], res.MaxServed)
	}
	if err != nil {
		fmt.Fprintln(stderr, "grpc:", err)
		return 1
	}
	return 0
}

// check says which setting is out of range, if one is.
func (c config) check() error {
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"rate", c.Rate > 0}, {"burst", c.Burst > 0}, {"calls", c.Calls > 0}, {"clients", c.Clients > 0},
		{"messages", c.Messages >= 0}, {"upload-rate", c.UploadRate > 0}, {"wait", c.Wait > 0},
	} {
		if !f.ok {
			return fmt.Errorf("-%s must be positive", f.name)
		}
	}
	return nil
}

// server is the service's limits and its record of the decisions on Get.
type server struct {
	mu      sync.Mutex
	served  map[string]int
	refused map[string]int
}

func (s *server) decided(_ context.Context, d grpclimit.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.Code == codes.OK {
		s.served[d.Key]++
	} else {
		s.refused[d.Key]++
	}
}

// start serves the Quotes service on a loopback port until ctx ends, and
// returns its address and a function that stops it.
func start(cfg config, s *server) (string, func(), error) {
	buckets, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
		return limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(cfg.Rate, time.Second), Burst: cfg.Burst})
	}})
	if err != nil {
		return "", nil, err
	}
	gets, err := grpclimit.New(grpclimit.Options{PerKey: buckets.For, Key: grpclimit.MetadataKey("tenant"), OnDecision: s.decided})
	if err != nil {
		return "", nil, err
	}
	pacer, err := limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(cfg.UploadRate, time.Second)})
	if err != nil {
		return "", nil, err
	}
	uploads, err := grpclimit.New(grpclimit.Options{Limiter: pacer, PerMessage: true, Wait: cfg.Wait})
	if err != nil {
		return "", nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	// Get is the one unary method, Upload the one stream: each has its
	// own grpclimit.Server.
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(gets.Unary), grpc.ChainStreamInterceptor(uploads.Stream))
	srv.RegisterService(&quotesDesc, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	return lis.Addr().String(), func() { srv.Stop(); <-done }, nil
}

func run(ctx context.Context, out io.Writer, cfg config) (result, error) {
	s := &server{served: map[string]int{}, refused: map[string]int{}}
	addr, stop, err := start(cfg, s)
	if err != nil {
		return result{}, err
	}
	defer stop()
	fmt.Fprintf(out, "server: Get allows %d calls a second per tenant (burst %d); Upload paces messages at %d a second\n",
		cfg.Rate, cfg.Burst, cfg.UploadRate)

	var res result
	begin := time.Now()
	if err := eager(ctx, out, addr, cfg, &res); err != nil {
		return res, err
	}
	if err := polite(ctx, out, addr, cfg, &res); err != nil {
		return res, err
	}
	// The bucket's bound over the whole run: Burst + Rate·t.
	res.MaxServed = cfg.Burst + int(time.Since(begin).Seconds()*float64(cfg.Rate))
	if err := upload(ctx, out, addr, cfg, &res); err != nil {
		return res, err
	}

	s.mu.Lock()
	res.Served, res.Refused = s.served, s.refused
	fmt.Fprintf(out, "server saw: tenant eager %d served, %d refused; tenant polite %d served, %d refused\n",
		s.served["eager"], s.refused["eager"], s.served["polite"], s.refused["polite"])
	s.mu.Unlock()
	return res, nil
}

func dial(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	return grpc.NewClient("passthrough:///"+addr, opts...)
}

func get(ctx context.Context, conn *grpc.ClientConn, tenant string, i int, opts ...grpc.CallOption) error {
	ctx = metadata.AppendToOutgoingContext(ctx, "tenant", tenant)
	return conn.Invoke(ctx, methodGet, wrapperspb.String(strconv.Itoa(i)), new(wrapperspb.StringValue), opts...)
}

// eager calls Get as fast as it can through a plain connection.
func eager(ctx context.Context, out io.Writer, addr string, cfg config, res *result) error {
	conn, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	var first string
	for i := range cfg.Calls {
		var trl metadata.MD
		err := get(ctx, conn, "eager", i, grpc.Trailer(&trl))
		switch status.Code(err) {
		case codes.OK:
			res.EagerServed++
		case codes.ResourceExhausted:
			res.EagerRefused++
			if first == "" {
				first = describe(err, trl)
			}
		default:
			return err
		}
	}
	fmt.Fprintf(out, "eager client (plain gRPC): %d calls, %d served, %d refused\n", cfg.Calls, res.EagerServed, res.EagerRefused)
	if first != "" {
		fmt.Fprintf(out, "  its first refusal: %s\n", first)
	}
	return nil
}

// describe says what a refusal carried: its RetryInfo and ratelimit
// metadata.
func describe(err error, trl metadata.MD) string {
	st := status.Convert(err)
	var b strings.Builder
	b.WriteString(st.Code().String())
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			fmt.Fprintf(&b, ", RetryInfo %v", ri.GetRetryDelay().AsDuration().Round(time.Millisecond))
		}
	}
	if v := trl.Get(grpclimit.MetadataRateLimit); len(v) > 0 {
		fmt.Fprintf(&b, ", ratelimit: %s", v[0])
	}
	return b.String()
}

// polite calls Get from cfg.Clients goroutines through a grpclimit.Client
// with its own limiter at the server's rate, and retries refused calls.
func polite(ctx context.Context, out io.Writer, addr string, cfg config, res *result) error {
	own, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(cfg.Rate, time.Second), Burst: cfg.Burst})
	if err != nil {
		return err
	}
	c, err := grpclimit.NewClient(grpclimit.ClientOptions{
		Limiter:    own,
		Idempotent: func(method string) bool { return method == methodGet },
	})
	if err != nil {
		return err
	}
	conn, err := dial(addr, grpc.WithChainUnaryInterceptor(c.Unary), grpc.WithChainStreamInterceptor(c.Stream))
	if err != nil {
		return err
	}
	defer conn.Close()
	begin := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range cfg.Clients {
		wg.Go(func() {
			for i := g; i < cfg.Calls; i += cfg.Clients {
				err := get(ctx, conn, "polite", i)
				mu.Lock()
				switch status.Code(err) {
				case codes.OK:
					res.PoliteServed++
				case codes.ResourceExhausted:
					res.PoliteRefused++
				default:
					res.PoliteLost++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fmt.Fprintf(out, "polite client (grpclimit.Client, %d goroutines): %d calls, %d served, %d refused, in %v\n",
		cfg.Clients, cfg.Calls, res.PoliteServed, res.PoliteRefused, time.Since(begin).Round(100*time.Millisecond))
	return nil
}

// upload sends cfg.Messages messages on one Upload stream, which the
// server paces.
func upload(ctx context.Context, out io.Writer, addr string, cfg config, res *result) error {
	conn, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	begin := time.Now()
	cs, err := conn.NewStream(ctx, uploadDesc, methodUpload)
	if err != nil {
		return err
	}
	for i := range cfg.Messages {
		if err := cs.SendMsg(wrapperspb.String(strconv.Itoa(i))); err != nil {
			break // the stream ended: CloseAndRecv says why
		}
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	count := new(wrapperspb.StringValue)
	if err := cs.RecvMsg(count); err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	res.Uploaded, _ = strconv.Atoi(count.GetValue())
	fmt.Fprintf(out, "upload: %d messages sent, the server counted %d, paced over %v\n",
		cfg.Messages, res.Uploaded, time.Since(begin).Round(10*time.Millisecond))
	return nil
}
