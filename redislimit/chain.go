package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
)

// ChainRefusal is the error of a Chain's refused lease (Lease.Err): which
// member refused. It wraps limiter.ErrLimited. When several members could
// not grant, it names the one with the longest wait (the first of them),
// whose wait is the lease's RetryAfter: when every member could grant.
type ChainRefusal struct {
	// Index is the member's position among Chain's arguments (members of a
	// Chain given to Chain counting in their place).
	Index int
	// Member is the member that refused.
	Member limiter.Limiter
}

// Error returns "redislimit: refused by chain member <Index>".
func (e *ChainRefusal) Error() string {
	return "redislimit: refused by chain member " + strconv.Itoa(e.Index)
}

// Unwrap returns limiter.ErrLimited.
func (e *ChainRefusal) Unwrap() error { return limiter.ErrLimited }

// chainLimiter is the limiter Chain returns.
type chainLimiter struct {
	ms      []limiter.Limiter // the members, as given (nested chains flattened)
	hs      []*handle         // their limits
	rc      caller
	keys    []string // every member's Redis keys, in order
	args    []any    // the script's arguments before the requests
	id      string   // names the chain's flights
	max     int64    // the most permits every member can grant
	refused []error  // per member, its ChainRefusal
	policy  ErrorPolicy
	hooked  bool // a member has an OnDecision
	script  *redis.Script
	fl      flights
	waiters atomic.Int64 // Acquire calls of this process waiting: TryAcquire does not jump them
}

var (
	_ limiter.Limiter = (*chainLimiter)(nil)
	_ limiter.Quoter  = (*chainLimiter)(nil)
)

