//go:build race

package integration

// raceEnabled builds the proxy with the race detector when the tests run
// with it, so a data race in the product fails the test that provoked it.
const raceEnabled = true
