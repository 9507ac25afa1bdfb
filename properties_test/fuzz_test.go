package properties_test

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

// Fuzz targets for ParseRate and for the option validation of every
// constructor. A failure is always reported as a test error: a panic is
// recovered and reported with the input, and a call that does not return
// within hangAfter is reported as a hang.

const hangAfter = 10 * time.Second

// guard runs f, turning a panic or a hang into a test failure.
func guard(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
				return
			}
			done <- ""
		}()
		f()
	}()
	timer := time.NewTimer(hangAfter)
	defer timer.Stop()
	select {
	case msg := <-done:
		if msg != "" {
			t.Fatalf("%s: %s", what, msg)
		}
	case <-timer.C:
		t.Fatalf("%s: did not return within %v", what, hangAfter)
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{
		"100/s", "5/min", "2/1500ms", "10/h", "3/2m30s", "1/ns", "7/1000ns", "3/1s", "1/µs", "1/us",
		"9223372036854775807/s", "140737488355328/s", "0/s", "-1/s", "1/0s", "1/-1s", "1/", "/s", "1",
		"", " 4 / s ", "1/1e3s", "1/.5s", "1/day", "1/d", "1/2h45m", "1/9999999h", "1/s/s", "+1/s",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var r limiter.Rate
		var err error
		guard(t, fmt.Sprintf("ParseRate(%q)", s), func() { r, err = limiter.ParseRate(s) })
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("ParseRate(%q): empty error", s)
			}
			return
		}
		if r.Events() <= 0 || r.Period() <= 0 {
			t.Fatalf("ParseRate(%q) = %v (%d per %dns), want a positive count and period", s, r, r.Events(), int64(r.Period()))
		}
		// String reads back as the same rate.
		var back limiter.Rate
		guard(t, fmt.Sprintf("ParseRate(%q)", r.String()), func() { back, err = limiter.ParseRate(r.String()) })
		if err != nil || back != r {
			t.Fatalf("ParseRate(%q) = %d per %dns, whose String %q parses as %d per %dns, %v",
				s, r.Events(), int64(r.Period()), r.String(), back.Events(), int64(back.Period()), err)
		}
		// A parsed rate is accepted by a constructor.
		var tb *limiter.TokenBucket
		guard(t, "NewTokenBucket", func() {
			tb, err = limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: r, Burst: 1})
		})
		if err == nil && tb == nil {
			t.Fatalf("NewTokenBucket(%v): nil limiter and nil error", r)
		}
		if err != nil {
			var oe *limiter.OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("NewTokenBucket(Rate %v): %v is not an *OptionError", r, err)
			}
		}
	})
}

