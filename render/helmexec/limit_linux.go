package helmexec

import (
	"fmt"
	"os"
	"syscall"
)

// preferOOMKill makes the process the first the kernel's OOM killer ends when
// memory runs out around it: the workers share the service's container (one
// memory cgroup), and a chart pushing its worker to the address-space limit
// while the container is near its own limit must cost that render, not the
// service. Raising one's own score needs no privilege.
func preferOOMKill() error {
	return os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
}

// limitAddressSpace limits the process to the address space it maps now plus
// extra (several times extra under the race detector, whose shadow memory grows
// with the heap), hard: a mapping beyond it fails, and Go ends the process on a
// failed heap or stack mapping. A lower limit the process inherited stays.
func limitAddressSpace(extra int64) error {
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return err
	}
	var pages uint64
	if _, err := fmt.Sscan(string(statm), &pages); err != nil {
		return fmt.Errorf("read /proc/self/statm: %w", err)
	}
	limit := pages*uint64(os.Getpagesize()) + uint64(extra)*raceFactor
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &cur); err != nil {
		return err
	}
	if cur.Cur < limit {
		return nil
	}
	return syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit})
}
