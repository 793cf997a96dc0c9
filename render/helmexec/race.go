//go:build race

package helmexec

// raceFactor: the race detector maps several times the heap besides it.
const raceFactor = 6
