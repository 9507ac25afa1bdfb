package redislimit

import (
	"time"

	"github.com/rategate/rategate/limiter"
)

// fwScript counts permits in windows aligned to Redis's clock: [k·W, (k+1)·W)
// in microseconds since the Unix epoch, so every process agrees on them.
// The state, one string "start count time", is the current window's start
// and count and the last decision's time. A missing state is an empty
// window.
//
// ARGV: W (µs), LIMIT, GUARD, then each request's permits.
var fwScript = newScript(`
local W, LIMIT, GUARD = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local st = redis.call('GET', KEYS[1])
local s, c, last
if st then
  local a, b, d = string.match(st, '^(%d+) (%d+) (%d+)$')
  s, c, last = tonumber(a), tonumber(b), tonumber(d)
end
if last ~= nil and now < last then now = last end
local start = now - math.fmod(now, W)
if s ~= start then
  c = 0
  if s == nil and GUARD then
    local up = started(now)
    if up ~= nil and up > start then c = LIMIT end
  end
end
local out = {now, 0, start + W - now}
for i = 4, #ARGV do
  local p = tonumber(ARGV[i])
  if c + p <= LIMIT then
    c = c + p
    out[#out + 1] = 0
  else
    out[#out + 1] = start + W - now
  end
end
out[2] = c
redis.call('SET', KEYS[1], string.format('%.0f %.0f %.0f', start, c, now), 'PX', math.floor((start + W - now) / 1000) + 2)
return out
`)

// windowMicros checks a window's length: whole microseconds, and below
// 2^53 µs less the current Unix time in µs.
func windowMicros(w time.Duration) (int64, error) {
	if w <= 0 {
		return 0, optErr("Window", "must be positive, got %v", w)
	}
	if w%time.Microsecond != 0 {
		return 0, optErr("Window", "must be a whole number of microseconds (Redis's TIME resolution), got %v", w)
	}
	us := int64(w / time.Microsecond)
	if us >= maxExact/2 {
		return 0, optErr("Window", "is too long for exact arithmetic in Redis's Lua, got %v", w)
	}
	return us, nil
}

func validLimit(n int) error {
	if n <= 0 {
		return optErr("Limit", "must be positive, got %d", n)
	}
	if int64(n) >= maxExact/4 {
		return optErr("Limit", "must be below 2^51 for exact arithmetic in Redis's Lua, got %d", n)
	}
	return nil
}

type fwAlg struct {
	w, limit int64
	guard    bool
}

func (a *fwAlg) kind() string                { return "fw" }
func (a *fwAlg) suffixes() []string          { return []string{""} }
func (a *fwAlg) script() *script             { return fwScript }
func (a *fwAlg) maxPermits() int64           { return a.limit }
func (a *fwAlg) args() []any                 { return []any{a.w, a.limit, boolArg(a.guard)} }
func (a *fwAlg) retry(x int64) time.Duration { return time.Duration(x) * time.Microsecond }

// quota reads the window's count and the µs until it ends.
func (a *fwAlg) quota(count, left int64) limiter.Quota {
	q := limiter.Quota{Limit: a.limit, Window: time.Duration(a.w) * time.Microsecond, Remaining: a.limit - count}
	if count > 0 {
		q.Reset = time.Duration(left) * time.Microsecond
	}
	return q
}

// FixedWindow counts permits in consecutive windows aligned to Redis's
// clock (multiples of Window since the Unix epoch), shared by every process
// using the same Options.Key: at most Limit permits in each aligned window,
// across all of them (up to 2·Limit across a window boundary; use
// SlidingLog for at most Limit in every window).
type FixedWindow struct {
	core
}

// NewFixedWindow returns a fixed window shared through Redis, or an
// *limiter.OptionError naming the first invalid option: Limit and Window
// must be positive, and Window a whole number of microseconds.
func NewFixedWindow(o Options, opts limiter.FixedWindowOptions) (*FixedWindow, error) {
	a, err := newFWAlg(o, opts)
	if err != nil {
		return nil, err
	}
	e := newEngine(o, a, opts.Queue)
	return &FixedWindow{core{e: e, h: e.handle("", false)}}, nil
}

func newFWAlg(o Options, opts limiter.FixedWindowOptions) (*fwAlg, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := validLimit(opts.Limit); err != nil {
		return nil, err
	}
	w, err := windowMicros(opts.Window)
	if err != nil {
		return nil, err
	}
	if err := validQueue(opts.Queue); err != nil {
		return nil, err
	}
	return &fwAlg{w: w, limit: int64(opts.Limit), guard: o.GuardRestarts}, nil
}

