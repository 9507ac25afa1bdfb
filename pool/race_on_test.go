//go:build race

package pool_test

// raceEnabled skips the tests that measure the heap, which the race
// detector's runtime inflates.
const raceEnabled = true
