package redislimit

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// luaModule is one rate algorithm in Lua, written once as fragments from
// which the script of one limit (singleScript) and the script of a Chain of
// any members (chainScript) are put together as straight-line code.
//
// A script is straight-line because of what a script costs Redis: every
// function and table a script makes is made anew at every call and
// collected later: modules of closures over a table of state cost a token
// bucket's decision about 0.7 µs of Redis's time (INFO commandstats), a
// sixth of it, and a chain's more for every member. A generated script
// makes none per member (TestRedisScriptCost in bench/ measures the
// scripts).
//
// In a fragment, "@" stands for the member's number (1 for the only limit
// of a single script), so that a member's locals are its own (debt@ becomes
// debt1, debt2, …); "@a" stands for the index in ARGV of its first
// parameter, "@k" for the index in KEYS of its first key, and "@g" for
// true when the limit guards against restarts (Options.GuardRestarts),
// false otherwise: the guard's code then never runs, and the script
// leaves out the helpers it calls (luaServer).
//
//	load    reads the member's state at now into its locals, among them
//	        t@, its clock: now, or the latest time its state was written
//	        at when that is later, so that a limit's clock never runs
//	        backwards.
//	can     sets w, which is 0, to the wait in µs until p permits could be
//	        granted (for p == 0: until one could), when they cannot now.
//	take    takes p permits (can said they can be granted).
//	settle  settles a grant of g permits at Redis time at whose actual cost
//	        was x: gives back unused permits and books overuse as debt
//	        (see each algorithm).
//	save    writes the state back with its expiry, and sets qa and qb, the
//	        state for Quota (see algorithm).
//
// Every fragment but load runs in a block of its own, so its locals are
// its own; r, p, g, x, at, w, qa and qb are the script's, which a
// fragment must not declare. helpers is Lua that the fragments call, defined once in
// a script.
type luaModule struct {
	name                          string // names the module in a chain's shape
	params, keys                  int    // its parameters in ARGV, its keys in KEYS
	guardParams                   int    // its parameters after those, when it guards
	helpers                       string
	load, can, take, settle, save string

	scripts [2]*redis.Script // the script of one limit, without and with the guard
}

// newModule returns m with its scripts of one limit.
func newModule(m luaModule) *luaModule {
	for g := range m.scripts {
		m.scripts[g] = newScript(singleSource(&m, g == 1))
	}
	return &m
}

// script returns the script of one limit of m.
func (m *luaModule) script(guard bool) *redis.Script {
	if guard {
		return m.scripts[1]
	}
	return m.scripts[0]
}

// expand returns fragment f of member j, whose first parameter is ARGV[a]
// and first key KEYS[k].
func expand(f string, j, a, k int, guard bool) string {
	return strings.NewReplacer("@a", strconv.Itoa(a), "@k", strconv.Itoa(k), "@g", strconv.FormatBool(guard),
		"@", strconv.Itoa(j)).Replace(f)
}

