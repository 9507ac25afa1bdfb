package properties_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// Fuzz targets for the option validation of the keyed limiters, with the
// helpers of fuzz_test.go.

var errFactory = errors.New("the factory refuses")

// FuzzNewKeyed: NewKeyed accepts exactly the options with a factory and an
// IdleTimeout that is not negative, and refuses the others with an
// *OptionError naming New or IdleTimeout. A Keyed it returns makes each
// key's limiter at its first use (a fresh one grants), or, when the factory
// fails, denies with ErrNoLimiter wrapping the factory's error; Close
// succeeds and later calls fail with ErrClosed.
func FuzzNewKeyed(f *testing.F) {
	f.Add(true, int64(0), false, 1)
	f.Add(true, int64(time.Minute), false, 3)
	f.Add(true, int64(1), false, math.MaxInt)
	f.Add(true, int64(math.MaxInt64), true, 1)
	f.Add(true, int64(0), false, 0) // the factory's own OptionError, at first use
	f.Add(false, int64(0), false, 1)
	f.Add(true, int64(-1), false, 1)
	f.Add(false, int64(math.MinInt64), true, -1)
	f.Fuzz(func(t *testing.T, hasNew bool, idle int64, fails bool, limit int) {
		opts := limiter.KeyedOptions[string]{IdleTimeout: time.Duration(idle)}
		if hasNew {
			opts.New = func(string) (limiter.Limiter, error) {
				if fails {
					return nil, errFactory
				}
				return limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: limit})
			}
		}
		what := fmt.Sprintf("NewKeyed(New set: %v, IdleTimeout: %v)", hasNew, opts.IdleTimeout)
		var k *limiter.Keyed[string]
		var err error
		guard(t, what, func() { k, err = limiter.NewKeyed(opts) })
		invalid := firstProblem(problemIf(!hasNew, "New is nil"), problemIf(idle < 0, "IdleTimeout is negative"))
		if err != nil {
			if k != nil {
				t.Fatalf("%s: a Keyed and the error %v", what, err)
			}
			checkRefused(t, what, err, "New", "IdleTimeout")
			if invalid == "" {
				t.Fatalf("%s: valid options refused: %v", what, err)
			}
			return
		}
		if k == nil {
			t.Fatalf("%s: nil Keyed and nil error", what)
		}
		if invalid != "" {
			t.Fatalf("%s: accepted, but %s", what, invalid)
		}
		var cause error // what a key's first use fails with, if it does
		switch {
		case fails:
			cause = errFactory
		case limit <= 0:
			cause = &limiter.OptionError{}
		}
		guard(t, what+": use", func() { err = useKeyed(k, cause) })
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	})
}

// useKeyed uses two keys of a fresh k, each through one of the ways in,
// then closes k. cause is nil when k's factory makes a limiter of limit 1
// or more, else the error it fails with (an *OptionError when it is one).
func useKeyed(k *limiter.Keyed[string], cause error) error {
	a := k.TryAcquire("a", 1)
	defer a.Release()
	if cause != nil {
		_, aerr := k.Acquire(context.Background(), "a", 1)
		var oe *limiter.OptionError
		wraps := errors.Is(a.Err(), cause) || errors.As(cause, &oe) && errors.As(a.Err(), &oe)
		switch {
		case a.Granted() || !errors.Is(a.Err(), limiter.ErrNoLimiter) || !wraps:
			return fmt.Errorf("factory failing with %v: TryAcquire = {Granted:%v Err:%v}, want ErrNoLimiter wrapping it", cause, a.Granted(), a.Err())
		case !errors.Is(aerr, limiter.ErrNoLimiter):
			return fmt.Errorf("factory failing with %v: Acquire: %v, want ErrNoLimiter", cause, aerr)
		case k.Len() != 0:
			return fmt.Errorf("factory failing: %d keys held, want 0", k.Len())
		}
	} else {
		b := k.For("b").TryAcquire(1)
		defer b.Release()
		switch {
		case !a.Granted() || a.Permits() != 1:
			return fmt.Errorf("fresh TryAcquire(a, 1) = {Granted:%v Permits:%d Err:%v}", a.Granted(), a.Permits(), a.Err())
		case !b.Granted() || b.Permits() != 1:
			return fmt.Errorf("fresh For(b).TryAcquire(1) = {Granted:%v Permits:%d Err:%v}", b.Granted(), b.Permits(), b.Err())
		case k.Len() != 2:
			return fmt.Errorf("%d keys held with a lease each of a and b, want 2", k.Len())
		}
	}
	if err := k.Close(); err != nil {
		return fmt.Errorf("Close: %v", err)
	}
	if l := k.TryAcquire("a", 1); l.Granted() || !errors.Is(l.Err(), limiter.ErrClosed) {
		return fmt.Errorf("TryAcquire after Close = {Granted:%v Err:%v}, want ErrClosed", l.Granted(), l.Err())
	}
	return nil
}

