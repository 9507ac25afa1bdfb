package limiter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rategate/rategate/internal/exact"
)

// Rate is a number of events per duration, kept as two integers so that
// limiters compute with it exactly: Per(3, time.Second) is three a second,
// not one every 333.333333 ms rounded. The zero Rate is invalid.
type Rate struct {
	n   int64
	per time.Duration
}

// Per returns the rate of n events per duration d: limiter.Per(100, time.Second).
// Per does not validate; constructors reject a Rate whose n or d is not
// positive with an *OptionError.
func Per(n int, d time.Duration) Rate { return Rate{n: int64(n), per: d} }

// Events returns n of "n per d".
func (r Rate) Events() int64 { return r.n }

// Period returns d of "n per d".
func (r Rate) Period() time.Duration { return r.per }

// IsZero reports whether r is the zero Rate.
func (r Rate) IsZero() bool { return r.n == 0 && r.per == 0 }

// String formats r so that ParseRate reads it back: "100/s", "5/1m0s".
func (r Rate) String() string {
	switch r.per {
	case time.Second:
		return fmt.Sprintf("%d/s", r.n)
	case time.Minute:
		return fmt.Sprintf("%d/min", r.n)
	case time.Hour:
		return fmt.Sprintf("%d/h", r.n)
	case time.Millisecond:
		return fmt.Sprintf("%d/ms", r.n)
	}
	return fmt.Sprintf("%d/%s", r.n, r.per)
}

func (r Rate) validate(field string) error {
	if r.n <= 0 {
		return optErr(field, "events must be positive, got %d (use limiter.Per(n, d) with n > 0)", r.n)
	}
	if r.per <= 0 {
		return optErr(field, "period must be positive, got %v", r.per)
	}
	return nil
}

// reduced returns n/per in lowest terms.
func (r Rate) reduced() (n, d int64) {
	g := gcd(r.n, int64(r.per))
	return r.n / g, int64(r.per) / g
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

var rateUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "us": time.Microsecond, "µs": time.Microsecond,
	"ms": time.Millisecond, "s": time.Second, "sec": time.Second, "second": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "d": 24 * time.Hour, "day": 24 * time.Hour,
}

// ParseRate parses "N/unit" or "N/duration": "100/s", "5/min", "2/1500ms",
// "10/h", "3/2m30s". N is a positive integer; a unit is one of ns, us, µs,
// ms, s, sec, second, m, min, minute, h, hr, hour, d, day; a duration is
// anything time.ParseDuration accepts. It never panics.
func ParseRate(s string) (Rate, error) {
	num, den, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("limiter: parse rate %q: want N/unit or N/duration, as in 100/s", s)
	}
	num, den = strings.TrimSpace(num), strings.TrimSpace(den)
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return Rate{}, fmt.Errorf("limiter: parse rate %q: count %q is not a positive integer", s, num)
	}
	if n > math.MaxInt32*int64(1<<16) {
		return Rate{}, fmt.Errorf("limiter: parse rate %q: count %d is too large", s, n)
	}
	d, ok := rateUnits[den]
	if !ok {
		if den == "" || (den[0] < '0' || den[0] > '9') && den[0] != '.' {
			return Rate{}, fmt.Errorf("limiter: parse rate %q: unknown unit %q", s, den)
		}
		d, err = time.ParseDuration(den)
		if err != nil {
			return Rate{}, fmt.Errorf("limiter: parse rate %q: %v", s, err)
		}
	}
	if d <= 0 {
		return Rate{}, fmt.Errorf("limiter: parse rate %q: period must be positive", s)
	}
	return Rate{n: n, per: d}, nil
}

// mulDiv, mulDivCeil and ceilDiv are the exact integer arithmetic of
// package internal/exact (functions, not variables, so that they inline).
func mulDiv(a, b, c int64) (int64, bool)     { return exact.MulDiv(a, b, c) }
func mulDivCeil(a, b, c int64) (int64, bool) { return exact.MulDivCeil(a, b, c) }
func ceilDiv(a, b int64) int64               { return exact.CeilDiv(a, b) }

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
