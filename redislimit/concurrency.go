package redislimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/limiter"
)

// ccReply defines reply(first, decide), the reply of a semaphore script
// deciding a batch of requests (see algorithm): {now, 0, 0, r1, …, rk},
// where ri = decide(ARGV[first+i-1]), called on the requests in order; the
// script then sets a and b.
const ccReply = `
local function reply(first, decide)
  local out = {now, 0, 0}
  for i = first, #ARGV do out[#out + 1] = decide(ARGV[i]) end
  return out
end
`

// ccScript grants semaphore permits. The holders are a sorted set (member
// "lease-id:permits", score the lease's expiry in µs) beside a hash with the
// permits held and the last decision's time. Expired leases are reclaimed
// before every decision. A lease already held (a request repeated after a
// lost reply) is not counted twice.
//
// ARGV: TTL (µs), LIMIT, GUARD, then each request's member.
var ccScript = newScript(luaServer + permitSet + ccReply + `
local TTL, LIMIT, GUARD = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local HOLD, ST = KEYS[1], KEYS[2]
local st = redis.call('HMGET', ST, 'u', 't')
local used, last = tonumber(st[1]), tonumber(st[2])
if last == nil then
  used = 0
  redis.call('DEL', HOLD)
  if GUARD then
    local up = started()
    if up ~= nil and now - up < TTL then
      redis.call('ZADD', HOLD, up + TTL, '~:' .. ARGV[2])
      used = LIMIT
    end
  end
else
  if now < last then now = last end
  used = used - reclaim(HOLD, now)
end
local out = reply(4, function(m)
  local p = permits(m)
  if redis.call('ZSCORE', HOLD, m) then return 0 end
  if used + math.max(p, 1) > LIMIT then return -1 end
  if p == 0 then return 0 end -- granted when one could be; holds nothing
  redis.call('ZADD', HOLD, now + TTL, m)
  used = used + p
  return 0
end)
out[2] = used
save(HOLD, ST, used, TTL, 'u', used, 't', now)
return out
`)

// ccReleaseScript gives leases back. ARGV: the members.
var ccReleaseScript = newScript(permitSet + `
local HOLD, ST = KEYS[1], KEYS[2]
local used = tonumber(redis.call('HGET', ST, 'u'))
if used == nil then return {now, 0, 0} end
for i = 1, #ARGV do
  if redis.call('ZREM', HOLD, ARGV[i]) == 1 then
    used = used - permits(ARGV[i])
  end
end
if used <= 0 then
  redis.call('DEL', HOLD, ST)
  used = 0
else
  redis.call('HSET', ST, 'u', used)
end
return {now, used, 0}
`)

// ccRenewScript extends the leases still held to now+TTL and answers, per
// member, 1 if it was renewed and 0 if it had expired or was reclaimed.
// ARGV: TTL (µs), then the members.
var ccRenewScript = newScript(permitSet + ccReply + `
local TTL = tonumber(ARGV[1])
local HOLD, ST = KEYS[1], KEYS[2]
local last = tonumber(redis.call('HGET', ST, 't'))
if last ~= nil and now < last then now = last end
local any = false
local out = reply(2, function(m)
  local s = tonumber(redis.call('ZSCORE', HOLD, m) or nil)
  if s == nil or s <= now then return 0 end
  redis.call('ZADD', HOLD, 'XX', now + TTL, m)
  any = true
  return 1
end)
if any then
  expire(HOLD, ST, TTL)
end
return out
`)

// ccState is a semaphore's leases held by this process, renewed by one
// goroutine that runs only while some are held.
type ccState struct {
	prefix string
	seq    atomic.Uint64
	ttl    time.Duration

	mu       sync.Mutex
	held     map[string]*ccLease
	running  bool
	kick     chan struct{}
	released chan struct{} // closed and replaced at every release in this process
	wg       sync.WaitGroup
}

// ccLease is one granted lease; its Release gives the permits back.
type ccLease struct {
	c      *ccState
	e      *engine
	h      *handle
	member string
	done   atomic.Bool
}

func newCCState(ttl time.Duration) *ccState {
	var b [8]byte
	rand.Read(b[:])
	return &ccState{
		prefix: hex.EncodeToString(b[:]), ttl: ttl,
		held: make(map[string]*ccLease), kick: make(chan struct{}, 1), released: make(chan struct{}),
	}
}

// member names a new lease of n permits.
func (c *ccState) member(n int) string {
	return c.prefix + "." + strconv.FormatUint(c.seq.Add(1), 36) + ":" + strconv.Itoa(n)
}

