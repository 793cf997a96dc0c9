//go:build !race

package render

// raceTimeoutFactor is how many times Timeout a render may take in a binary built
// with the race detector (see timeout); this one is not.
const raceTimeoutFactor = 1
