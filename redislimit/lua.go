package redislimit

import (
	"fmt"

	"github.com/redis/go-redis/v9"
)

// The rate algorithms are Lua modules, so that one limiter's script and a
// Chain's script decide with the same code. A module is a function of k and
// a, the index of its first key in KEYS and of its first parameter in ARGV;
// it reads the limit's state at now (clamped so that a limit's clock never
// runs backwards: t) and returns a table with
//
//	can(p)       0 when p permits can be granted now (zero permits: when one
//	             could be), else the wait in µs until they could (> 0)
//	take(p)      takes p permits
//	settle(g, x, at)  settles a grant of g permits at Redis time at whose
//	             actual cost was x: gives back unused permits and books
//	             overuse as debt (see the algorithms' settle)
//	save()       writes the state back (with its expiry) and returns a and
//	             b, the state for Quota (see algorithm)
//	t            the limit's clock, µs
//
// A request is a permit count, or a settlement "s<g>,<x>,<at>".

// tbLua is a token bucket as the generic cell rate algorithm, in scaled
// integer units: one microsecond adds N units of capacity, one permit costs
// D units (Rate = N/D permits per µs, in lowest terms), and the bucket holds
// TOL = Burst·D. The state, one string "debt time", is the debt (units
// still owed) and the time it was computed at; it expires when the debt
// is paid. A missing state is a full bucket.
//
// Parameters: D, N, TOL, MAXEL = ceil(TOL/N) (µs to drain a full debt),
// GUARD. Every value stays below 2TOL+N < 2^53 (a settled overuse may add
// to the debt beyond TOL; a wait is then longer, never wrong).
//
// A settlement gives back unused permits only as far as they would not
// yet have refilled: the permits were held since the grant, and capacity
// that the bucket would have wasted while full must not come back. So the
// credit is (g-x)·D less what the bucket earned since the grant, N·(t-at),
// which keeps the debt at least that of the actual costs: the bound holds
// over them.
const tbLua = `
local function tb(k, a)
  local D, N, TOL, MAXEL, GUARD = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), ARGV[a + 4] == '1'
  local key = KEYS[k]
  local st = redis.call('GET', key)
  local m = {t = now}
  local debt, last = 0, nil
  if st then
    local x, y = string.match(st, '^(%d+) (%d+)$')
    debt, last = tonumber(x), tonumber(y)
  end
  if last == nil then
    debt = 0
    if GUARD then
      local s = started()
      if s ~= nil and m.t - s < MAXEL then debt = math.max(TOL - (m.t - s) * N, 0) end
    end
  else
    if m.t < last then m.t = last end
    local el = m.t - last
    if el * N >= debt then debt = 0 else debt = debt - el * N end
  end
  function m.can(p)
    local over = debt + math.max(p, 1) * D - TOL
    if over > 0 then return math.floor((over + N - 1) / N) end
    return 0
  end
  function m.take(p) debt = debt + p * D end
  function m.settle(g, x, at)
    if x > g then
      debt = debt + (x - g) * D
    else
      local credit = (g - x) * D - (m.t - at) * N
      if credit > 0 then debt = math.max(debt - credit, 0) end
    end
  end
  function m.save()
    if debt == 0 then
      if st then redis.call('DEL', key) end
    else
      redis.call('SET', key, string.format('%d %d', debt, m.t), 'PX', keepms(debt / N))
    end
    return debt, 0
  end
  return m
end
`

