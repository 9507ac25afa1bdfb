//go:build !race

package precise

const raceEnabled = false