// checkBuilt checks a constructor's result: (non-nil limiter, nil error), or
// (nil, *OptionError naming one of fields); invalid options (as the contract
// defines them: zero or negative limits, windows and rates, a bad queue
// option) must be rejected; a limiter that is built grants TryAcquire(1) when
// fresh, and Close does not fail.
func checkBuilt(t *testing.T, what string, lim testLimiter, err error, invalid string, fields ...string) {
	t.Helper()
	if err != nil {
		if lim != nil {
			t.Fatalf("%s: a limiter and the error %v", what, err)
		}
		checkRefused(t, what, err, fields...)
		return
	}
	if lim == nil {
		t.Fatalf("%s: nil limiter and nil error", what)
	}
	if invalid != "" {
		t.Fatalf("%s: accepted, but %s", what, invalid)
	}
	guard(t, what+": TryAcquire(1)", func() {
		l := lim.TryAcquire(1)
		if !l.Granted() || l.Permits() != 1 {
			err = fmt.Errorf("fresh TryAcquire(1) = {Granted:%v Permits:%d Err:%v}", l.Granted(), l.Permits(), l.Err())
		}
		l.Release()
		if cerr := lim.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("Close: %v", cerr)
		}
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// checkRefused checks that err is an *OptionError naming one of fields,
// in its Error text too, and returns it.
func checkRefused(t *testing.T, what string, err error, fields ...string) *limiter.OptionError {
	t.Helper()
	oe, ok := err.(*limiter.OptionError)
	if !ok {
		t.Fatalf("%s: error %T %v, want *limiter.OptionError", what, err, err)
	}
	known := false
	for _, f := range fields {
		known = known || oe.Field == f
	}
	if !known || !strings.Contains(oe.Error(), oe.Field) {
		t.Fatalf("%s: error %q names field %q, want one of %v", what, oe.Error(), oe.Field, fields)
	}
	return oe
}

// queueProblem names what the contract says is wrong with q, or "".
func queueProblem(qLimit, order int, spin int64) string {
	switch {
	case qLimit < 0:
		return "Queue.Limit is negative"
	case order != int(limiter.OldestFirst) && order != int(limiter.NewestFirst):
		return "Queue.Order is neither OldestFirst nor NewestFirst"
	case spin < 0:
		return "Queue.Spin is negative"
	}
	return ""
}

func queueOpts(qLimit, order int, spin int64) limiter.QueueOptions {
	return limiter.QueueOptions{Limit: qLimit, Order: limiter.Order(order), Spin: time.Duration(spin)}
}

var queueFields = []string{"Queue.Limit", "Queue.Order", "Queue.Spin"}

func firstProblem(ps ...string) string {
	for _, p := range ps {
		if p != "" {
			return p
		}
	}
	return ""
}

func problemIf(cond bool, p string) string {
	if cond {
		return p
	}
	return ""
}

func FuzzNewTokenBucket(f *testing.F) {
	f.Add(100, int64(time.Second), 10, 0, 0, int64(0))
	f.Add(3, int64(time.Second), 1, 5, 1, int64(time.Millisecond))
	f.Add(0, int64(time.Second), 1, 0, 0, int64(0))
	f.Add(1, int64(0), 1, 0, 0, int64(0))
	f.Add(1, int64(time.Second), 0, 0, 0, int64(0))
	f.Add(1, int64(-1), -1, -1, 2, int64(-1))
	f.Add(1, int64(1<<62), math.MaxInt, 0, 0, int64(0))
	f.Add(math.MaxInt, int64(1), math.MaxInt/2, 0, 0, int64(0))
	f.Fuzz(func(t *testing.T, events int, per int64, burst, qLimit, order int, spin int64) {
		opts := limiter.TokenBucketOptions{Rate: limiter.Per(events, time.Duration(per)), Burst: burst, Queue: queueOpts(qLimit, order, spin)}
		what := fmt.Sprintf("NewTokenBucket(%+v)", opts)
		var lim *limiter.TokenBucket
		var err error
		guard(t, what, func() { lim, err = limiter.NewTokenBucket(opts) })
		invalid := firstProblem(problemIf(events <= 0 || per <= 0, "the rate is not positive"),
			problemIf(burst <= 0, "Burst is not positive"), queueProblem(qLimit, order, spin))
		checkBuilt(t, what, asLimiter(lim), err, invalid, append([]string{"Rate", "Burst"}, queueFields...)...)
		if err == nil && (lim.Rate() != opts.Rate || lim.Burst() != burst) {
			t.Fatalf("%s: silently changed to Rate %v Burst %d", what, lim.Rate(), lim.Burst())
		}
	})
}

func FuzzNewLeakyBucket(f *testing.F) {
	f.Add(100, int64(time.Second), 0, 0, int64(0))
	f.Add(3, int64(time.Second), 4, 1, int64(time.Millisecond))
	f.Add(0, int64(time.Second), 0, 0, int64(0))
	f.Add(1, int64(-5), 0, 0, int64(0))
	f.Add(1, int64(1<<62), 0, 0, int64(0))
	f.Add(-1, int64(1), -1, 7, int64(-1))
	f.Fuzz(func(t *testing.T, events int, per int64, qLimit, order int, spin int64) {
		opts := limiter.LeakyBucketOptions{Rate: limiter.Per(events, time.Duration(per)), Queue: queueOpts(qLimit, order, spin)}
		what := fmt.Sprintf("NewLeakyBucket(%+v)", opts)
		var lim *limiter.LeakyBucket
		var err error
		guard(t, what, func() { lim, err = limiter.NewLeakyBucket(opts) })
		invalid := firstProblem(problemIf(events <= 0 || per <= 0, "the rate is not positive"), queueProblem(qLimit, order, spin))
		checkBuilt(t, what, asLimiter(lim), err, invalid, append([]string{"Rate"}, queueFields...)...)
		if err == nil && lim.Rate() != opts.Rate {
			t.Fatalf("%s: silently changed to Rate %v", what, lim.Rate())
		}
	})
}

func FuzzNewFixedWindow(f *testing.F) {
	f.Add(10, int64(time.Second), 0, 0, int64(0))
	f.Add(1, int64(1), 3, 1, int64(5))
	f.Add(0, int64(time.Second), 0, 0, int64(0))
	f.Add(5, int64(0), 0, 0, int64(0))
	f.Add(-3, int64(-3), -3, -3, int64(-3))
	f.Add(math.MaxInt, int64(1<<62), math.MaxInt, 0, int64(1<<62))
	f.Fuzz(func(t *testing.T, limit int, window int64, qLimit, order int, spin int64) {
		opts := limiter.FixedWindowOptions{Limit: limit, Window: time.Duration(window), Queue: queueOpts(qLimit, order, spin)}
		what := fmt.Sprintf("NewFixedWindow(%+v)", opts)
		var lim *limiter.FixedWindow
		var err error
		guard(t, what, func() { lim, err = limiter.NewFixedWindow(opts) })
		invalid := firstProblem(problemIf(limit <= 0, "Limit is not positive"), problemIf(window <= 0, "Window is not positive"),
			queueProblem(qLimit, order, spin))
		checkBuilt(t, what, asLimiter(lim), err, invalid, append([]string{"Limit", "Window"}, queueFields...)...)
		if err == nil && lim.Limit() != limit {
			t.Fatalf("%s: silently changed to Limit %d", what, lim.Limit())
		}
	})
}

func FuzzNewSlidingWindow(f *testing.F) {
	f.Add(10, int64(time.Second), 10, 0, 0, int64(0))
	f.Add(3, int64(10), 3, 2, 1, int64(1))
	f.Add(3, int64(10), 11, 0, 0, int64(0))
	f.Add(3, int64(time.Hour), 1<<20, 0, 0, int64(0))
	f.Add(3, int64(time.Hour), 1<<20+1, 0, 0, int64(0))
	f.Add(1, int64(time.Second), 0, 0, 0, int64(0))
	f.Add(0, int64(0), -1, -1, -1, int64(-1))
	f.Add(math.MaxInt, int64(1<<62), 7, 0, 0, int64(0))
	f.Fuzz(func(t *testing.T, limit int, window int64, segments, qLimit, order int, spin int64) {
		opts := limiter.SlidingWindowOptions{Limit: limit, Window: time.Duration(window), Segments: segments, Queue: queueOpts(qLimit, order, spin)}
		what := fmt.Sprintf("NewSlidingWindow(%+v)", opts)
		var lim *limiter.SlidingWindow
		var err error
		guard(t, what, func() { lim, err = limiter.NewSlidingWindow(opts) })
		invalid := firstProblem(problemIf(limit <= 0, "Limit is not positive"), problemIf(window <= 0, "Window is not positive"),
			problemIf(segments <= 0, "Segments is not positive"), problemIf(segments > 1<<20, "Segments is over 1<<20"),
			problemIf(int64(segments) > window, "Segments is more than Window in nanoseconds"), queueProblem(qLimit, order, spin))
		checkBuilt(t, what, asLimiter(lim), err, invalid, append([]string{"Limit", "Window", "Segments"}, queueFields...)...)
		if err == nil && lim.Limit() != limit {
			t.Fatalf("%s: silently changed to Limit %d", what, lim.Limit())
		}
	})
}

func FuzzNewSlidingLog(f *testing.F) {
	f.Add(10, int64(time.Second), 0, 0, int64(0))
	f.Add(2, int64(1500*time.Millisecond), 2, 1, int64(0))
	f.Add(0, int64(time.Second), 0, 0, int64(0))
	f.Add(1, int64(-1), 0, 0, int64(0))
	f.Add(-1, int64(1), 0, 5, int64(0))
	f.Add(math.MaxInt, int64(1<<62), 0, 0, int64(1<<62))
	f.Fuzz(func(t *testing.T, limit int, window int64, qLimit, order int, spin int64) {
		opts := limiter.SlidingLogOptions{Limit: limit, Window: time.Duration(window), Queue: queueOpts(qLimit, order, spin)}
		what := fmt.Sprintf("NewSlidingLog(%+v)", opts)
		var lim *limiter.SlidingLog
		var err error
		guard(t, what, func() { lim, err = limiter.NewSlidingLog(opts) })
		invalid := firstProblem(problemIf(limit <= 0, "Limit is not positive"), problemIf(window <= 0, "Window is not positive"),
			queueProblem(qLimit, order, spin))
		checkBuilt(t, what, asLimiter(lim), err, invalid, append([]string{"Limit", "Window"}, queueFields...)...)
		if err == nil && lim.Limit() != limit {
			t.Fatalf("%s: silently changed to Limit %d", what, lim.Limit())
		}
	})
}

func FuzzNewConcurrency(f *testing.F) {
	f.Add(10, 0, 0, int64(0))
	f.Add(1, 1, 1, int64(time.Millisecond))
	f.Add(0, 0, 0, int64(0))
	f.Add(-1, -1, -1, int64(-1))
	f.Add(math.MaxInt, math.MaxInt, 0, int64(0))
	f.Fuzz(func(t *testing.T, limit, qLimit, order int, spin int64) {
		opts := limiter.ConcurrencyOptions{Limit: limit, Queue: queueOpts(qLimit, order, spin)}
		what := fmt.Sprintf("NewConcurrency(%+v)", opts)
		var lim *limiter.Concurrency
		var err error
		guard(t, what, func() { lim, err = limiter.NewConcurrency(opts) })
		invalid := firstProblem(problemIf(limit <= 0, "Limit is not positive"), queueProblem(qLimit, order, spin))
		checkBuilt(t, what, asLimiter(lim), err, invalid, append([]string{"Limit"}, queueFields...)...)
		if err == nil && lim.Limit() != limit {
			t.Fatalf("%s: silently changed to Limit %d", what, lim.Limit())
		}
	})
}

// asLimiter turns a typed nil pointer into a nil interface.
func asLimiter[T interface {
	*E
	testLimiter
}, E any](l T) testLimiter {
	if l == nil {
		return nil
	}
	return l
}