// fwLua counts permits in windows aligned to Redis's clock: [k·W, (k+1)·W)
// in microseconds since the Unix epoch, so every process agrees on them.
// The state, one string "start count time", is the current window's start
// and count and the last decision's time. A missing state is an empty
// window. A count over LIMIT (a settled overuse) carries its excess into
// the next windows, LIMIT a window.
//
// Parameters: W (µs), LIMIT, GUARD. A settlement gives back unused permits
// of a grant in the current window, and books overuse in it.
const fwLua = `
local function fw(k, a)
  local W, LIMIT, GUARD = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), ARGV[a + 2] == '1'
  local key = KEYS[k]
  local st = redis.call('GET', key)
  local m = {t = now}
  local s, c, last
  if st then
    local x, y, z = string.match(st, '^(%d+) (%d+) (%d+)$')
    s, c, last = tonumber(x), tonumber(y), tonumber(z)
  end
  if last ~= nil and m.t < last then m.t = last end
  local start = m.t - math.fmod(m.t, W)
  if s ~= start then
    if s ~= nil and c > LIMIT then c = math.max(c - LIMIT * ((start - s) / W), 0) else c = 0 end
    if s == nil and GUARD then
      local up = started()
      if up ~= nil and up > start then c = LIMIT end
    end
  end
  function m.can(p)
    if c + math.max(p, 1) > LIMIT then return start + W - m.t end
    return 0
  end
  function m.take(p) c = c + p end
  function m.settle(g, x, at)
    if x > g then
      c = c + x - g
    elseif at >= start then
      c = math.max(c - (g - x), 0)
    end
  end
  function m.save()
    redis.call('SET', key, string.format('%d %d %d', start, c, m.t), 'PX', keepms(start + W - m.t))
    return c, start + W - m.t
  end
  return m
end
`

// slLua is the strict log: a sorted set of grants (member "seq:permits",
// score the grant's time in µs; KEYS[k]) and a hash (KEYS[k+1]) with the
// permits in the log, the next sequence number and the newest grant's
// time. A grant at time a counts in every window [a, a+W); at t the log
// holds the grants after t-W. A request is granted when the log's permits
// plus its own are at most LIMIT; a refused one learns when enough of the
// oldest grants leave.
//
// Parameters: W (µs), LIMIT, GUARD. A settlement takes unused permits out
// of the grant's entries (those scored at its time), and books overuse as
// an entry at the grant's time, or at t when that has left the window.
const slLua = permitSet + `
local function sl(k, a)
  local W, LIMIT, GUARD = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), ARGV[a + 2] == '1'
  local LOG, ST = KEYS[k], KEYS[k + 1]
  local st = redis.call('HMGET', ST, 'n', 'q', 't', 'z')
  local m = {t = now}
  local tot, seq, last, newest = tonumber(st[1]), tonumber(st[2]), tonumber(st[3]), tonumber(st[4])
  if last == nil then
    tot, seq, newest = 0, 0, 0
    redis.call('DEL', LOG)
    if GUARD then
      local up = started()
      if up ~= nil and m.t - up < W then
        redis.call('ZADD', LOG, up, '0:' .. ARGV[a + 1])
        tot, newest = LIMIT, up
      end
    end
  else
    if m.t < last then m.t = last end
    tot = tot - reclaim(LOG, m.t - W)
  end
  local function waitfor(need)
    local freed, idx = 0, 0
    while true do
      local e = redis.call('ZRANGE', LOG, idx, idx + 63, 'WITHSCORES')
      if #e == 0 then return W end
      for j = 1, #e, 2 do
        freed = freed + permits(e[j])
        if freed >= need then return tonumber(e[j + 1]) + W - m.t end
      end
      idx = idx + 64
    end
  end
  local function add(at, p)
    seq = seq + 1
    redis.call('ZADD', LOG, at, string.format('%d:%d', seq, p))
    tot, newest = tot + p, math.max(newest, at)
  end
  function m.can(p)
    local need = math.max(p, 1)
    if tot + need > LIMIT then return waitfor(tot + need - LIMIT) end
    return 0
  end
  function m.take(p)
    if p > 0 then add(m.t, p) end
  end
  function m.settle(g, x, at)
    if x > g then
      if at <= m.t - W then at = m.t end
      add(at, x - g)
      return
    end
    local back = g - x
    for _, e in ipairs(redis.call('ZRANGEBYSCORE', LOG, at, at)) do
      if back == 0 then break end
      local n = permits(e)
      local d = math.min(n, back)
      redis.call('ZREM', LOG, e)
      if n > d then redis.call('ZADD', LOG, at, string.match(e, '^(%d+):') .. ':' .. string.format('%d', n - d)) end
      tot, back = tot - d, back - d
    end
  end
  function m.save()
    local left = 0
    if tot ~= 0 then left = newest + W - m.t end
    save(LOG, ST, tot, left, 'n', tot, 'q', seq, 't', m.t, 'z', newest)
    return tot, left
  end
  return m
end
`

