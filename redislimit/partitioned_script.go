package redislimit

// partitionSync is the one script a Partitioned limiter runs: it gives back
// the partitions the caller no longer uses (storing each one's bucket state),
// renews those it keeps, takes free ones it asks for, and answers how the
// partitions should be shared. Everything lives in one hash, so one call is
// atomic and touches one cluster slot. Times are microseconds of Redis's
// clock (TIME), kept below 2^53 so that Lua's doubles hold them exactly.
//
// Fields of the hash:
//
//	E         the run_id of the server that made the hash ("-" when INFO is unavailable)
//	Q         quarantine end: no lease granted before it may be used before it
//	L<i>      partition i's lease: "<owner>:<expiry>"
//	S<i>      partition i's bucket state after a graceful release: the time it is full again
//	W<owner>  a process that wants more partitions, until the given time
//
// KEYS[1] the hash. ARGV: owner, ttl (µs), partitions, want, hungry (0/1),
// keep (ms the hash outlives its last use), seen (the Redis time until
// which the caller's last sync made the hash live: a hash missing before
// then was lost, to FLUSHALL or eviction, while leases of it may be in
// use; 0 when the caller has not synced), then the count and the indices
// of the partitions to renew, then the count and (index, debt µs) pairs of
// the partitions given back.
//
// Reply: {now, quarantine end, excess, level*1000, free, #lost, lost...,
// #acquired, (index, debt µs or -1 for an empty bucket)...}. A partition
// never leased in the hash comes with debt 0 (a full bucket), one whose
// lease lapsed with -1.
const partitionSync = `
local key = KEYS[1]
local owner = ARGV[1]
local ttl = tonumber(ARGV[2])
local parts = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local hungry = ARGV[5] == '1'
local function fmt(x) return string.format('%d', x) end

-- The server's identity and (latest) start time, when scripts may call INFO.
local runid, started = server()
started = started or now

local h = {}
local all = redis.call('HGETALL', key)
for i = 1, #all, 2 do h[all[i]] = all[i + 1] end
if h['E'] ~= runid then
  -- A new hash, or one that outlived its server (loaded from disk, or on a
  -- promoted replica), or one lost on this server while the caller's last
  -- sync should have kept it (FLUSHALL, eviction): no lease or state in it
  -- can be trusted, and leases granted before may still be in use until
  -- one TTL after the server started (a new hash) or after now (an
  -- inherited or lost one).
  local q = now + ttl
  if h['E'] == nil and tonumber(ARGV[7]) <= now then q = started + ttl end
  redis.call('DEL', key)
  h = {E = runid, Q = fmt(q)}
  redis.call('HSET', key, 'E', runid, 'Q', h['Q'])
end
local qend = tonumber(h['Q'])

local function holder(l)
  local o, e = string.match(l, '^([^:]*):(%d+)$')
  return o, tonumber(e)
end

local a = 8
local keep = {}
for j = 1, tonumber(ARGV[a]) do keep[j] = ARGV[a + j] end
a = a + #keep + 1
for j = 1, tonumber(ARGV[a]) do
  local p, debt = ARGV[a + 2 * j - 1], tonumber(ARGV[a + 2 * j])
  local l = h['L' .. p]
  if l and holder(l) == owner then
    h['L' .. p] = nil
    h['S' .. p] = fmt(now + debt)
    redis.call('HDEL', key, 'L' .. p)
    redis.call('HSET', key, 'S' .. p, h['S' .. p])
  end
end

local lease = owner .. ':' .. fmt(now + ttl)
local lost, kept = {}, {}
for _, p in ipairs(keep) do
  local l = h['L' .. p]
  if l and holder(l) == owner then
    h['L' .. p] = lease
    kept[p] = true
    redis.call('HSET', key, 'L' .. p, lease)
  else
    lost[#lost + 1] = tonumber(p)
  end
end

if hungry then
  redis.call('HSET', key, 'W' .. owner, fmt(now + ttl))
  h['W' .. owner] = fmt(now + ttl)
elseif h['W' .. owner] then
  redis.call('HDEL', key, 'W' .. owner)
  h['W' .. owner] = nil
end

-- Who holds what, who wants more, and which partitions are free.
-- A free partition is stored (given back: its bucket state is kept),
-- never leased in this hash (its bucket is full), or lost (its holder
-- vanished, or it is ours from a call whose answer was lost: its bucket may
-- have been used up, so it comes back empty).
local held, wants = {}, {}
local stored, unused, lapsed = {}, {}, {}
for p = 0, parts - 1 do
  local l = h['L' .. p]
  local o, e
  if l then o, e = holder(l) end
  if l and o == owner and not kept[tostring(p)] then
    lapsed[#lapsed + 1] = p
  elseif l and e > now then
    held[o] = (held[o] or 0) + 1
  elseif not l and h['S' .. p] then
    stored[#stored + 1] = p
  elseif l then
    lapsed[#lapsed + 1] = p
  else
    unused[#unused + 1] = p
  end
end
for f, v in pairs(h) do
  if string.sub(f, 1, 1) == 'W' then
    if tonumber(v) > now then
      wants[string.sub(f, 2)] = true
    else
      redis.call('HDEL', key, f)
    end
  end
end

-- Max-min fair share: owners that want more may have up to level each;
-- the others keep what they hold.
local function fairLevel()
  local ds = {}
  for o, n in pairs(held) do
    if not wants[o] then ds[#ds + 1] = n end
  end
  local nw = 0
  for _ in pairs(wants) do nw = nw + 1 end
  table.sort(ds)
  local rem, cnt = parts, #ds + nw
  for _, d in ipairs(ds) do
    if d * cnt <= rem then
      rem = rem - d
      cnt = cnt - 1
    else
      return rem / cnt
    end
  end
  if cnt > 0 and nw > 0 then return rem / cnt end
  return parts
end

-- Take at most the fair level, rounded down while another owner that wants
-- more is below it, so that what is free goes to the owner furthest behind.
local mine = held[owner] or 0
local level = fairLevel()
local others, behind = false, false
for o, _ in pairs(wants) do
  if o ~= owner then
    others = true
    if (held[o] or 0) < math.floor(level) then behind = true end
  end
end
local nfree = #stored + #unused + #lapsed
local n = math.min(want, nfree)
if others then
  local cap = math.ceil(level)
  if behind then cap = math.floor(level) end
  n = math.min(n, math.max(0, cap - mine))
end

local got = {}
local function take(p, debt)
  h['L' .. p] = lease
  redis.call('HSET', key, 'L' .. p, lease)
  if h['S' .. p] then
    h['S' .. p] = nil
    redis.call('HDEL', key, 'S' .. p)
  end
  got[#got + 1] = p
  got[#got + 1] = debt
  mine = mine + 1
end
for _, p in ipairs(stored) do
  if n == 0 then break end
  take(p, math.max(0, tonumber(h['S' .. p]) - now))
  n = n - 1
end
for _, p in ipairs(unused) do
  if n == 0 then break end
  take(p, 0)
  n = n - 1
end
for _, p in ipairs(lapsed) do
  if n == 0 then break end
  take(p, -1)
  n = n - 1
end
held[owner] = mine
local free = nfree - #got / 2

-- Give back what is over the fair level when another owner that wants more
-- is below it and nothing is free.
level = fairLevel()
local excess = 0
if free == 0 then
  for o, _ in pairs(wants) do
    if o ~= owner and (held[o] or 0) < math.floor(level) then
      excess = math.max(0, mine - math.max(1, math.floor(level)))
    end
  end
end

redis.call('PEXPIRE', key, ARGV[6])
local res = {now, qend, excess, math.floor(math.min(level, parts) * 1000), free, #lost}
for _, p in ipairs(lost) do res[#res + 1] = p end
res[#res + 1] = #got / 2
for _, v in ipairs(got) do res[#res + 1] = v end
return res
`

var partitionScript = newScript(luaServer + partitionSync)
