package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rategate/rategate/internal/ratelimit"
	"github.com/rategate/rategate/limiter"
)

// DefaultRetries is the retries of a refused idempotent call when
// ClientOptions.Retries is 0.
const DefaultRetries = 2

// DefaultMaxRetryWait is the longest RetryInfo delay waited out to retry
// when ClientOptions.MaxRetryWait is 0.
const DefaultMaxRetryWait = time.Minute

// DefaultMaxWait is the longest a server can make a client hold off its
// target when ClientOptions.MaxWait is 0.
const DefaultMaxWait = 5 * time.Minute

// ClientOptions configures NewClient. The zero ClientOptions limits nothing
// of its own, and still keeps to what the servers say.
type ClientOptions struct {
	// Limiter, if set, gives a permit to every call and stream.
	Limiter limiter.Limiter
	// PerMethod, if set, returns the limiter of a full method
	// ("/package.Service/Method"), such as a limiter.Keyed's For.
	PerMethod func(method string) limiter.Limiter
	// PerTarget, if set, returns the limiter of a target (the
	// grpc.ClientConn's Target, as dialled: "dns:///api.example.com:443").
	PerTarget func(target string) limiter.Limiter
	// Idempotent reports whether a method may be sent again after a
	// refusal (calls can also be marked one by one with the Idempotent
	// call option). Nil: only the calls so marked.
	Idempotent func(method string) bool
	// Retries is how many times a refused idempotent unary call is sent
	// again: 0 means DefaultRetries, a negative value none.
	Retries int
	// MaxRetryWait is the longest RetryInfo delay waited out to retry: 0
	// means DefaultMaxRetryWait. A refusal asking for longer, or for a
	// wait past the call's deadline, is returned.
	MaxRetryWait time.Duration
	// RetryBudget, if set, gives a permit to every retry, so that retries
	// stay a bounded share of the calls (a token bucket of 10/s, say): a
	// retry it does not grant at once is not made, and the refusal is
	// returned.
	RetryBudget limiter.Limiter
	// MaxWait is the longest a server can make this client hold off its
	// target, with RetryInfo or the ratelimit metadata: a longer wait
	// counts as MaxWait, so that a server's mistake cannot stall the
	// client for days. 0 means DefaultMaxWait.
	MaxWait time.Duration
	// Outcome classifies the error of a call, for the Report of the leases
	// it took (adaptive limiters learn from it); the default is OutcomeOf.
	Outcome func(err error) limiter.Outcome
}

// Client holds the client interceptors: Unary and Stream. Make it with
// NewClient; it is safe for concurrent use, and one Client may serve many
// grpc.ClientConns, which then share its limits:
//
//	conn, err := grpc.NewClient(target,
//		grpc.WithTransportCredentials(creds),
//		grpc.WithChainUnaryInterceptor(c.Unary),
//		grpc.WithChainStreamInterceptor(c.Stream),
//	)
//
// Before each call and each stream it takes a permit from Limiter, from
// PerMethod's limiter for the method and from PerTarget's for the target,
// waiting as the call's context allows; a permit of a limiter that takes
// permits back (limiter.Concurrency) is held until the call ends. It keeps
// to what the servers say, per target:
//
//   - After a refusal carrying google.rpc.RetryInfo it sends nothing to
//     that target before the delay has passed (counted from when the
//     refusal arrived, so never before the server's time). A delay that
//     is negative or malformed is ignored; one over MaxWait counts as
//     MaxWait.
//   - It reads the ratelimit and ratelimit-policy metadata of every
//     response (and the legacy dialects httplimit.Transport reads), with
//     httplimit.Transport's own code: it sends no more calls than what
//     responses received before each call allow (calls in flight when a
//     response comes may not be counted in its r), and when that is used
//     it spreads calls at the pace of the server's policy (w/q apart,
//     with its burst parameter, which this package's server and httplimit
//     state for token buckets), so that a server limit finer than the
//     metadata's whole seconds (10/s with a burst of 1) is followed call
//     by call; without a policy it waits for the t the server gives, or
//     for RetryInfo's delay, which is exact, on a refusal.
//   - It retries a refused unary call (codes.ResourceExhausted or
//     codes.Unavailable with RetryInfo) up to Retries times, after waiting
//     out the delay, when the call is idempotent (ClientOptions.Idempotent
//     or the Idempotent call option) and the wait is within MaxRetryWait
//     and the call's deadline and RetryBudget grants it. Streams are not
//     retried: their messages are the caller's to send again.
//
// A call whose wait would outlast its deadline fails at once with
// codes.DeadlineExceeded; one whose context ends while it waits fails with
// the context's code; one its own limiters refuse (closed, queue full)
// fails with codes.ResourceExhausted or, when a limiter cannot decide,
// codes.Unavailable. What it learns is kept per target, not per method: a
// server that gives its methods different policies is best called through
// one Client per policy.
type Client struct {
	lim, budget  limiter.Limiter
	perMethod    func(string) limiter.Limiter
	perTarget    func(string) limiter.Limiter
	idempotent   func(string) bool
	retries      int
	maxRetryWait time.Duration
	maxWait      time.Duration
	outcome      func(error) limiter.Outcome
	hosts        *ratelimit.Hosts // what it knows of each target
}

