//go:build !race

package integration

// raceEnabled is false: the tests run without the race detector.
const raceEnabled = false
