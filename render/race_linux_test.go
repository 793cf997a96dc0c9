//go:build race

package render

// raceEnabled: the race detector maps several times the heap besides it.
const raceEnabled = true
