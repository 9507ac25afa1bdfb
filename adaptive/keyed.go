package adaptive

import (
	"time"

	"github.com/rategate/rategate/limiter"
)

// DefaultForget is how long a key of [NewKeyedRateLimiter] keeps the rate
// it found while unused, when [KeyedRateOptions].Forget is zero: long
// enough to span the gaps of a crawl or a batch job that comes back to the
// same host, short enough that the rate is not trusted after the other
// side may well have changed.
const DefaultForget = 10 * time.Minute

// KeyedRateOptions configures NewKeyedRateLimiter.
type KeyedRateOptions struct {
	// RateOptions configures each key's RateLimiter: Floor and Ceiling
	// bound every key's rate, and each new key starts at Initial.
	RateOptions
	// Forget is how long a key keeps its limiter, and so the rate it
	// found, without a call (a TryAcquire or Acquire of the key, through
	// the Keyed or its For limiter): a key unused for longer is evicted
	// when new keys come (or by Keyed.Prune), and its next use starts a
	// new limiter at Initial, which searches for the capacity again.
	// Zero means DefaultForget; negative is an error.
	Forget time.Duration
}

// NewKeyedRateLimiter returns a [limiter.Keyed] that gives each key (a
// host, a tenant, an endpoint) a [RateLimiter] of its own, made with
// opts.RateOptions at the key's first use, so that each key finds its own
// capacity from the outcomes reported on its leases. Its For fits
// pool.Options.PerKey and httplimit.Transport.PerHost: a pool's tasks for
// a host are then started no faster than that host's rate, and a task
// whose error wraps [limiter.ErrThrottled] (a 429) brings that host's rate
// down without slowing the others.
//
// It validates opts at once, into an *[limiter.OptionError] naming the
// field, rather than failing at each key's first use.
//
// What a key learned lives in its limiter, which is kept while the key is
// used at least once per Forget and may be evicted after that: its next
// use then costs a new search, from Initial, doubling every 0.4 s of use
// until a call is throttled (from 1/s to 100/s in under 3 s, with a few
// throttled calls at the end). A key costs about 1.5 KiB while it
// is kept. Settle, Report and Release a lease of a key as usual: they
// reach the limiter that granted it, even if the key was evicted since.
func NewKeyedRateLimiter[K comparable](opts KeyedRateOptions) (*limiter.Keyed[K], error) {
	rate, err := opts.RateOptions.validated()
	if err != nil {
		return nil, err
	}
	forget := opts.Forget
	switch {
	case forget < 0:
		return nil, &limiter.OptionError{Field: "Forget", Problem: "must not be negative, got " + forget.String()}
	case forget == 0:
		forget = DefaultForget
	}
	return limiter.NewKeyed(limiter.KeyedOptions[K]{
		New:         func(K) (limiter.Limiter, error) { return newRateLimiter(rate) },
		IdleTimeout: forget,
	})
}
