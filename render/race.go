//go:build race

package render

// raceTimeoutFactor is how many times Timeout a render may take in a binary built
// with the race detector (see timeout).
const raceTimeoutFactor = 10
