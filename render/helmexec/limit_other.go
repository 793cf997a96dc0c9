//go:build !linux

package helmexec

// limitAddressSpace has no hard limit to set outside Linux (RLIMIT_AS is not
// enforced there): a worker is bounded by Go's memory and stack limits and by
// being killed at its render's deadline.
func limitAddressSpace(int64) error { return nil }

// preferOOMKill has no OOM killer preference to set outside Linux.
func preferOOMKill() error { return nil }
