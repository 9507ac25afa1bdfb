//go:build !race

package iter_test

const raceEnabled = false
