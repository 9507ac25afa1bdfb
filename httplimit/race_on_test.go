//go:build race

package httplimit_test

// raceEnabled skips the tests that measure the heap, which the race
// detector's shadow memory makes meaningless (and slow).
const raceEnabled = true