// tbModule is a token bucket as the generic cell rate algorithm, in scaled
// integer units: one microsecond adds N units of capacity, one permit costs
// D units (Rate = N/D permits per µs, in lowest terms), and the bucket holds
// TOL = Burst·D. The state, one string "debt time", is the debt (units
// still owed) and the time it was computed at; it expires when the debt
// is paid, and a bucket whose debt is paid leaves nothing in Redis. A
// missing state is a full bucket.
//
// Parameters: D, N, TOL; guarding, MAXEL = ceil(TOL/N) (µs to drain a
// full debt) too. Every value stays below 2TOL+N < 2^53 (a settled overuse may add
// to the debt beyond TOL; a wait is then longer, never wrong).
//
// A settlement gives back unused permits only as far as they would not
// yet have refilled: the permits were held since the grant, and capacity
// that the bucket would have wasted while full must not come back. So the
// credit is (g-x)·D less what the bucket earned since the grant, N·(t-at),
// which keeps the debt at least that of the actual costs: the bound holds
// over them.
var tbModule = newModule(luaModule{
	name: "tb", params: 3, guardParams: 1, keys: 1,
	load: `
local D@, N@, TOL@ = tonumber(ARGV[@a]), tonumber(ARGV[@a + 1]), tonumber(ARGV[@a + 2])
local st@ = redis.call('GET', KEYS[@k])
local t@, debt@ = now, 0
do
  local d, last
  if st@ then
    local sp = string.find(st@, ' ', 1, true)
    if sp then d, last = tonumber(string.sub(st@, 1, sp - 1)), tonumber(string.sub(st@, sp + 1)) end
  end
  if d ~= nil and last ~= nil then
    if t@ < last then t@ = last end
    local el = t@ - last
    if el * N@ >= d then debt@ = 0 else debt@ = d - el * N@ end
  elseif @g then
    local s = started()
    if s ~= nil and t@ - s < tonumber(ARGV[@a + 3]) then debt@ = math.max(TOL@ - (t@ - s) * N@, 0) end
  end
end
`,
	can: `
local over = debt@ + math.max(p, 1) * D@ - TOL@
if over > 0 then w = math.floor((over + N@ - 1) / N@) end`,
	take: `debt@ = debt@ + p * D@`,
	settle: `
if x > g then
  debt@ = debt@ + (x - g) * D@
else
  local credit = (g - x) * D@ - (t@ - at) * N@
  if credit > 0 then debt@ = math.max(debt@ - credit, 0) end
end`,
	save: `
if debt@ ~= 0 then
  redis.call('SET', KEYS[@k], string.format('%d %d', debt@, t@), 'PX', keepms(debt@ / N@))
elseif st@ then
  redis.call('DEL', KEYS[@k])
end
qa = debt@`,
})

// fwModule counts permits in windows aligned to Redis's clock: [k·W,
// (k+1)·W) in microseconds since the Unix epoch, so every process agrees on
// them. The state, one string "start count time", is the current window's
// start and count and the last decision's time. A missing state is an
// empty window. A count over LIMIT (a settled overuse) carries its excess
// into the next windows, LIMIT a window.
//
// Parameters: W (µs), LIMIT. A settlement gives back unused permits
// of a grant in the current window, and books overuse in it.
var fwModule = newModule(luaModule{
	name: "fw", params: 2, keys: 1,
	load: `
local W@, LIMIT@ = tonumber(ARGV[@a]), tonumber(ARGV[@a + 1])
local t@, start@, c@ = now, 0, 0
do
  local st = redis.call('GET', KEYS[@k])
  local s, last
  if st then
    local x, y, z = string.match(st, '^(%d+) (%d+) (%d+)$')
    s, c@, last = tonumber(x), tonumber(y), tonumber(z)
  end
  if last ~= nil and t@ < last then t@ = last end
  start@ = t@ - math.fmod(t@, W@)
  if s ~= start@ then
    if s ~= nil and c@ > LIMIT@ then c@ = math.max(c@ - LIMIT@ * ((start@ - s) / W@), 0) else c@ = 0 end
    if s == nil and @g then
      local up = started()
      if up ~= nil and up > start@ then c@ = LIMIT@ end
    end
  end
end
`,
	can:  `if c@ + math.max(p, 1) > LIMIT@ then w = start@ + W@ - t@ end`,
	take: `c@ = c@ + p`,
	settle: `
if x > g then
  c@ = c@ + x - g
elseif at >= start@ then
  c@ = math.max(c@ - (g - x), 0)
end`,
	save: `
redis.call('SET', KEYS[@k], string.format('%d %d %d', start@, c@, t@), 'PX', keepms(start@ + W@ - t@))
qa, qb = c@, start@ + W@ - t@`,
})

