//go:build unix

package helmexec

import "syscall"

// processGroup puts a worker in a process group of its own, so a terminal's
// interrupt reaches the command that started it, which stops its renders,
// and not the worker itself.
func processGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