// slScript is the strict log: a sorted set of grants (member "seq:permits",
// score the grant's time in µs) and a hash with the permits in the log, the
// next sequence number and the newest grant's time. A grant at time a
// counts in every window [a, a+W); at now the log holds the grants after
// now-W. A request is granted when the log's permits plus its own are at
// most LIMIT; a refused one learns when enough of the oldest grants leave.
//
// ARGV: W (µs), LIMIT, GUARD, then each request's permits.
var slScript = newScript(`
local W, LIMIT, GUARD = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local LOG, ST = KEYS[1], KEYS[2]
local st = redis.call('HMGET', ST, 'n', 'q', 't', 'z')
local tot, seq, last, newest = tonumber(st[1]), tonumber(st[2]), tonumber(st[3]), tonumber(st[4])
local function permits(m) return tonumber(string.match(m, ':(%d+)$')) end
if last == nil then
  tot, seq, newest = 0, 0, 0
  redis.call('DEL', LOG)
  if GUARD then
    local up = started(now)
    if up ~= nil and now - up < W then
      redis.call('ZADD', LOG, up, '0:' .. ARGV[2])
      tot, newest = LIMIT, up
    end
  end
else
  if now < last then now = last end
  local old = redis.call('ZRANGEBYSCORE', LOG, '-inf', now - W)
  if #old > 0 then
    for _, m in ipairs(old) do tot = tot - permits(m) end
    redis.call('ZREMRANGEBYSCORE', LOG, '-inf', now - W)
  end
end
local function waitfor(need)
  local freed, idx = 0, 0
  while true do
    local e = redis.call('ZRANGE', LOG, idx, idx + 63, 'WITHSCORES')
    if #e == 0 then return W end
    for j = 1, #e, 2 do
      freed = freed + permits(e[j])
      if freed >= need then return tonumber(e[j + 1]) + W - now end
    end
    idx = idx + 64
  end
end
local out = {now, 0, 0}
for i = 4, #ARGV do
  local p = tonumber(ARGV[i])
  if tot + p <= LIMIT then
    if p > 0 then
      seq = seq + 1
      redis.call('ZADD', LOG, now, string.format('%.0f', seq) .. ':' .. ARGV[i])
      tot, newest = tot + p, now
    end
    out[#out + 1] = 0
  else
    out[#out + 1] = waitfor(tot + p - LIMIT)
  end
end
out[2] = tot
if tot == 0 then
  redis.call('DEL', LOG, ST)
else
  out[3] = newest + W - now
  redis.call('HSET', ST, 'n', tot, 'q', seq, 't', now, 'z', newest)
  local ms = math.floor((newest + W - now) / 1000) + 2
  redis.call('PEXPIRE', LOG, ms)
  redis.call('PEXPIRE', ST, ms)
end
return out
`)

type slAlg struct {
	w, limit int64
	guard    bool
}

func (a *slAlg) kind() string                { return "sl" }
func (a *slAlg) suffixes() []string          { return []string{":log", ":st"} }
func (a *slAlg) script() *script             { return slScript }
func (a *slAlg) maxPermits() int64           { return a.limit }
func (a *slAlg) args() []any                 { return []any{a.w, a.limit, boolArg(a.guard)} }
func (a *slAlg) retry(x int64) time.Duration { return time.Duration(x) * time.Microsecond }

// quota reads the permits in the log and the µs until the newest leaves it.
func (a *slAlg) quota(total, reset int64) limiter.Quota {
	return limiter.Quota{
		Limit: a.limit, Window: time.Duration(a.w) * time.Microsecond,
		Remaining: a.limit - total, Reset: time.Duration(reset) * time.Microsecond,
	}
}

func newSLAlg(o Options, opts limiter.SlidingLogOptions) (*slAlg, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := validLimit(opts.Limit); err != nil {
		return nil, err
	}
	w, err := windowMicros(opts.Window)
	if err != nil {
		return nil, err
	}
	if err := validQueue(opts.Queue); err != nil {
		return nil, err
	}
	return &slAlg{w: w, limit: int64(opts.Limit), guard: o.GuardRestarts}, nil
}

// SlidingLog is the strict limiter shared through Redis: a log of every
// grant in the last Window, so that across all processes using the same
// Options.Key at most Limit permits are granted in ANY window of length
// Window, at every instant of Redis's clock. Redis holds one log entry per
// grant in the window (at most Limit entries).
type SlidingLog struct {
	core
}

// NewSlidingLog returns a strict log shared through Redis, or an
// *limiter.OptionError naming the first invalid option: Limit and Window
// must be positive, and Window a whole number of microseconds.
func NewSlidingLog(o Options, opts limiter.SlidingLogOptions) (*SlidingLog, error) {
	a, err := newSLAlg(o, opts)
	if err != nil {
		return nil, err
	}
	e := newEngine(o, a, opts.Queue)
	return &SlidingLog{core{e: e, h: e.handle("", false)}}, nil
}