// settleArg is the script argument of a settlement of g permits granted at
// Redis time at (µs), whose actual cost was x.
func settleArg(g, x int, at int64) string {
	return fmt.Sprintf("s%d,%d,%d", g, x, at)
}

// luaRequest parses a request argument: a permit count, or a settlement.
const luaRequest = `
local function request(a)
  if string.byte(a) == 115 then
    local g, x, at = string.match(a, '^s(%d+),(%d+),(%d+)$')
    return nil, tonumber(g), tonumber(x), tonumber(at)
  end
  return tonumber(a)
end
`

// singleScript is the script of one limit of a module that takes np
// parameters: {t, a, b, r1, …, rk}, ri = 0 for a grant (or a settlement),
// else the wait in µs.
func singleScript(module, name string, np int) *redis.Script {
	return newScript(module + luaRequest + fmt.Sprintf(`
local m = %s(1, 1)
local out = {0, 0, 0}
for i = %d, #ARGV do
  local p, g, x, at = request(ARGV[i])
  local w = 0
  if p == nil then
    m.settle(g, x, at)
  else
    w = m.can(p)
    if w == 0 then m.take(p) end
  end
  out[#out + 1] = w
end
out[2], out[3] = m.save()
out[1] = m.t
return out
`, name, np+1))
}

var (
	tbScript = singleScript(tbLua, "tb", 5)
	fwScript = singleScript(fwLua, "fw", 3)
	slScript = singleScript(slLua, "sl", 3)
)

// chainDriver decides for a Chain: every member at one instant, all or
// nothing. ARGV: the member count, then each member's module name, its
// parameter count and its parameters; then the requests. KEYS: each
// member's keys in turn (one, or two for a strict log). Reply: {now, then
// per request its wait in µs (0: granted) and the member whose wait it is
// (the first of those with the longest wait; 0 when granted), then per
// member a and b}. mods names the modules the script defines.
const chainDriver = luaRequest + `
local nkeys = {tb = 1, fw = 1, sl = 2}
local ms, a, k = {}, 2, 1
for j = 1, tonumber(ARGV[1]) do
  local kind = ARGV[a]
  ms[j] = mods[kind](k, a + 2)
  k, a = k + nkeys[kind], a + 2 + tonumber(ARGV[a + 1])
end
local out = {now}
for i = a, #ARGV do
  local p, g, x, at = request(ARGV[i])
  local wait, who = 0, 0
  if p == nil then
    for _, m in ipairs(ms) do m.settle(g, x, at) end
  else
    for j, m in ipairs(ms) do
      local w = m.can(p)
      if w > wait then wait, who = w, j end
    end
    if who == 0 then
      for _, m in ipairs(ms) do m.take(p) end
    end
  end
  out[#out + 1] = wait
  out[#out + 1] = who
end
for _, m in ipairs(ms) do
  local x, y = m.save()
  out[#out + 1] = x
  out[#out + 1] = y
end
return out
`

// chainScripts are the chain scripts by the modules they define (a set of
// the rate algorithms, bit i for chainModules[i]): a script defines only
// the modules its members use, since Lua makes every function a script
// defines anew at every call.
var chainScripts = func() (ss [8]*redis.Script) {
	for set := 1; set < len(ss); set++ {
		src, mods := "", "local mods = {"
		for i, m := range chainModules {
			if set&(1<<i) != 0 {
				src += m.lua
				mods += m.name + " = " + m.name + ", "
			}
		}
		ss[set] = newScript(src + mods + "}\n" + chainDriver)
	}
	return ss
}()

// chainModules are the modules a chain's script may define.
var chainModules = [...]struct{ name, lua string }{{"tb", tbLua}, {"fw", fwLua}, {"sl", slLua}}

// chainScript returns the chain script that defines the modules named in
// mods.
func chainScript(mods []string) *redis.Script {
	set := 0
	for _, name := range mods {
		for i, m := range chainModules {
			if m.name == name {
				set |= 1 << i
			}
		}
	}
	return chainScripts[set]
}
