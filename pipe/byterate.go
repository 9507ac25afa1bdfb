package pipe

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/rategate/rategate/limiter"
)

// MaxBytes is the largest size ParseBytes accepts, and the most bytes per
// period ParseByteRate accepts: 1 PiB (or the largest int, if smaller).
const MaxBytes = min(1<<50, math.MaxInt)

// byteUnits are the size units, lower case, with their number of bytes.
var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

const unitsHelp = "B, kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)"

// maxDigits bounds the digits of a size's number: more than any size up to
// MaxBytes needs, and few enough that parsing stays cheap on any input.
const maxDigits = 30

// ParseBytes parses a size in bytes: a number, optionally with a fraction,
// then optionally spaces and a unit: "1500", "64KiB", "2.5 MB", "1gib".
//
// Units are case-insensitive and always count bytes, never bits: B; kB, MB,
// GB, TB are powers of 1000; KiB, MiB, GiB, TiB are powers of 1024. So "kb"
// and "KB" are 1000 bytes, and "Mb" is a megabyte, not a megabit. A bare
// prefix ("k", "M", "Gi") is refused as ambiguous rather than guessed. A
// number without a unit counts bytes. The size must be a whole number of
// bytes from 1 to MaxBytes ("1.5KiB" is 1536 bytes; "0.1B" is refused). The
// arithmetic is exact: there is no floating point.
//
// It never panics, and its errors say what was expected.
func ParseBytes(s string) (int64, error) {
	n, err := parseBytes(s, true)
	if err != nil {
		return 0, fmt.Errorf("pipe: parse size %q: %w", s, err)
	}
	return n, nil
}

// ParseByteRate parses a byte rate: a size, as ParseBytes reads it but with
// a unit required, then "/" and a unit of time or a duration: "2MiB/s",
// "500kB/s", "1GB/min", "64 KiB / 500ms", "1mib/s". The unit of time is one
// of those limiter.ParseRate takes (ms, s, sec, second, m, min, minute, h,
// hr, hour, d, day, ...) or a duration such as 1500ms, all case-insensitive.
//
// The result is exact: "2MiB/s" is limiter.Per(2<<20, time.Second), and
// "1GB/min" is limiter.Per(1e9, time.Minute), not a rounded rate per second.
// The size needs a unit (at least B): "5/min", which reads as a count of
// events, is refused rather than taken as 5 bytes a minute.
//
// It never panics, and its errors say what was expected.
func ParseByteRate(s string) (limiter.Rate, error) {
	r, err := parseByteRate(s)
	if err != nil {
		return limiter.Rate{}, fmt.Errorf("pipe: parse byte rate %q: %w", s, err)
	}
	return r, nil
}

func parseByteRate(s string) (limiter.Rate, error) {
	size, per, ok := strings.Cut(s, "/")
	if !ok {
		if _, err := parseBytes(s, true); err != nil {
			return limiter.Rate{}, fmt.Errorf("want a size per unit of time, such as 2MiB/s: %w", err)
		}
		return limiter.Rate{}, fmt.Errorf("no unit of time: want a size per unit of time, such as %s/s", strings.TrimSpace(s))
	}
	n, err := parseBytes(size, false)
	if err != nil {
		return limiter.Rate{}, err
	}
	per = strings.ToLower(strings.TrimSpace(per))
	if per == "" {
		return limiter.Rate{}, errors.New("no unit of time after the \"/\": want s, ms, min, h, d or a duration such as 500ms")
	}
	// limiter.ParseRate knows the units of time and the durations.
	r, err := limiter.ParseRate("1/" + per)
	if err != nil {
		if d, derr := time.ParseDuration(per); derr == nil && d <= 0 {
			return limiter.Rate{}, fmt.Errorf("the period must be positive, got %v", d)
		}
		return limiter.Rate{}, fmt.Errorf("unknown unit of time %q: want s, ms, min, h, d or a duration such as 500ms", per)
	}
	return limiter.Per(int(n), r.Period()), nil
}

// parseBytes parses a size; bare says whether a number without a unit is
// allowed. Its errors do not repeat s.
func parseBytes(s string, bare bool) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty size: want a number and a unit, such as 64KiB")
	}
	num, unit := splitNumber(s)
	unit = strings.TrimSpace(unit)
	if num == "" {
		if strings.HasPrefix(s, "-") {
			return 0, errors.New("a size must be positive")
		}
		return 0, fmt.Errorf("%q does not start with a number: want a number and a unit, such as 64KiB", s)
	}
	mult, ok := byteUnits[strings.ToLower(unit)]
	switch {
	case !ok && isPrefix(unit):
		p := strings.ToUpper(unit[:1])
		si := strings.Replace(p, "K", "k", 1)
		return 0, fmt.Errorf("ambiguous unit %q: write %sB (powers of 1000) or %siB (powers of 1024)", unit, si, p)
	case !ok:
		return 0, fmt.Errorf("unknown unit %q: want %s", unit, unitsHelp)
	case unit == "" && !bare:
		return 0, fmt.Errorf("%q has no unit: write %sB for bytes, or use a unit such as KiB or MB", num, num)
	}
	return scale(num, mult)
}

// splitNumber splits s into a leading decimal number (digits, optionally a
// point and more digits) and the rest.
func splitNumber(s string) (num, rest string) {
	i, point := 0, false
	for ; i < len(s); i++ {
		c := s[i]
		if c == '.' && !point && i > 0 {
			point = true
			continue
		}
		if c < '0' || c > '9' {
			break
		}
	}
	return s[:i], s[i:]
}

// isPrefix reports whether unit is a bare SI or binary prefix: k, M, G, T,
// Ki, Mi, Gi, Ti in any case.
func isPrefix(unit string) bool {
	u := strings.TrimSuffix(strings.ToLower(unit), "i")
	return u == "k" || u == "m" || u == "g" || u == "t"
}

// scale returns num (decimal digits, perhaps with a point) times mult, if
// that is a whole number from 1 to MaxBytes.
func scale(num string, mult int64) (int64, error) {
	whole, frac, _ := strings.Cut(num, ".")
	if len(whole)+len(frac) > maxDigits {
		return 0, fmt.Errorf("%q has too many digits: a size is at most %d bytes", num, int64(MaxBytes))
	}
	// num = digits / 10^len(frac), exactly.
	digits, ok := new(big.Int).SetString(whole+frac, 10)
	if !ok {
		return 0, fmt.Errorf("%q is not a number", num)
	}
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	q, r := new(big.Int).QuoRem(digits.Mul(digits, big.NewInt(mult)), den, new(big.Int))
	switch {
	case r.Sign() != 0:
		return 0, fmt.Errorf("%s of its unit is not a whole number of bytes", num)
	case q.Sign() == 0:
		return 0, errors.New("a size must be positive, at least 1 byte")
	case !q.IsInt64() || q.Int64() > MaxBytes:
		return 0, fmt.Errorf("over the largest size, %d bytes (%s)", int64(MaxBytes), FormatBytes(MaxBytes))
	}
	return q.Int64(), nil
}
