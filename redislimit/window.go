package redislimit

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
)

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
// Redis as a count of permits: the fixed window and the strict log (whose
// Lua module is mod) and the semaphore (mod nil). Their scripts take the period
// (the window, or the lease TTL; µs) and the limit as their first
// arguments (the semaphore's then the restart guard; a rate module's
// script has it built in), and answer a, the permits counted, and b, the
// µs until that count is back to zero; a refusal's wait is in µs.
func counting(kind string, mod *luaModule, s *redis.Script, suffix string, limit, period int64, guard bool) algorithm {
	window := time.Duration(period) * time.Microsecond
	args := stringArgs(period, limit)
	if mod == nil {
		args = append(args, boolArg(guard))
	}
	return algorithm{
		kind: kind, mod: mod, guard: guard, suffix: suffix, two: suffix != "", script: s, max: limit,
		args: args,
		quota: func(used, left int64) limiter.Quota {
			q := limiter.Quota{Limit: limit, Window: window, Remaining: limit - used}
			if used > 0 {
				q.Reset = time.Duration(left) * time.Microsecond
			}
			return q
		},
	}
}

// windowAlg checks the options of a fixed window or a strict log (they are
// the same) and returns its algorithm.
func windowAlg(kind string, mod *luaModule, suffix string, limit int, window time.Duration, guard bool) (algorithm, error) {
	if err := validLimit(limit); err != nil {
		return algorithm{}, err
	}
	w, err := windowMicros(window)
	if err != nil {
		return algorithm{}, err
	}
	return counting(kind, mod, mod.script(guard), suffix, int64(limit), w, guard), nil
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
		return windowAlg("fw", fwModule, "", opts.Limit, opts.Window, o.GuardRestarts)
	})
}

func newSLEngine(o Options, opts limiter.SlidingLogOptions) (*engine, error) {
	return newEngine(o, opts.Queue, false, func() (algorithm, error) {
		return windowAlg("sl", slModule, ":log", opts.Limit, opts.Window, o.GuardRestarts)
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