// Chain returns a limiter that grants n permits only when every one of ls
// can grant n, and then takes them from all: each decision is one script
// call that checks every member at one instant of Redis's clock and commits
// all or nothing. A refusal consumes nothing (unlike limiter.Chain of Redis
// limiters, whose refused chain has spent its earlier members' permits),
// its Err is a *ChainRefusal naming the member, and its RetryAfter is the
// latest of the members' waits: when every member could grant.
//
// The members are this package's TokenBucket, FixedWindow and SlidingLog
// limiters and the For results of their keyed forms, on one client; a
// Chain given to Chain adds its members; a chain has at most 16.
// Semaphores (Concurrency, and keyed Concurrency's For results) and
// Partitioned limiters cannot be members: chain them with limiter.Chain.
// On Redis Cluster (and Ring) every member's keys must hash to one slot:
// give them one hash tag (see the package doc, Keys and Redis Cluster),
// which Chain checks.
//
// A chain's round trip is bounded by the shortest of its members'
// Options.Timeout. When Redis cannot decide, the chain refuses with
// ErrUnavailable if a member's OnError is FailClosed; otherwise it asks the
// members' fallbacks (all of them, as one limiter.Chain) if any uses
// UseFallback, and grants if all use FailOpen. Each member counts the
// chain's grants in its Stats and keeps its Quota; the chain has no Close
// of its own (a member's Close makes it fail with ErrClosed).
//
// The chain implements limiter.Quoter (the quota of the member with the
// fewest permits remaining) and AppendQuotas, which appends every member's
// quota in order (for an HTTP RateLimit-Policy field that lists each).
// Acquire waits as a member's Acquire does (see the package doc, Waiting);
// the members' Queue options do not apply to it. A granted lease settles
// (limiter.Lease.Settle) every member in one round trip.
func Chain(ls ...limiter.Limiter) (limiter.Limiter, error) {
	c := &chainLimiter{max: 1<<63 - 1}
	if err := c.add(ls); err != nil {
		return nil, err
	}
	if len(c.hs) == 0 {
		return nil, errors.New("redislimit.Chain: no members")
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	c.build()
	return c, nil
}

// add adds ls as members, flattening chains.
func (c *chainLimiter) add(ls []limiter.Limiter) error {
	for _, l := range ls {
		if sub, ok := l.(*chainLimiter); ok {
			c.ms = append(c.ms, sub.ms...)
			c.hs = append(c.hs, sub.hs...)
			continue
		}
		h, err := memberHandle(len(c.hs), l)
		if err != nil {
			return err
		}
		c.ms = append(c.ms, l)
		c.hs = append(c.hs, h)
	}
	return nil
}

// memberHandle returns the limit of l, the i-th member, or why it cannot
// be a member.
func memberHandle(i int, l limiter.Limiter) (*handle, error) {
	var h *handle
	switch l := l.(type) {
	case *TokenBucket:
		h = l.h
	case *FixedWindow:
		h = l.h
	case *SlidingLog:
		h = l.h
	case *keyLimiter:
		h = &l.h
	case nil:
		return nil, fmt.Errorf("redislimit.Chain: member %d is nil", i)
	}
	if h == nil || h.e.alg.mod == nil {
		return nil, fmt.Errorf("redislimit.Chain: member %d is a %T; members are this package's TokenBucket, FixedWindow and SlidingLog limiters and their keyed forms' For results (chain a semaphore or a Partitioned with limiter.Chain)", i, l)
	}
	return h, nil
}

// check checks that the members share one client and, on a sharded client,
// one hash tag, and that no limit is a member twice.
func (c *chainLimiter) check() error {
	if len(c.hs) > maxChainMembers {
		return fmt.Errorf("redislimit.Chain: %d members; a chain has at most %d (its script keeps every member's state in Lua locals, at most 200 in one function)", len(c.hs), maxChainMembers)
	}
	first := c.hs[0]
	_, single := first.e.o.Client.(*redis.Client)
	seen := map[string]int{}
	for i, h := range c.hs {
		if h.e.o.Client != first.e.o.Client {
			return fmt.Errorf("redislimit.Chain: member %d has another client than member 0; a chain's members decide in one script call, on one client", i)
		}
		if j, dup := seen[h.keys[0]]; dup {
			return fmt.Errorf("redislimit.Chain: members %d and %d are the same limit", j, i)
		}
		seen[h.keys[0]] = i
		if !single && keyTag(h.keys[0]) != keyTag(first.keys[0]) {
			return fmt.Errorf("redislimit.Chain: on Redis Cluster a chain's members must share a hash slot, and member 0's hash tag is {%s}, member %d's {%s}: give them one hash tag, "+
				`with Options.Key values that name it ("{acme}per-second", "{acme}per-day"), or For keys that do ("acme", "{acme}alice")`,
				keyTag(first.keys[0]), i, keyTag(h.keys[0]))
		}
	}
	return nil
}

// keyTag returns the hash tag of one of this package's Redis keys.
func keyTag(k string) string {
	i := strings.IndexByte(k, '{')
	j := strings.IndexByte(k, '}')
	return k[i+1 : j]
}

// build sets the chain's script arguments, keys, round trip and policy.
func (c *chainLimiter) build() {
	c.rc = c.hs[0].e.rc
	var ms []member
	c.policy = FailOpen
	var id strings.Builder
	for i, h := range c.hs {
		a := h.e.alg
		c.args = append(c.args, a.args...)
		ms = append(ms, member{a.mod, a.guard})
		c.keys = append(c.keys, h.keys...)
		c.max = min(c.max, a.max)
		c.rc.timeout = min(c.rc.timeout, h.e.rc.timeout)
		c.refused = append(c.refused, &ChainRefusal{Index: i, Member: c.ms[i]})
		c.hooked = c.hooked || h.e.o.OnDecision != nil
		switch h.e.o.OnError {
		case FailClosed:
			c.policy = FailClosed
		case UseFallback:
			if c.policy == FailOpen {
				c.policy = UseFallback
			}
		}
		id.WriteString(h.keys[0])
		id.WriteByte(0)
	}
	c.id = id.String()
	c.script = chainScript(ms)
}

// call runs one chain script call for batch and stores every request's
// result; each member keeps its quota.
func (c *chainLimiter) call(ctx context.Context, batch []*request) {
	args := make([]any, 0, len(c.args)+len(batch))
	args = append(args, c.args...)
	for _, r := range batch {
		args = append(args, r.arg)
	}
	v, err := c.rc.run(ctx, c.script, nil, c.keys, args...)
	var vals []int64
	if err == nil {
		vals, err = ints(nil, v, 1+2*len(batch)+2*len(c.hs))
	}
	if err != nil {
		for _, r := range batch {
			r.res = result{err: err}
		}
		return
	}
	now := vals[0]
	q := vals[1+2*len(batch):]
	for j, h := range c.hs {
		h.setQuota(result{now: now, quota: h.e.alg.quota(q[2*j], q[2*j+1])})
	}
	for i, r := range batch {
		wait, who := vals[1+2*i], vals[2+2*i]
		r.res = result{now: now, granted: who == 0, wait: time.Duration(wait) * time.Microsecond, who: int(who) - 1}
	}
}

// ask gets one chain decision, and reports it to each member's
// Options.OnDecision.
func (c *chainLimiter) ask(ctx context.Context, arg string) result {
	if !c.hooked {
		return c.fl.decide(ctx, c.id, c, arg)
	}
	start := time.Now()
	res := c.fl.decide(ctx, c.id, c, arg)
	info := DecisionInfo{Duration: time.Since(start), Err: res.err, Answer: c.policy.answer(res.err)}
	for _, h := range c.hs {
		if hook := h.e.o.OnDecision; hook != nil {
			hook(info)
		}
	}
	return res
}

// closed returns ErrClosed when a member is closed.
func (c *chainLimiter) closed() error {
	for _, h := range c.hs {
		if h.e.closed.Load() {
			return ErrClosed
		}
	}
	return nil
}

// refuseAtOnce refuses what needs no round trip.
func (c *chainLimiter) refuseAtOnce(n int) error {
	switch {
	case n < 0:
		return limiter.ErrInvalidCount
	case int64(n) > c.max:
		return limiter.ErrExceedsLimit
	}
	return c.closed()
}

// TryAcquire takes n permits from every member if all have them now, in
// one script call, or none.
func (c *chainLimiter) TryAcquire(n int) limiter.Lease {
	if err := c.refuseAtOnce(n); err != nil {
		c.count(false, -1)
		return limiter.Denied(err, 0)
	}
	if c.waiters.Load() > 0 {
		c.count(false, -1)
		return limiter.Denied(limiter.ErrLimited, 0)
	}
	res := c.ask(context.Background(), strconv.Itoa(n))
	if res.err != nil {
		l := c.onError(n, res.err)
		c.count(l.Granted(), -1)
		return l
	}
	c.count(res.granted, res.who)
	if res.granted {
		return limiter.NewLease(n, &chainLease{c: c, at: res.now})
	}
	return limiter.Denied(c.refused[res.who], res.wait)
}

// Acquire waits until every member can grant n permits and takes them from
// all, or until ctx ends or a member is closed.
func (c *chainLimiter) Acquire(ctx context.Context, n int) (limiter.Lease, error) {
	if ctx == nil {
		panic("redislimit: nil Context")
	}
	err := c.refuseAtOnce(n)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		c.count(false, -1)
		return limiter.Denied(err, 0), err
	}
	arg := strconv.Itoa(n)
	c.waiters.Add(1)
	defer c.waiters.Add(-1)
	for attempt := 0; ; attempt++ {
		res := c.ask(ctx, arg)
		if res.err != nil {
			l, err := c.onErrorWait(ctx, n, res.err)
			c.count(l.Granted(), -1)
			return l, err
		}
		if res.granted {
			c.count(true, -1)
			return limiter.NewLease(n, &chainLease{c: c, at: res.now}), nil
		}
		if err := pause(ctx, n, res.wait, attempt, c.sleep); err != nil {
			c.count(false, res.who)
			return limiter.Denied(err, res.wait), err
		}
	}
}