// NewClient returns a Client, or an *limiter.OptionError naming the first
// invalid option.
func NewClient(o ClientOptions) (*Client, error) {
	if o.MaxRetryWait < 0 {
		return nil, &limiter.OptionError{Field: "MaxRetryWait", Problem: fmt.Sprintf("%v is negative", o.MaxRetryWait)}
	}
	if o.MaxWait < 0 {
		return nil, &limiter.OptionError{Field: "MaxWait", Problem: fmt.Sprintf("%v is negative", o.MaxWait)}
	}
	c := &Client{
		lim: o.Limiter, budget: o.RetryBudget, perMethod: o.PerMethod, perTarget: o.PerTarget,
		idempotent: o.Idempotent, retries: o.Retries, maxRetryWait: o.MaxRetryWait,
		maxWait: o.MaxWait, outcome: o.Outcome,
	}
	if c.retries == 0 {
		c.retries = DefaultRetries
	}
	if c.maxRetryWait == 0 {
		c.maxRetryWait = DefaultMaxRetryWait
	}
	if c.maxWait == 0 {
		c.maxWait = DefaultMaxWait
	}
	if c.outcome == nil {
		c.outcome = OutcomeOf
	}
	c.hosts = ratelimit.NewHosts(ratelimit.Config{MaxHosts: maxTargets, MaxWait: c.maxWait})
	return c, nil
}

// idempotentOption is the Idempotent call option.
type idempotentOption struct{ grpc.EmptyCallOption }

// Idempotent returns a call option marking a call as safe to send again: a
// Client retries it after a refusal (see Client).
func Idempotent() grpc.CallOption { return idempotentOption{} }

// Unary is the grpc.UnaryClientInterceptor; see Client.
func (c *Client) Unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return c.unaryTo(ctx, cc.Target(), method, req, reply, cc, invoker, opts)
}

// unaryTo is Unary for a call to target.
func (c *Client) unaryTo(ctx context.Context, target, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	retries := c.retriesOf(method, opts)
	for attempt := 0; ; attempt++ {
		sent, err := c.unary(ctx, target, method, req, reply, cc, invoker, opts)
		if err == nil || !sent || attempt >= retries || !c.mayRetry(ctx, err) {
			return err
		}
	}
}

// retriesOf returns the retries a call may make: none unless it is
// idempotent.
func (c *Client) retriesOf(method string, opts []grpc.CallOption) int {
	if c.retries < 0 {
		return 0
	}
	if c.idempotent != nil && c.idempotent(method) {
		return c.retries
	}
	for _, o := range opts {
		if _, ok := o.(idempotentOption); ok {
			return c.retries
		}
	}
	return 0
}

// mayRetry reports whether a refusal may be retried: it carries a RetryInfo
// delay within MaxRetryWait (and MaxWait, which bounds the wait the next
// attempt keeps to) and the deadline, and the retry budget grants it.
func (c *Client) mayRetry(ctx context.Context, err error) bool {
	if code := status.Code(err); code != codes.ResourceExhausted && code != codes.Unavailable {
		return false
	}
	d, ok := serverRetryInfo(err)
	if !ok || d > c.maxRetryWait || d > c.maxWait || pastDeadline(ctx, d) {
		return false
	}
	return c.budget == nil || c.budget.TryAcquire(1).Granted()
}

