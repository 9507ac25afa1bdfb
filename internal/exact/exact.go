// Package exact is the integer arithmetic rategate computes rates with:
// a·b/c through a 128-bit product, rounded down or up, with no floating
// point and no silent overflow. It is written once here for the limiters,
// the byte streams, the HTTP headers and the Redis-backed limiters.
package exact

import (
	"math"
	"math/bits"
)

// MulDiv returns floor(a·b/c) and whether it fits in an int64, for
// a, b >= 0 and c > 0.
func MulDiv(a, b, c int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, false
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > math.MaxInt64 {
		return 0, false
	}
	return int64(q), true
}

// MulDivCeil returns ceil(a·b/c) and whether it fits in an int64, for
// a, b >= 0 and c > 0.
func MulDivCeil(a, b, c int64) (int64, bool) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 0, false
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return 0, false
	}
	return int64(q), true
}

// CeilDiv returns ceil(a/b) for a >= 0 and b > 0.
func CeilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