// slModule is the strict log: a sorted set of grants (member
// "seq:permits", score the grant's time in µs; KEYS[@k]) and a hash
// (KEYS[@k+1]) with the permits in the log, the next sequence number and
// the newest grant's time. A grant at time a counts in every window [a,
// a+W); at t the log holds the grants after t-W. A request is granted when
// the log's permits plus its own are at most LIMIT; a refused one learns
// when enough of the oldest grants leave.
//
// Parameters: W (µs), LIMIT. A settlement takes unused permits out
// of the grant's entries (those scored at its time), and books overuse as
// an entry at the grant's time, or at t when that has left the window.
//
// Helpers: slwait(log, W, t, need) is the wait until need permits of the
// oldest grants have left the window; sladd(log, seq, tot, newest, at, p)
// logs a grant of p permits at at and returns the new seq, tot and newest.
var slModule = newModule(luaModule{
	name: "sl", params: 2, keys: 2,
	helpers: permitSet + `
local function slwait(log, W, t, need)
  local freed, idx = 0, 0
  while true do
    local e = redis.call('ZRANGE', log, idx, idx + 63, 'WITHSCORES')
    if #e == 0 then return W end
    for j = 1, #e, 2 do
      freed = freed + permits(e[j])
      if freed >= need then return tonumber(e[j + 1]) + W - t end
    end
    idx = idx + 64
  end
end
local function sladd(log, seq, tot, newest, at, p)
  seq = seq + 1
  redis.call('ZADD', log, at, string.format('%d:%d', seq, p))
  return seq, tot + p, math.max(newest, at)
end
`,
	load: `
local W@, LIMIT@ = tonumber(ARGV[@a]), tonumber(ARGV[@a + 1])
local LOG@, ST@ = KEYS[@k], KEYS[@k + 1]
local t@, tot@, seq@, newest@ = now, 0, 0, 0
do
  local st = redis.call('HMGET', ST@, 'n', 'q', 't', 'z')
  local last = tonumber(st[3])
  if last == nil then
    redis.call('DEL', LOG@)
    if @g then
      local up = started()
      if up ~= nil and t@ - up < W@ then
        redis.call('ZADD', LOG@, up, '0:' .. ARGV[@a + 1])
        tot@, newest@ = LIMIT@, up
      end
    end
  else
    tot@, seq@, newest@ = tonumber(st[1]), tonumber(st[2]), tonumber(st[4])
    if t@ < last then t@ = last end
    tot@ = tot@ - reclaim(LOG@, t@ - W@)
  end
end
`,
	can: `
local need = math.max(p, 1)
if tot@ + need > LIMIT@ then w = slwait(LOG@, W@, t@, tot@ + need - LIMIT@) end`,
	take: `if p > 0 then seq@, tot@, newest@ = sladd(LOG@, seq@, tot@, newest@, t@, p) end`,
	settle: `
if x > g then
  local a = at
  if a <= t@ - W@ then a = t@ end
  seq@, tot@, newest@ = sladd(LOG@, seq@, tot@, newest@, a, x - g)
else
  local back = g - x
  for _, e in ipairs(redis.call('ZRANGEBYSCORE', LOG@, at, at)) do
    if back == 0 then break end
    local n = permits(e)
    local d = math.min(n, back)
    redis.call('ZREM', LOG@, e)
    if n > d then redis.call('ZADD', LOG@, at, string.match(e, '^(%d+):') .. ':' .. string.format('%d', n - d)) end
    tot@, back = tot@ - d, back - d
  end
end`,
	save: `
local left = 0
if tot@ ~= 0 then left = newest@ + W@ - t@ end
save(LOG@, ST@, tot@, left, 'n', tot@, 'q', seq@, 't', t@, 'z', newest@)
qa, qb = tot@, left`,
})

// settleArg is the script argument of a settlement of g permits granted at
// Redis time at (µs), whose actual cost was x.
func settleArg(g, x int, at int64) string {
	return fmt.Sprintf("s%d,%d,%d", g, x, at)
}

// luaSettlement reads request argument r that is not a permit count (which
// tonumber reads): a settlement "s<g>,<x>,<at>".
const luaSettlement = `
    g, x, at = string.match(r, '^s(%d+),(%d+),(%d+)$')
    g, x, at = tonumber(g), tonumber(x), tonumber(at)`

// nparams returns the parameters of a member of m in ARGV.
func (m *luaModule) nparams(guard bool) int {
	if guard {
		return m.params + m.guardParams
	}
	return m.params
}