// unary makes one attempt of a call; sent says whether it reached the
// server.
func (c *Client) unary(ctx context.Context, target, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) (sent bool, err error) {
	h := c.hosts.Pin(target)
	var ls leases
	tk, err := c.admit(ctx, h, method, target, &ls)
	if err != nil {
		c.hosts.Unpin(h)
		return false, err
	}
	var hdr, trl metadata.MD
	all := make([]grpc.CallOption, 0, len(opts)+2)
	all = append(append(all, opts...), grpc.Header(&hdr), grpc.Trailer(&trl))
	start := time.Now()
	err = invoker(ctx, method, req, reply, cc, all...)
	c.learn(h, tk, err, hdr, trl)
	ls.done(c.outcome(err), time.Since(start))
	return true, err
}

// Stream is the grpc.StreamClientInterceptor; see Client. The stream's
// permits are held until it ends: until RecvMsg returns an error (io.EOF
// at the end of a server stream), the one response of a client stream is
// received, or the context ends. As for any gRPC stream, read it to its
// end or cancel its context.
func (c *Client) Stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.streamTo(ctx, cc.Target(), desc, cc, method, streamer, opts)
}

// streamTo is Stream for a stream to target.
func (c *Client) streamTo(ctx context.Context, target string, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts []grpc.CallOption) (grpc.ClientStream, error) {
	h := c.hosts.Pin(target)
	cs := &clientStream{c: c, host: h, serverStreams: desc.ServerStreams}
	tk, err := c.admit(ctx, h, method, target, &cs.leases)
	if err != nil {
		c.hosts.Unpin(h)
		return nil, err
	}
	cs.ticket = tk
	cs.start = time.Now()
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		cs.finish(err, false)
		return nil, err
	}
	cs.ClientStream = s
	cs.stop = context.AfterFunc(ctx, func() { cs.finish(ctx.Err(), false) })
	return cs, nil
}

// clientStream ends the stream's leases, and learns from the stream's
// metadata, when the stream ends.
type clientStream struct {
	grpc.ClientStream
	c             *Client
	host          *ratelimit.Host
	ticket        ratelimit.Ticket
	serverStreams bool
	leases        leases
	start         time.Time
	stop          func() bool
	once          sync.Once
}

// RecvMsg receives a message; the stream's end (an error, io.EOF at the
// end of a server stream, or the one response of a client stream) ends
// its leases.
func (cs *clientStream) RecvMsg(m any) error {
	err := cs.ClientStream.RecvMsg(m)
	if err != nil || !cs.serverStreams {
		cs.finish(err, true)
	}
	return err
}

// finish learns from the stream's end (from its metadata when it was read
// to its end) and reports and releases its leases, once.
func (cs *clientStream) finish(err error, read bool) {
	cs.once.Do(func() {
		var hdr, trl metadata.MD
		if read {
			cs.stop()
			hdr, _ = cs.ClientStream.Header()
			trl = cs.ClientStream.Trailer()
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		cs.c.learn(cs.host, cs.ticket, err, hdr, trl)
		cs.leases.done(cs.c.outcome(err), time.Since(cs.start))
	})
}

// leases are the leases of one call: of Limiter, PerMethod's and
// PerTarget's limiters.
type leases struct {
	l [3]limiter.Lease
	n int
}

// done reports o and the latency to the leases and releases them, in
// reverse order.
func (ls *leases) done(o limiter.Outcome, latency time.Duration) {
	for i := ls.n - 1; i >= 0; i-- {
		ls.l[i].Report(o, latency)
		ls.l[i].Release()
	}
	ls.n = 0
}

// acquire takes a permit from each of the call's limiters, or none.
func (c *Client) acquire(ctx context.Context, method, target string, ls *leases) error {
	lims := [3]limiter.Limiter{c.lim}
	if c.perMethod != nil {
		lims[1] = c.perMethod(method)
	}
	if c.perTarget != nil {
		lims[2] = c.perTarget(target)
	}
	for _, lim := range lims {
		if lim == nil {
			continue
		}
		l, err := lim.Acquire(ctx, 1)
		if err != nil {
			for i := ls.n - 1; i >= 0; i-- {
				ls.l[i].Release()
			}
			ls.n = 0
			return localError(ctx, err)
		}
		ls.l[ls.n] = l
		ls.n++
	}
	return nil
}

// localError is the status of a call the client's own limiters did not
// grant.
func localError(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return status.FromContextError(cerr).Err()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return status.Error(codes.DeadlineExceeded, "grpclimit: waiting for a permit: "+err.Error())
	}
	return status.Error(defaultCode(err), "grpclimit: waiting for a permit: "+err.Error())
}

// pastDeadline reports whether a wait of d would end after ctx's deadline.
func pastDeadline(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) < d
}