// sleep waits d, or until ctx ends or one of the first four members is
// closed (a later one's Close is seen when the chain asks again).
func (c *chainLimiter) sleep(ctx context.Context, d time.Duration) error {
	var done [4]<-chan struct{}
	for i, h := range c.hs[:min(len(c.hs), len(done))] {
		done[i] = h.e.done
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	case <-done[0]:
	case <-done[1]:
	case <-done[2]:
	case <-done[3]:
	}
	return c.closed()
}

// count counts a decision in the members' Stats: a grant in every member's,
// a refusal in the refusing member's (every member's when who < 0).
func (c *chainLimiter) count(granted bool, who int) {
	for i, h := range c.hs {
		if granted {
			h.e.granted.Add(1)
		} else if who < 0 || who == i {
			h.e.rejected.Add(1)
		}
	}
}

// onError applies the chain's error policy to a TryAcquire.
func (c *chainLimiter) onError(n int, cause error) limiter.Lease {
	l, _ := onError(context.Background(), false, c.policy, c.fallback(), n, cause)
	return l
}

// onErrorWait applies the chain's error policy to an Acquire.
func (c *chainLimiter) onErrorWait(ctx context.Context, n int, cause error) (limiter.Lease, error) {
	return onError(ctx, true, c.policy, c.fallback(), n, cause)
}

// fallback is the members' fallbacks as one limiter (nil unless the
// chain's policy is UseFallback).
func (c *chainLimiter) fallback() limiter.Limiter {
	if c.policy != UseFallback {
		return nil
	}
	var fs []limiter.Limiter
	for _, h := range c.hs {
		if h.e.o.OnError == UseFallback {
			fs = append(fs, h.e.o.Fallback)
		}
	}
	if len(fs) == 1 {
		return fs[0]
	}
	return limiter.Chain(fs...)
}

// Quota returns the quota of the member with the fewest permits remaining
// (at this process's last decision), as limiter.Chain's does.
func (c *chainLimiter) Quota() limiter.Quota {
	var q limiter.Quota
	for i, h := range c.hs {
		if mq := h.quota(); i == 0 || mq.Remaining < q.Remaining {
			q = mq
		}
	}
	return q
}

// AppendQuotas appends every member's quota to dst, in member order, and
// returns the extended slice: each member is a policy of its own (for the
// HTTP RateLimit-Policy field).
func (c *chainLimiter) AppendQuotas(dst []limiter.Quota) []limiter.Quota {
	for _, h := range c.hs {
		dst = append(dst, h.quota())
	}
	return dst
}

// chainLease is a granted chain lease, which can be settled.
type chainLease struct {
	c  *chainLimiter
	at int64 // Redis time of the grant, µs
}

// ReleasePermits does nothing: a rate limiter's permits are spent.
func (*chainLease) ReleasePermits(int) {}

// SettlePermits settles the grant in every member, in one round trip; see
// limiter.Settler and the package doc, Settling.
func (l *chainLease) SettlePermits(granted, actual int) {
	l.c.fl.decide(context.Background(), l.c.id, l.c, settleArg(granted, actual, l.at))
}
