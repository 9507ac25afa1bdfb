package grpclimit

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// targetState is what a Client knows of one target's limits.
type targetState struct {
	notBefore time.Time // RetryInfo: no call before this
	known     bool      // budget and until come from ratelimit metadata
	budget    int64     // calls that may be sent before until
	until     time.Time // the end of the window the metadata names
	inflight  int       // calls sent and not answered
	sent      int64     // calls sent (their sequence numbers)
	applied   int64     // sequence number of the last response applied
}

// maxTargets is how many targets a Client keeps state for before it drops
// those with nothing to remember.
const maxTargets = 1024

// wait says how long a call to st must wait at now (0: none, in which case
// it takes one call of the budget).
func (st *targetState) wait(now time.Time) time.Duration {
	if now.Before(st.notBefore) {
		return st.notBefore.Sub(now)
	}
	if !st.known {
		return 0
	}
	if !now.Before(st.until) {
		st.known = false // the window is over: the next response says more
		return 0
	}
	if st.budget > 0 {
		st.budget--
		return 0
	}
	return st.until.Sub(now)
}

// admit waits until target may be sent a call (its RetryInfo delay passed,
// budget left or its window over), counts the call as sent and returns its
// sequence number.
func (c *Client) admit(ctx context.Context, target string) (int64, error) {
	for {
		c.mu.Lock()
		st := c.state(target)
		wait := st.wait(time.Now())
		if wait == 0 {
			st.sent++
			st.inflight++
			seq := st.sent
			c.mu.Unlock()
			return seq, nil
		}
		c.mu.Unlock()
		if err := sleep(ctx, target, wait); err != nil {
			return 0, err
		}
	}
}

// sleep waits out a wait target asks for, or fails: at once when the wait
// would outlast ctx's deadline, else when ctx ends.
func sleep(ctx context.Context, target string, wait time.Duration) error {
	if pastDeadline(ctx, wait) {
		return status.Errorf(codes.DeadlineExceeded, "grpclimit: %s asks for no call for %v, past the context deadline", target, wait)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// state returns target's state, made if new. c.mu is held.
func (c *Client) state(target string) *targetState {
	if st, ok := c.targets[target]; ok {
		return st
	}
	if c.targets == nil {
		c.targets = make(map[string]*targetState)
	}
	if len(c.targets) >= maxTargets {
		now := time.Now()
		for k, st := range c.targets {
			if st.inflight == 0 && !now.Before(st.notBefore) && !now.Before(st.until) {
				delete(c.targets, k)
			}
		}
	}
	st := &targetState{}
	c.targets[target] = st
	return st
}

// learn records the end of call seq to target: its error (a RetryInfo
// delay) and its metadata (the ratelimit field). A call that was not sent
// has neither.
func (c *Client) learn(target string, seq int64, err error, hdr, trl metadata.MD) {
	now := time.Now()
	delay, refused := serverRetryInfo(err)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state(target)
	st.inflight--
	if refused {
		if at := now.Add(min(delay, c.maxWait)); at.After(st.notBefore) {
			st.notBefore = at
		}
	}
	if seq <= st.applied {
		return // a later call's response was applied already
	}
	st.applied = seq
	if refused || c.noRateLimit {
		// RetryInfo says exactly what the ratelimit field says in whole
		// seconds: keep to the exact delay, then learn afresh.
		st.known = false // (and with IgnoreRateLimit, nothing is learnt)
		return
	}
	r, t, ok := parseRateLimit(hdr[MetadataRateLimit])
	if !ok {
		r, t, ok = parseRateLimit(trl[MetadataRateLimit])
	}
	if !ok {
		return
	}
	// The calls still in flight, sent before or after this one, may not be
	// counted in r yet.
	st.known = true
	st.budget = r - int64(st.inflight)
	window := c.maxWait
	if t < int64(c.maxWait/time.Second) {
		window = min(time.Duration(t)*time.Second, c.maxWait)
	}
	st.until = now.Add(window)
}
