package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rategate/rategate/internal/ratelimit"
	"github.com/rategate/rategate/limiter"
)

// Server holds the server interceptors: Unary and Stream. Make it with New;
// it is safe for concurrent use, holds no global state, and one Server may
// serve many grpc.Servers, which then share its limits:
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(lim.Unary),
//		grpc.ChainStreamInterceptor(lim.Stream),
//	)
type Server struct {
	lim        limiter.Limiter
	perKey     func(string) limiter.Limiter
	key        KeyFunc
	keyCode    codes.Code
	cost       func(context.Context, string, any) int
	perMessage bool
	wait       time.Duration
	code       func(error) codes.Code
	outcome    func(error) limiter.Outcome
	quoted     string // the policy name as a structured-field string
	noMetadata bool
	onDecision func(context.Context, Decision)
}

// New returns a Server, or an *limiter.OptionError naming the first
// invalid option.
func New(o Options) (*Server, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		lim: o.Limiter, perKey: o.PerKey, key: o.Key, keyCode: o.KeyErrorCode, cost: o.Cost,
		perMessage: o.PerMessage, wait: o.Wait, code: o.Code, outcome: o.Outcome,
		noMetadata: o.NoMetadata, onDecision: o.OnDecision,
	}
	if s.key == nil {
		s.key = PeerAddr()
	}
	if s.keyCode == codes.OK {
		s.keyCode = codes.InvalidArgument
	}
	if s.outcome == nil {
		s.outcome = OutcomeOf
	}
	s.quoted = ratelimit.PolicyName(o.Policy)
	return s, nil
}

// call is what the server knows of one call while it decides.
type call struct {
	ctx    context.Context
	ss     grpc.ServerStream // nil for a unary call
	method string
	lim    limiter.Limiter
	key    string
}

func (c *call) setHeader(md metadata.MD) {
	if c.ss != nil {
		_ = c.ss.SetHeader(md)
		return
	}
	_ = grpc.SetHeader(c.ctx, md)
}

func (c *call) setTrailer(md metadata.MD) {
	if c.ss != nil {
		c.ss.SetTrailer(md)
		return
	}
	_ = grpc.SetTrailer(c.ctx, md)
}

// Unary is the grpc.UnaryServerInterceptor: it runs handler once the call
// is granted its permits, and otherwise returns the refusal (see
// Options). A granted lease is released when handler returns, and told the
// outcome (Options.Outcome) and the handler's latency.
func (s *Server) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c := call{ctx: ctx, method: info.FullMethod}
	lease, err := s.open(&c, req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := handler(ctx, req)
	s.done(lease, err, start)
	return resp, err
}

// Stream is the grpc.StreamServerInterceptor: a stream takes its permits
// when it opens, and holds them until handler returns (so a
// limiter.Concurrency caps the open streams); with Options.PerMessage each
// message it receives takes permits too.
func (s *Server) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	c := &call{ctx: ss.Context(), ss: ss, method: info.FullMethod}
	lease, err := s.open(c, nil)
	if err != nil {
		return err
	}
	if s.perMessage && c.lim != nil {
		ss = &limitedStream{ServerStream: ss, s: s, c: c}
	}
	start := time.Now()
	err = handler(srv, ss)
	s.done(lease, err, start)
	return err
}

// done reports the outcome of the work a lease admitted and releases it.
func (s *Server) done(l limiter.Lease, err error, start time.Time) {
	if l.Granted() {
		l.Report(s.outcome(err), time.Since(start))
		l.Release()
	}
}

// open finds the call's limiter and takes the permits of the call or the
// stream's opening.
func (s *Server) open(c *call, req any) (limiter.Lease, error) {
	d := Decision{Method: c.method, Cost: 1}
	if s.cost != nil {
		d.Cost = s.cost(c.ctx, c.method, req)
	}
	if d.Cost < 0 {
		return limiter.Lease{}, s.fail(c, &d, codes.Internal, errNegativeCost)
	}
	c.lim = s.lim
	if s.perKey != nil {
		key, err := s.key(c.ctx, c.method)
		if err != nil {
			code := s.keyCode
			if st, ok := status.FromError(err); ok {
				code = st.Code()
			}
			return limiter.Lease{}, s.fail(c, &d, code, err)
		}
		c.key, d.Key = key, key
		c.lim = s.perKey(key)
	}
	return s.admit(c, &d)
}

var errNegativeCost = errors.New("grpclimit: Options.Cost returned a negative cost")

