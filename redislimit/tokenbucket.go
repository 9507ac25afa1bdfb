package redislimit

import (
	"math/big"
	"time"

	"github.com/rategate/rategate/internal/exact"
	"github.com/rategate/rategate/limiter"
)

// maxExact is 2^53: every integer a script computes stays below it, so Lua's
// doubles hold it exactly.
const maxExact = 1 << 53

// tbScript is a token bucket as the generic cell rate algorithm, in scaled
// integer units: one microsecond adds N units of capacity, one permit costs
// D units (Rate = N/D permits per µs, in lowest terms), and the bucket holds
// TOL = Burst·D. The state, one string "debt time", is the debt (units
// still owed) and the time it was computed at; it expires when the debt
// is paid. A missing state is a full bucket.
//
// ARGV: D, N, TOL, MAXEL = ceil(TOL/N) (µs to drain a full debt), GUARD,
// then each request's permits. Every value stays below 2TOL+N < 2^53.
var tbScript = newScript(`
local D, N, TOL, MAXEL, GUARD = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5] == '1'
local st = redis.call('GET', KEYS[1])
local debt, last = 0, nil
if st then
  local a, b = string.match(st, '^(%d+) (%d+)$')
  debt, last = tonumber(a), tonumber(b)
end
if last == nil then
  debt = 0
  if GUARD then
    local s = started()
    if s ~= nil and now - s < MAXEL then debt = math.max(TOL - (now - s) * N, 0) end
  end
else
  if now < last then now = last end
  local el = now - last
  if el >= MAXEL then debt = 0 else debt = math.max(debt - el * N, 0) end
end
local out = reply(6, function(a)
  local c = tonumber(a) * D
  local need = math.max(c, D) -- zero permits: granted when one could be
  if debt + need > TOL then return debt + need - TOL end
  debt = debt + c
  return 0
end)
out[2] = debt
if debt == 0 then
  if st then redis.call('DEL', KEYS[1]) end
else
  redis.call('SET', KEYS[1], string.format('%.0f %.0f', debt, now), 'PX', keepms(debt / N))
end
return out
`)

// tbAlg is the token bucket's arithmetic: N units per µs, D per permit.
type tbAlg struct {
	n, d, tol, maxel int64
	burst            int64
}

// newTBEngine returns a token bucket's engine.
func newTBEngine(o Options, opts limiter.TokenBucketOptions) (*engine, error) {
	return newEngine(o, opts.Queue, false, func() (algorithm, error) { return tokenBucket(opts, o.GuardRestarts) })
}

// tokenBucket reduces the rate to N/D permits per µs, checks that the
// script's arithmetic stays below 2^53, and returns the algorithm.
func tokenBucket(opts limiter.TokenBucketOptions, guard bool) (algorithm, error) {
	r := opts.Rate
	if r.Events() <= 0 || r.Period() <= 0 {
		return algorithm{}, optErr("Rate", "must be positive, got %d per %v", r.Events(), r.Period())
	}
	if opts.Burst <= 0 {
		return algorithm{}, optErr("Burst", "must be positive, got %d", opts.Burst)
	}
	// Rate = events/period ns = events·1000/period per µs.
	num := new(big.Int).Mul(big.NewInt(r.Events()), big.NewInt(1000))
	den := big.NewInt(int64(r.Period()))
	g := new(big.Int).GCD(nil, nil, num, den)
	num.Quo(num, g)
	den.Quo(den, g)
	tol := new(big.Int).Mul(den, big.NewInt(int64(opts.Burst)))
	// 2·TOL + N must stay below 2^53.
	lim := new(big.Int).Add(new(big.Int).Mul(tol, big.NewInt(2)), num)
	if lim.Cmp(big.NewInt(maxExact)) >= 0 {
		return algorithm{}, optErr("Burst", "Burst %d at Rate %v needs integers of 2^53 or more in Redis's Lua (doubles); lower Burst or use a rate whose period is a whole number of microseconds per permit", opts.Burst, r)
	}
	a := &tbAlg{n: num.Int64(), d: den.Int64(), tol: tol.Int64(), burst: int64(opts.Burst)}
	a.maxel = (a.tol + a.n - 1) / a.n
	return algorithm{
		kind: "tb", script: tbScript,
		args: []any{a.d, a.n, a.tol, a.maxel, boolArg(guard)}, max: a.burst,
		quota: a.quota, retry: a.retry,
	}, nil
}

// retry converts the units over capacity into the wait until they are not.
func (a *tbAlg) retry(x int64) time.Duration {
	return time.Duration(exact.CeilDiv(x, a.n)) * time.Microsecond
}

// quota reads the debt after the decision.
func (a *tbAlg) quota(debt, _ int64) limiter.Quota {
	return limiter.Quota{
		Limit:     a.burst,
		Window:    time.Duration(a.maxel) * time.Microsecond,
		Remaining: (a.tol - debt) / a.d,
		Reset:     time.Duration(exact.CeilDiv(debt, a.n)) * time.Microsecond,
	}
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// TokenBucket is a token bucket shared through Redis by every process using
// the same Options.Key: in every interval of length t, all of them together
// are granted at most Burst + Rate·t permits. A new (or idle) bucket is
// full; its state expires in Redis once the bucket has refilled.
type TokenBucket struct {
	core
}

// NewTokenBucket returns a token bucket shared through Redis, or an
// *limiter.OptionError naming the first invalid option. Besides Rate and
// Burst being positive, the bucket's arithmetic must fit Redis's Lua
// doubles exactly: 2·Burst·D + N < 2^53, where N/D is Rate in permits per
// microsecond in lowest terms (any Burst up to millions fits rates from one
// per hour to millions per second). opts.Queue.Limit caps the permits
// waiting in this process's Acquire calls.
func NewTokenBucket(o Options, opts limiter.TokenBucketOptions) (*TokenBucket, error) {
	return newLimiter[TokenBucket](newTBEngine(o, opts))
}
