//go:build !unix

package helmexec

import "syscall"

func processGroup() *syscall.SysProcAttr { return nil }
