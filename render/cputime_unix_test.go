//go:build unix

package render

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user and system) the process has used so far. On
// a loaded machine it grows with the work done, where wall time grows with the
// wait for a core too.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