// hold records a granted lease and starts renewing it.
func (c *ccState) hold(e *engine, h *handle, n int, member string) limiter.Lease {
	l := &ccLease{c: c, e: e, h: h, member: member}
	c.mu.Lock()
	c.held[member] = l
	if !c.running && !e.closed.Load() {
		c.running = true
		c.wg.Add(1)
		go c.renew(e)
	}
	c.mu.Unlock()
	return limiter.NewLease(n, l)
}

// ReleasePermits gives the lease back in Redis, once. A release that fails
// (Redis unreachable) leaves the permits to come back when the lease's TTL
// runs out, as renewal has stopped.
func (l *ccLease) ReleasePermits(int) {
	if !l.done.CompareAndSwap(false, true) {
		return
	}
	c := l.c
	c.mu.Lock()
	delete(c.held, l.member)
	empty := len(c.held) == 0
	close(c.released)
	c.released = make(chan struct{})
	c.mu.Unlock()
	if empty {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	v, err := l.e.rc.run(context.Background(), ccReleaseScript, nil, l.h.keys, l.member)
	if err == nil && l.e.onRelease != nil {
		if vals, err := ints(nil, v, 3); err == nil {
			l.e.onRelease(vals[0])
		}
	}
}

func (c *ccState) releasedChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.released
}

// renew extends the held leases every TTL/3 and returns when none is held
// or the limiter is closed.
func (c *ccState) renew(e *engine) {
	defer c.wg.Done()
	t := time.NewTicker(c.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.kick:
		case <-e.done:
			c.mu.Lock()
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		if len(c.held) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		byTag := make(map[string][]*ccLease)
		for _, l := range c.held {
			byTag[l.h.keys[0]] = append(byTag[l.h.keys[0]], l)
		}
		c.mu.Unlock()
		for _, ls := range byTag {
			c.renewOne(e, ls)
		}
	}
}

// renewOne renews one limit's leases; those Redis no longer holds are
// forgotten (a later Release of them does nothing in Redis).
func (c *ccState) renewOne(e *engine, ls []*ccLease) {
	args := make([]any, 0, len(ls)+1)
	args = append(args, int64(c.ttl/time.Microsecond))
	for _, l := range ls {
		args = append(args, l.member)
	}
	v, err := e.rc.run(context.Background(), ccRenewScript, nil, ls[0].h.keys, args...)
	if err != nil {
		return
	}
	vals, err := ints(nil, v, 3+len(ls))
	if err != nil {
		return
	}
	if e.onRenew != nil {
		e.onRenew(vals[0])
	}
	c.mu.Lock()
	for i, l := range ls {
		if vals[3+i] == 0 {
			delete(c.held, l.member)
		}
	}
	c.mu.Unlock()
}

func (c *ccState) stop() {
	c.wg.Wait()
}

// Concurrency is a semaphore shared through Redis by every process using
// the same Options.Key: at every instant of Redis's clock, the permits held
// by unexpired leases number at most Limit. Lease.Release gives them back.
// A held lease is renewed every LeaseTTL/3 (one goroutine per limiter, only
// while leases are held); a holder that crashes, or that cannot reach
// Redis for LeaseTTL, loses its lease, and its permits come back LeaseTTL
// after its last renewal, not before.
//
// Acquire waits for a release in this process or, as releases by other
// processes are not announced, asks again after a jittered exponential
// backoff from 1ms to 64ms.
type Concurrency struct {
	core
}

// NewConcurrency returns a semaphore shared through Redis, or an
// *limiter.OptionError naming the first invalid option. The lease TTL is
// Options.LeaseTTL (DefaultLeaseTTL when zero).
func NewConcurrency(o Options, opts limiter.ConcurrencyOptions) (*Concurrency, error) {
	return newLimiter[Concurrency](newCCEngine(o, opts))
}

func newCCEngine(o Options, opts limiter.ConcurrencyOptions) (*engine, error) {
	ttl := o.leaseTTL()
	e, err := newEngine(o, opts.Queue, true, func() (algorithm, error) {
		if err := validLimit(opts.Limit); err != nil {
			return algorithm{}, err
		}
		limit := int64(opts.Limit)
		a := counting("cc", nil, ccScript, ":hold", limit, int64(ttl/time.Microsecond), o.GuardRestarts)
		// A lease's TTL is no window: the semaphore's Quota has neither a
		// Window nor a Reset. (Its script refuses with -1 only: no known wait.)
		a.quota = func(used, _ int64) limiter.Quota { return limiter.Quota{Limit: limit, Remaining: limit - used} }
		return a, nil
	})
	if err != nil {
		return nil, err
	}
	// Checked after the queue, the order NewConcurrency reports them in.
	if ttl%time.Microsecond != 0 {
		return nil, optErr("LeaseTTL", "must be a whole number of microseconds, got %v", ttl)
	}
	e.cc = newCCState(ttl)
	return e, nil
}