// admit takes d.Cost permits from c.lim, or returns the refusal.
func (s *Server) admit(c *call, d *Decision) (limiter.Lease, error) {
	if c.lim == nil || d.Cost == 0 {
		s.decided(c, d)
		return limiter.Lease{}, nil
	}
	lease, err := s.take(c, d)
	if err != nil {
		return limiter.Lease{}, s.refuse(c, d, lease, err)
	}
	if !d.Message && (!s.noMetadata || s.onDecision != nil) {
		var buf [2]ratelimit.Quota
		if ps := ratelimit.AppendQuotas(buf[:0], c.lim); len(ps) > 0 {
			mc := ratelimit.MostConstrained(ps)
			d.Quota = ps[mc].Quota
			if !s.noMetadata {
				c.setHeader(quotaMetadata(s.quoted, ps, mc, 0))
			}
		}
	}
	s.decided(c, d)
	return lease, nil
}

// take asks c.lim for d.Cost permits: at once, or queued up to s.wait.
func (s *Server) take(c *call, d *Decision) (limiter.Lease, error) {
	if s.wait <= 0 {
		l := c.lim.TryAcquire(d.Cost)
		return l, l.Err()
	}
	if f, ok := c.lim.(limiter.Foreseer); ok {
		// The wait behind the whole queue, not only its head's: a call
		// that cannot be served within Wait is refused now.
		if est, ok := f.Foresee(d.Cost); ok && est > s.wait {
			err := fmt.Errorf("grpclimit: the wait of %v behind the queue is longer than Options.Wait (%v): %w", est, s.wait, context.DeadlineExceeded)
			return limiter.Denied(err, est), err
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(c.ctx, s.wait)
	l, err := c.lim.Acquire(ctx, d.Cost)
	cancel()
	d.Waited = time.Since(start)
	return l, err
}

// refuse returns the status of a call the limiter did not grant: the
// context's when the client went away, a codes.ResourceExhausted refusal
// with RetryInfo and the quota metadata when the call is over the limit,
// or the code Options.Code gives.
func (s *Server) refuse(c *call, d *Decision, l limiter.Lease, err error) error {
	d.Err = err
	if cerr := c.ctx.Err(); cerr != nil {
		st := status.FromContextError(cerr)
		d.Code = st.Code()
		s.decided(c, d)
		return st.Err()
	}
	d.Code = codes.OK
	if s.code != nil {
		d.Code = s.code(err)
	}
	if d.Code == codes.OK {
		d.Code = defaultCode(err)
	}
	if d.Code != codes.ResourceExhausted {
		s.decided(c, d)
		return status.Error(d.Code, "grpclimit: no permit: "+err.Error())
	}
	var buf [2]ratelimit.Quota
	ps := ratelimit.AppendQuotas(buf[:0], c.lim)
	mc := 0
	if len(ps) > 0 {
		mc = ratelimit.MostConstrained(ps)
		d.Quota = ps[mc].Quota
	}
	d.RetryAfter = retryDelay(l, d.Quota, err)
	if !s.noMetadata && len(ps) > 0 {
		c.setTrailer(quotaMetadata(s.quoted, ps, mc, d.RetryAfter))
	}
	s.decided(c, d)
	return refusal(d.RetryAfter, err)
}

// fail refuses a call no limiter could be asked about.
func (s *Server) fail(c *call, d *Decision, code codes.Code, err error) error {
	d.Code, d.Err = code, err
	s.decided(c, d)
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(code, err.Error())
}

func (s *Server) decided(c *call, d *Decision) {
	if s.onDecision != nil {
		s.onDecision(c.ctx, *d)
	}
}

// limitedStream takes permits for each message the handler receives.
type limitedStream struct {
	grpc.ServerStream
	s *Server
	c *call
}

// RecvMsg receives a message, then takes its permits (waiting up to
// Options.Wait): it returns the message once they are granted, or the
// refusal. The permits are released at once.
func (ls *limitedStream) RecvMsg(m any) error {
	if err := ls.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	c := ls.c
	d := Decision{Method: c.method, Key: c.key, Message: true, Cost: 1}
	if ls.s.cost != nil {
		d.Cost = ls.s.cost(c.ctx, c.method, m)
	}
	if d.Cost < 0 {
		return ls.s.fail(c, &d, codes.Internal, errNegativeCost)
	}
	lease, err := ls.s.admit(c, &d)
	lease.Release()
	return err
}
