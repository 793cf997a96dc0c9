//go:build !race

package helmexec

const raceFactor = 1
