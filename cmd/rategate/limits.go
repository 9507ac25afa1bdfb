package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
	"github.com/rategate/rategate/redislimit"
	"github.com/redis/go-redis/v9"
)

// shared holds -redis and -key, which every command takes.
type shared struct {
	addr string
	key  string
}

func (s *shared) add(fs *flag.FlagSet) {
	fs.StringVar(&s.addr, "redis", "", "share the limit through the Redis server at `ADDR` (host:port or a redis:// URL)")
	fs.StringVar(&s.key, "key", "", "with -redis: the `NAME` of the shared limit: every process naming it shares one limit")
}

// check reports a -redis without -key or the other way round.
func (s *shared) check() error {
	switch {
	case s.addr == "" && s.key != "":
		return usagef("-key %s needs -redis ADDR", s.key)
	case s.addr != "" && s.key == "":
		return usagef("-redis %s needs -key NAME (the name every process sharing the limit uses)", s.addr)
	}
	return nil
}

// connect returns a client of the -redis server, nil without -redis, after
// checking that the server answers.
func (s *shared) connect() (*redis.Client, error) {
	if s.addr == "" {
		return nil, nil
	}
	opts := &redis.Options{Addr: s.addr}
	if strings.Contains(s.addr, "://") {
		var err error
		if opts, err = redis.ParseURL(s.addr); err != nil {
			return nil, usagef("-redis %s: %v", s.addr, err)
		}
	}
	opts.ContextTimeoutEnabled = true
	redis.SetLogger(quietLogger{}) // its errors reach the user through ours
	c := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redis %s: %w", s.addr, err)
	}
	return c, nil
}

// open returns the limiter of l, in the -redis server if one was given,
// and a function that closes the connection to it.
func (s *shared) open(l limit) (limiter.Limiter, func(), error) {
	c, err := s.connect()
	if err != nil {
		return nil, nil, err
	}
	closeClient := func() {
		if c != nil {
			c.Close()
		}
	}
	lim, err := l.limiter(s, c)
	if err != nil {
		closeClient()
		return nil, nil, optionErr(err)
	}
	return lim, closeClient, nil
}

// quietLogger drops go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func (s *shared) options(c *redis.Client, suffix string) redislimit.Options {
	return redislimit.Options{Client: c, Key: s.key + suffix}
}

// limit is a rate limit as rategate keeps it: at most rate.Events() in ANY
// window of rate.Period(), wherever it starts (a sliding log), dealt out by
// a token bucket of the same rate that lets at most burst through at once
// (none with burst 0: the whole period's amount may pass at once). The
// bucket's burst also absorbs a wake-up that comes late: it keeps filling
// meanwhile, so the time is made up, which a pacer cannot do.
type limit struct {
	rate  limiter.Rate
	burst int
}

func (l limit) window() limiter.SlidingLogOptions {
	return limiter.SlidingLogOptions{Limit: int(l.rate.Events()), Window: l.rate.Period()}
}

func (l limit) bucket() limiter.TokenBucketOptions {
	return limiter.TokenBucketOptions{Rate: l.rate, Burst: l.burst}
}

// local returns the limit in this process.
func (l limit) local() (limiter.Limiter, error) {
	log, err := limiter.NewSlidingLog(l.window())
	if err != nil {
		return nil, err
	}
	if l.burst == 0 {
		return log, nil
	}
	bucket, err := limiter.NewTokenBucket(l.bucket())
	if err != nil {
		return nil, err
	}
	return limiter.Chain(bucket, log), nil
}

// limiter returns the limit, in Redis when c is not nil.
func (l limit) limiter(sh *shared, c *redis.Client) (limiter.Limiter, error) {
	if c == nil {
		return l.local()
	}
	log, err := redislimit.NewSlidingLog(sh.options(c, ":window"), l.window())
	if err != nil {
		return nil, err
	}
	if l.burst == 0 {
		return newPatient(log), nil
	}
	bucket, err := redislimit.NewTokenBucket(sh.options(c, ":bucket"), l.bucket())
	if err != nil {
		return nil, err
	}
	return newPatient(&inTurn{first: bucket, second: log}), nil
}

