package redislimit

import (
	"fmt"
	"math/big"
	"time"

	"github.com/rategate/rategate/internal/exact"
	"github.com/rategate/rategate/limiter"
)

// maxExact is 2^53: every integer a script computes stays below it, so Lua's
// doubles hold it exactly.
const maxExact = 1 << 53

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
		kind: "tb", mod: tbModule, guard: guard, script: tbModule.script(guard),
		args: tbArgs(a, guard), max: a.burst,
		quota: a.quota,
	}, nil
}

// tbArgs returns the token bucket's script parameters: MAXEL only for
// the restart guard.
func tbArgs(a *tbAlg, guard bool) []any {
	if guard {
		return stringArgs(a.d, a.n, a.tol, a.maxel)
	}
	return stringArgs(a.d, a.n, a.tol)
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

// stringArgs returns a script's fixed arguments as strings, which the
// client sends as they are: formatted once, not at every call.
func stringArgs(vs ...any) []any {
	for i, v := range vs {
		vs[i] = fmt.Sprint(v)
	}
	return vs
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
