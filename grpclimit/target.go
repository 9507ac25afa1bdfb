package grpclimit

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rategate/rategate/internal/ratelimit"
	"github.com/rategate/rategate/limiter"
)

// maxTargets is how many targets a Client keeps what it learned of: beyond
// that, the least recently used target with no call under way is
// forgotten.
const maxTargets = 1024

// admit waits until target (h) may be sent a call, takes the call's
// permits into ls, and counts the call as sent: the same steps as
// httplimit.Transport's, on the same state (see package
// internal/ratelimit).
func (c *Client) admit(ctx context.Context, h *ratelimit.Host, method, target string, ls *leases) (ratelimit.Ticket, error) {
	if _, err := c.hosts.Wait(ctx, h, false, ratelimit.Forever); err != nil {
		return ratelimit.Ticket{}, waitError(ctx, target, err)
	}
	if err := c.acquire(ctx, method, target, ls); err != nil {
		return ratelimit.Ticket{}, err
	}
	tk, err := c.hosts.Wait(ctx, h, true, ratelimit.Forever)
	if err != nil {
		ls.done(limiter.Unknown, 0)
		return ratelimit.Ticket{}, waitError(ctx, target, err)
	}
	return tk, nil
}

// waitError is the status of a wait for target that failed with err: at
// once when the wait would outlast ctx's deadline, else when ctx ended.
func waitError(ctx context.Context, target string, err error) error {
	var we *ratelimit.WaitError
	if errors.As(err, &we) {
		return status.Errorf(codes.DeadlineExceeded, "grpclimit: %s asks for no call for %v, past the context deadline", target, we.Wait)
	}
	return status.FromContextError(ctx.Err()).Err()
}

// learn records the end of the call of tk to h: its error (a RetryInfo
// delay, a throttle) and its metadata (the ratelimit fields, in the header
// or, for a refusal, the trailer). A call that ended without a response
// has neither.
func (c *Client) learn(h *ratelimit.Host, tk ratelimit.Ticket, err error, hdr, trl metadata.MD) {
	now := time.Now()
	r := ratelimit.Response{At: now, Answered: true, Throttled: c.outcome(err) == limiter.Throttled}
	r.RetryAfter, r.Refused = serverRetryInfo(err)
	for _, md := range [2]metadata.MD{hdr, trl} {
		f := ratelimit.HeaderFields(md, true)
		if r.Limits = ratelimit.Read(&f, now); r.Limits.Known() {
			break
		}
	}
	c.hosts.Done(h, tk, r)
}
