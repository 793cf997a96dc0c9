package githubtest

import (
	"sync"
	"time"
)

// Clock is the fake's notion of "now": the wall clock plus an offset that tests move
// forward with Advance, so installation tokens and archive links can expire without
// waiting. App JWTs are still checked against the wall clock, because client libraries
// mint them from time.Now.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now returns the fake's current time, truncated to seconds as GitHub's timestamps are.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset).UTC().Truncate(time.Second)
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}
