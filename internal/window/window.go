package window

import (
	"slices"
	"time"
)

// Peak returns the most instants that fall in any one window [t, t+width),
// for any t: the size of the largest group of instants less than width
// apart from first to last. The instants may come in any order; Peak does
// not change the slice. It returns 0 for no instants or a width of 0 or
// less.
func Peak(instants []time.Duration, width time.Duration) int {
	ts := slices.Sorted(slices.Values(instants))
	most, j := 0, 0
	for i := range ts {
		// ts[i:j] are the instants in [ts[i], ts[i]+width).
		for j < len(ts) && ts[j] < ts[i]+width {
			j++
		}
		most = max(most, j-i)
	}
	return most
}
