package redislimit

import (
	"time"

	"github.com/redis/go-redis/v9"

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
    local up = started()
    if up ~= nil and up > start then c = LIMIT end
  end
end
local out = reply(4, function(a)
  local p = tonumber(a)
  if c + math.max(p, 1) > LIMIT then return start + W - now end
  c = c + p
  return 0
end)
out[2], out[3] = c, start + W - now
redis.call('SET', KEYS[1], string.format('%.0f %.0f %.0f', start, c, now), 'PX', keepms(start + W - now))
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

// counting returns the algorithm of a limit that its script s keeps in
// Redis as a count of permits: the fixed window, the strict log and the
// semaphore. Their scripts take the period (the window, or the lease TTL;
// µs), the limit and the restart guard as their first arguments, and answer
// a, the permits counted, and b, the µs until that count is back to zero; a
// refusal's wait is in µs.
func counting(kind string, s *redis.Script, suffix string, limit, period int64, guard bool) algorithm {
	window := time.Duration(period) * time.Microsecond
	return algorithm{
		kind: kind, suffix: suffix, two: suffix != "", script: s, max: limit,
		args: []any{period, limit, boolArg(guard)},
		quota: func(used, left int64) limiter.Quota {
			q := limiter.Quota{Limit: limit, Window: window, Remaining: limit - used}
			if used > 0 {
				q.Reset = time.Duration(left) * time.Microsecond
			}
			return q
		},
		retry: func(x int64) time.Duration { return time.Duration(x) * time.Microsecond },
	}
}

// windowAlg checks the options of a fixed window or a strict log (they are
// the same) and returns its algorithm.
func windowAlg(kind string, s *redis.Script, suffix string, limit int, window time.Duration, guard bool) (algorithm, error) {
	if err := validLimit(limit); err != nil {
		return algorithm{}, err
	}
	w, err := windowMicros(window)
	if err != nil {
		return algorithm{}, err
	}
	return counting(kind, s, suffix, int64(limit), w, guard), nil
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
	return newLimiter[FixedWindow](newFWEngine(o, opts))
}

func newFWEngine(o Options, opts limiter.FixedWindowOptions) (*engine, error) {
	return newEngine(o, opts.Queue, false, func() (algorithm, error) {
		return windowAlg("fw", fwScript, "", opts.Limit, opts.Window, o.GuardRestarts)
	})
}

// slScript is the strict log: a sorted set of grants (member "seq:permits",
// score the grant's time in µs) and a hash with the permits in the log, the
// next sequence number and the newest grant's time. A grant at time a
// counts in every window [a, a+W); at now the log holds the grants after
// now-W. A request is granted when the log's permits plus its own are at
// most LIMIT; a refused one learns when enough of the oldest grants leave.
//
// ARGV: W (µs), LIMIT, GUARD, then each request's permits.
var slScript = newScript(permitSet + `
local W, LIMIT, GUARD = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3] == '1'
local LOG, ST = KEYS[1], KEYS[2]
local st = redis.call('HMGET', ST, 'n', 'q', 't', 'z')
local tot, seq, last, newest = tonumber(st[1]), tonumber(st[2]), tonumber(st[3]), tonumber(st[4])
if last == nil then
  tot, seq, newest = 0, 0, 0
  redis.call('DEL', LOG)
  if GUARD then
    local up = started()
    if up ~= nil and now - up < W then
      redis.call('ZADD', LOG, up, '0:' .. ARGV[2])
      tot, newest = LIMIT, up
    end
  end
else
  if now < last then now = last end
  tot = tot - reclaim(now - W)
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
local out = reply(4, function(a)
  local p = tonumber(a)
  local need = math.max(p, 1) -- zero permits: granted when one could be
  if tot + need > LIMIT then return waitfor(tot + need - LIMIT) end
  if p > 0 then
    seq = seq + 1
    redis.call('ZADD', LOG, now, string.format('%.0f', seq) .. ':' .. a)
    tot, newest = tot + p, now
  end
  return 0
end)
out[2] = tot
if tot ~= 0 then out[3] = newest + W - now end
save(tot, out[3], 'n', tot, 'q', seq, 't', now, 'z', newest)
return out
`)

func newSLEngine(o Options, opts limiter.SlidingLogOptions) (*engine, error) {
	return newEngine(o, opts.Queue, false, func() (algorithm, error) {
		return windowAlg("sl", slScript, ":log", opts.Limit, opts.Window, o.GuardRestarts)
	})
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
	return newLimiter[SlidingLog](newSLEngine(o, opts))
}
