//go:build race

package iter_test

// raceEnabled skips the tests that count allocations, which the race
// detector's runtime makes.
const raceEnabled = true