// perKey returns a limit per key, in Redis when c is not nil.
func (l limit) perKey(sh *shared, c *redis.Client) (func(string) limiter.Limiter, error) {
	if c == nil {
		if _, err := l.local(); err != nil { // the options' errors, once
			return nil, err
		}
		k, err := limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) { return l.local() }})
		if err != nil {
			return nil, err
		}
		return k.For, nil
	}
	log, err := redislimit.NewKeyedSlidingLog(sh.options(c, ":window"), l.window())
	if err != nil {
		return nil, err
	}
	if l.burst == 0 {
		return func(key string) limiter.Limiter { return newPatient(log.For(key)) }, nil
	}
	bucket, err := redislimit.NewKeyedTokenBucket(sh.options(c, ":bucket"), l.bucket())
	if err != nil {
		return nil, err
	}
	return func(key string) limiter.Limiter {
		return newPatient(&inTurn{first: bucket.For(key), second: log.For(key)})
	}, nil
}

// defaultBurst is a tenth of the period's amount, at least least,
// and at most the whole amount.
func defaultBurst(n int64, least int64) int {
	return int(min(n, max(least, n/10)))
}

// parseByteLimit reads pipe's -rate and -burst.
func parseByteLimit(rate, burst string) (limit, error) {
	if rate == "" {
		return limit{}, usagef("-rate is required, as in -rate 2MiB/s")
	}
	r, err := pipe.ParseByteRate(rate)
	if err != nil {
		return limit{}, usagef("-rate %s: %v", rate, err)
	}
	n := r.Events()
	if n > math.MaxInt {
		return limit{}, usagef("-rate %s: too large", rate)
	}
	if burst == "" {
		return limit{rate: r, burst: defaultBurst(n, 1)}, nil
	}
	b, err := pipe.ParseBytes(burst)
	if err != nil {
		return limit{}, usagef("-burst %s: %v", burst, err)
	}
	if b > n {
		return limit{}, usagef("-burst %s is more than -rate %s allows in a whole period (%s per %v)",
			burst, rate, pipe.FormatBytes(n), r.Period())
	}
	return limit{rate: r, burst: int(b)}, nil
}

// chunk is the most bytes pipe asks for at once: half the burst, so that
// the other half absorbs a wake-up that comes late.
func (l limit) chunk() int { return max(1, l.burst/2) }

// eventFlags are the -rate, -burst and -window of lines and run.
type eventFlags struct {
	rate, window string
	burst        int
}

func (f *eventFlags) add(fs *flag.FlagSet, what string) {
	fs.StringVar(&f.rate, "rate", "", "at most `N/PERIOD` "+what+" in any window of PERIOD: 100/s, 5/min, 2/1500ms")
	fs.StringVar(&f.window, "window", "smooth", "`smooth`: spread over the period, at most BURST at once; strict: up to N at once")
	fs.IntVar(&f.burst, "burst", 0, "with -window smooth: at most `N` at once (default: a tenth of the rate's N, at least 2)")
}

// parse returns the limit, or ok == false when -rate is not set.
func (f *eventFlags) parse() (l limit, ok bool, err error) {
	if f.rate == "" {
		if f.burst != 0 {
			return l, false, usagef("-burst needs -rate")
		}
		return l, false, nil
	}
	if l.rate, err = limiter.ParseRate(f.rate); err != nil {
		return l, false, usagef("-rate %s: %v", f.rate, err)
	}
	n := l.rate.Events()
	switch f.window {
	case "smooth":
		l.burst = defaultBurst(n, 2)
		if f.burst != 0 {
			l.burst = f.burst
		}
		if l.burst < 1 || int64(l.burst) > n {
			return l, false, usagef("-burst %d: must be from 1 to the rate's N (%d)", f.burst, n)
		}
	case "strict":
		if f.burst != 0 {
			return l, false, usagef("-burst is for -window smooth; -window strict lets N through at once")
		}
	default:
		return l, false, usagef("-window %s: want smooth or strict", f.window)
	}
	return l, true, nil
}