// singleSource is the script of one limit of module m: ARGV is m's
// parameters, then the requests; the reply is {t, a, b, r1, …, rk}, ri = 0
// for a grant (or a settlement), else the wait in µs.
func singleSource(m *luaModule, guard bool) string {
	x := func(f string) string { return expand(f, 1, 1, 1, guard) }
	src := m.helpers
	if guard {
		src = luaServer + src
	}
	return src + x(m.load) + fmt.Sprintf(`
local out = {0, 0, 0}
for i = %d, #ARGV do
  local r = ARGV[i]
  local p, g, x, at = tonumber(r)
  local w = 0
  if p == nil then%s
    do %s
    end
  else
    do %s
    end
    if w == 0 then %s end
  end
  out[#out + 1] = w
end
local qa, qb = 0, 0
do %s
end
out[1], out[2], out[3] = t1, qa, qb
return out
`, m.nparams(guard)+1, luaSettlement, x(m.settle), x(m.can), x(m.take), x(m.save))
}

// maxChainMembers caps a chain's members: a script holds each member's
// state in locals of its own, and Lua allows 200 in one function.
const maxChainMembers = 16

// chainSource is the script of a chain of members ms, in order: every member at one instant, all or nothing. ARGV: each
// member's parameters in turn, then the requests. KEYS: each member's keys
// in turn. Reply: {now, then per request its wait in µs (0: granted) and
// the member whose wait it is (the first of those with the longest wait;
// 0 when granted), then per member a and b}.
func chainSource(ms []member) string {
	var helpers, load, can, take, settle, save strings.Builder
	seen := map[*luaModule]bool{}
	guard := false
	a, k := 1, 1
	for i, mb := range ms {
		j, m := i+1, mb.mod
		if !seen[m] {
			seen[m] = true
			helpers.WriteString(m.helpers)
		}
		guard = guard || mb.guard
		x := func(f string) string { return expand(f, j, a, k, mb.guard) }
		load.WriteString(x(m.load))
		fmt.Fprintf(&can, "    w = 0\n    do %s\n    end\n    if w > wait then wait, who = w, %d end\n", x(m.can), j)
		fmt.Fprintf(&take, "      do %s end\n", x(m.take))
		fmt.Fprintf(&settle, "    do %s\n    end\n", x(m.settle))
		fmt.Fprintf(&save, "qa, qb = 0, 0\ndo %s\nend\nout[#out + 1] = qa\nout[#out + 1] = qb\n", x(m.save))
		a, k = a+m.nparams(mb.guard), k+m.keys
	}
	src := helpers.String()
	if guard {
		src = luaServer + src
	}
	return src + load.String() + fmt.Sprintf(`
local out = {now}
for i = %d, #ARGV do
  local r = ARGV[i]
  local p, g, x, at = tonumber(r)
  local wait, who, w = 0, 0, 0
  if p == nil then%s
%s  else
%s    if who == 0 then
%s    end
  end
  out[#out + 1] = wait
  out[#out + 1] = who
end
local qa, qb
%sreturn out
`, a, luaSettlement, settle.String(), can.String(), take.String(), save.String())
}

// member is what a chain's script needs of a member: its module, and
// whether it guards against restarts.
type member struct {
	mod   *luaModule
	guard bool
}

// chainScripts are the chain scripts made so far, by the shape of their
// members in order: module names, "!" marking a guard ("tb fw!").
var chainScripts sync.Map

// chainScript returns the script of a chain of members ms, in order.
func chainScript(ms []member) *redis.Script {
	var shape strings.Builder
	for _, m := range ms {
		shape.WriteString(m.mod.name)
		if m.guard {
			shape.WriteByte('!')
		}
		shape.WriteByte(' ')
	}
	if s, ok := chainScripts.Load(shape.String()); ok {
		return s.(*redis.Script)
	}
	s, _ := chainScripts.LoadOrStore(shape.String(), newScript(chainSource(ms)))
	return s.(*redis.Script)
}