// FuzzNewKeyedTokenBucket: NewKeyedTokenBucket refuses the options the
// contract calls invalid, accepts exactly the options NewTokenBucket
// accepts (each key is such a bucket), and refuses the others naming the
// same field. A set it returns gives each new key a full bucket of Burst
// (a request of Burst is granted, one of Burst+1 can never be), and Close
// succeeds.
func FuzzNewKeyedTokenBucket(f *testing.F) {
	f.Add(100, int64(time.Second), 10, 0, 0, int64(0))
	f.Add(3, int64(time.Second), 1, 5, 1, int64(time.Millisecond))
	f.Add(0, int64(time.Second), 1, 0, 0, int64(0))
	f.Add(1, int64(0), 1, 0, 0, int64(0))
	f.Add(1, int64(time.Second), 0, 0, 0, int64(0))
	f.Add(1, int64(-1), -1, -1, 2, int64(-1))
	f.Add(1, int64(time.Second), 1, 0, 2, int64(0))
	f.Add(1, int64(time.Second), 1, 0, 0, int64(-1))
	f.Add(1, int64(1<<62), math.MaxInt, 0, 0, int64(0)) // Burst overflows the arithmetic
	f.Add(1, int64(1<<40), 1<<20, 0, 0, int64(0))       // at the arithmetic's edge
	f.Add(math.MaxInt, int64(1), math.MaxInt/2, 0, 0, int64(0))
	f.Fuzz(func(t *testing.T, events int, per int64, burst, qLimit, order int, spin int64) {
		opts := limiter.TokenBucketOptions{Rate: limiter.Per(events, time.Duration(per)), Burst: burst, Queue: queueOpts(qLimit, order, spin)}
		what := fmt.Sprintf("NewKeyedTokenBucket(%+v)", opts)
		var k *limiter.KeyedTokenBucket[string]
		var err, tbErr error
		guard(t, what, func() { k, err = limiter.NewKeyedTokenBucket[string](opts) })
		guard(t, "NewTokenBucket", func() {
			var tb *limiter.TokenBucket
			if tb, tbErr = limiter.NewTokenBucket(opts); tb != nil {
				_ = tb.Close()
			}
		})
		invalid := firstProblem(problemIf(events <= 0 || per <= 0, "the rate is not positive"),
			problemIf(burst <= 0, "Burst is not positive"), queueProblem(qLimit, order, spin))
		if err != nil {
			if k != nil {
				t.Fatalf("%s: a set and the error %v", what, err)
			}
			oe := checkRefused(t, what, err, append([]string{"Rate", "Burst"}, queueFields...)...)
			var want *limiter.OptionError
			if !errors.As(tbErr, &want) || want.Field != oe.Field {
				t.Fatalf("%s: refused (%v), but NewTokenBucket of the same options: %v", what, err, tbErr)
			}
			return
		}
		switch {
		case k == nil:
			t.Fatalf("%s: nil set and nil error", what)
		case invalid != "":
			t.Fatalf("%s: accepted, but %s", what, invalid)
		case tbErr != nil:
			t.Fatalf("%s: accepted, but NewTokenBucket of the same options refuses: %v", what, tbErr)
		}
		guard(t, what+": use", func() { err = useKeyedBucket(k, burst) })
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	})
}

// useKeyedBucket checks that new keys of k have full buckets of burst,
// then closes k.
func useKeyedBucket(k *limiter.KeyedTokenBucket[string], burst int) error {
	if l := k.TryAcquire("a", 1); !l.Granted() || l.Permits() != 1 {
		return fmt.Errorf("fresh TryAcquire(a, 1) = {Granted:%v Permits:%d Err:%v}", l.Granted(), l.Permits(), l.Err())
	}
	if l := k.For("b").TryAcquire(burst); !l.Granted() || l.Permits() != burst {
		return fmt.Errorf("fresh For(b).TryAcquire(Burst) = {Granted:%v Permits:%d Err:%v}", l.Granted(), l.Permits(), l.Err())
	}
	if burst < math.MaxInt {
		if l := k.TryAcquire("c", burst+1); l.Granted() || !errors.Is(l.Err(), limiter.ErrExceedsLimit) {
			return fmt.Errorf("fresh TryAcquire(c, Burst+1) = {Granted:%v Err:%v}, want ErrExceedsLimit", l.Granted(), l.Err())
		}
	}
	if err := k.Close(); err != nil {
		return fmt.Errorf("Close: %v", err)
	}
	if l := k.TryAcquire("d", 1); l.Granted() || !errors.Is(l.Err(), limiter.ErrClosed) {
		return fmt.Errorf("TryAcquire after Close = {Granted:%v Err:%v}, want ErrClosed", l.Granted(), l.Err())
	}
	return nil
}
