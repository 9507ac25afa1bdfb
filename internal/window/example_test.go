package window_test

import (
	"fmt"
	"time"

	"github.com/rategate/rategate/internal/window"
)

// A limit of 2 in any second, checked after the fact from when each grant
// came.
func ExamplePeak() {
	const s = time.Second
	grants := []time.Duration{0, 0, s, s + 500*time.Millisecond, 2 * s}
	fmt.Println(window.Peak(grants, s))
	// Output: 2
}
