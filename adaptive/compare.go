package adaptive

import (
	"cmp"
	"math/bits"

	"github.com/rategate/rategate/limiter"
)

// compareRates returns -1, 0 or +1 as a is slower than, as fast as, or
// faster than b, exactly: a.n/a.d against b.n/b.d as 128-bit products.
// Both rates have positive counts and periods.
func compareRates(a, b limiter.Rate) int {
	ahi, alo := bits.Mul64(uint64(a.Events()), uint64(b.Period()))
	bhi, blo := bits.Mul64(uint64(b.Events()), uint64(a.Period()))
	if ahi != bhi {
		return cmp.Compare(ahi, bhi)
	}
	return cmp.Compare(alo, blo)
}
