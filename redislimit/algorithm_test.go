package redislimit

import (
	"errors"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// TestQuotaByAlgorithm pins how each round-trip limiter reads its script's
// reply into Quota and RetryAfter, plain and keyed: before any decision,
// after two grants of three, and at a refusal.
func TestQuotaByAlgorithm(t *testing.T) {
	c := newClient(t)
	const window = time.Hour
	type lim interface {
		limiter.Limiter
		limiter.Quoter
		Close() error
	}
	cases := []struct {
		name  string
		plain func(Options) (lim, error)
		keyed func(Options) (*Keyed, error)
		// the Quota's Window; whether a partly used limit has a Reset and a
		// refusal a RetryAfter (both at most Window)
		window time.Duration
		timed  bool
	}{
		{"TokenBucket", func(o Options) (lim, error) {
			return NewTokenBucket(o, limiter.TokenBucketOptions{Rate: limiter.Per(3, window), Burst: 3})
		}, func(o Options) (*Keyed, error) {
			return NewKeyedTokenBucket(o, limiter.TokenBucketOptions{Rate: limiter.Per(3, window), Burst: 3})
		}, window, true},
		{"FixedWindow", func(o Options) (lim, error) {
			return NewFixedWindow(o, limiter.FixedWindowOptions{Limit: 3, Window: window})
		}, func(o Options) (*Keyed, error) {
			return NewKeyedFixedWindow(o, limiter.FixedWindowOptions{Limit: 3, Window: window})
		}, window, true},
		{"SlidingLog", func(o Options) (lim, error) {
			return NewSlidingLog(o, limiter.SlidingLogOptions{Limit: 3, Window: window})
		}, func(o Options) (*Keyed, error) {
			return NewKeyedSlidingLog(o, limiter.SlidingLogOptions{Limit: 3, Window: window})
		}, window, true},
		{"Concurrency", func(o Options) (lim, error) {
			return NewConcurrency(o, limiter.ConcurrencyOptions{Limit: 3})
		}, func(o Options) (*Keyed, error) {
			return NewKeyedConcurrency(o, limiter.ConcurrencyOptions{Limit: 3})
		}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Client: c, Key: uniqueKey(t)}
			p, err := tc.plain(o)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			k, err := tc.keyed(o)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			kl := k.For("tenant")
			kq := func() limiter.Quota { q, _ := limiter.QuotaOf(kl); return q }
			for _, l := range []struct {
				name  string
				lim   limiter.Limiter
				quota func() limiter.Quota
			}{{"plain", p, p.Quota}, {"keyed", kl, kq}} {
				checkQuota(t, l.name+" before any decision", l.quota(), tc.window, 3, false)
				for range 2 {
					if g := l.lim.TryAcquire(1); !g.Granted() {
						t.Fatalf("%s: refused within the limit: %v", l.name, g.Err())
					}
				}
				checkQuota(t, l.name+" after 2 grants", l.quota(), tc.window, 1, tc.timed)
				l.lim.TryAcquire(1)
				r := l.lim.TryAcquire(1)
				if r.Granted() || !errors.Is(r.Err(), limiter.ErrLimited) {
					t.Fatalf("%s: a 4th permit of 3: granted %v, %v", l.name, r.Granted(), r.Err())
				}
				if ra := r.RetryAfter(); tc.timed != (ra > 0) || ra > tc.window {
					t.Errorf("%s: RetryAfter %v, want one in (0, %v]: %v", l.name, ra, tc.window, tc.timed)
				}
			}
		})
	}
}

func checkQuota(t *testing.T, when string, q limiter.Quota, window time.Duration, remaining int64, reset bool) {
	t.Helper()
	if q.Limit != 3 || q.Window != window || q.Remaining != remaining || reset != (q.Reset > 0) || q.Reset > window {
		t.Errorf("%s: Quota %+v, want Limit 3, Window %v, Remaining %d, a Reset in (0, Window]: %v", when, q, window, remaining, reset)
	}
}

// TestOptionErrorOrder: with several options invalid, every constructor
// names the first: Options', then the algorithm's, then the queue's (and
// for the semaphore the lease TTL's resolution after the queue's).
func TestOptionErrorOrder(t *testing.T) {
	c := newClient(t)
	ok := Options{Client: c, Key: "k"}
	noKey := Options{Client: c}
	badQ := limiter.QueueOptions{Limit: -1}
	oddTTL := Options{Client: c, Key: "k", LeaseTTL: 3*time.Millisecond + 500*time.Nanosecond}
	tb := func(o Options, opts limiter.TokenBucketOptions) []error {
		return constructorErrs(NewTokenBucket, NewKeyedTokenBucket, o, opts)
	}
	fw := func(o Options, opts limiter.FixedWindowOptions) []error {
		return constructorErrs(NewFixedWindow, NewKeyedFixedWindow, o, opts)
	}
	sl := func(o Options, opts limiter.SlidingLogOptions) []error {
		return constructorErrs(NewSlidingLog, NewKeyedSlidingLog, o, opts)
	}
	cc := func(o Options, opts limiter.ConcurrencyOptions) []error {
		return constructorErrs(NewConcurrency, NewKeyedConcurrency, o, opts)
	}
	cases := []struct {
		field string
		errs  []error
	}{
		{"Key", tb(noKey, limiter.TokenBucketOptions{Queue: badQ})},
		{"Rate", tb(ok, limiter.TokenBucketOptions{Queue: badQ})},
		{"Queue.Limit", tb(ok, limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 1, Queue: badQ})},
		{"Key", fw(noKey, limiter.FixedWindowOptions{Queue: badQ})},
		{"Limit", fw(ok, limiter.FixedWindowOptions{Queue: badQ})},
		{"Window", fw(ok, limiter.FixedWindowOptions{Limit: 1, Queue: badQ})},
		{"Queue.Limit", fw(ok, limiter.FixedWindowOptions{Limit: 1, Window: time.Second, Queue: badQ})},
		{"Key", sl(noKey, limiter.SlidingLogOptions{Queue: badQ})},
		{"Limit", sl(ok, limiter.SlidingLogOptions{Queue: badQ})},
		{"Window", sl(ok, limiter.SlidingLogOptions{Limit: 1, Queue: badQ})},
		{"Queue.Limit", sl(ok, limiter.SlidingLogOptions{Limit: 1, Window: time.Second, Queue: badQ})},
		{"Key", cc(Options{Client: c, LeaseTTL: oddTTL.LeaseTTL}, limiter.ConcurrencyOptions{Queue: badQ})},
		{"Limit", cc(oddTTL, limiter.ConcurrencyOptions{Queue: badQ})},
		{"Queue.Limit", cc(oddTTL, limiter.ConcurrencyOptions{Limit: 1, Queue: badQ})},
		{"LeaseTTL", cc(oddTTL, limiter.ConcurrencyOptions{Limit: 1})},
	}
	for i, tc := range cases {
		for j, err := range tc.errs {
			var oe *limiter.OptionError
			if !errors.As(err, &oe) || oe.Field != tc.field {
				t.Errorf("case %d (%s), constructor %d: %v, want an OptionError for %s", i, tc.field, j, err, tc.field)
			}
		}
	}
}

// constructorErrs returns the errors of a plain and a keyed constructor
// given the same options.
func constructorErrs[O, L any](plain func(Options, O) (L, error), keyed func(Options, O) (*Keyed, error), o Options, opts O) []error {
	_, e1 := plain(o, opts)
	_, e2 := keyed(o, opts)
	return []error{e1, e2}
}
