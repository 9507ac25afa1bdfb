//go:build !race

package adaptive

const raceDetector = false
