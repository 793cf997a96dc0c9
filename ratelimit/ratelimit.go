// Package ratelimit bounds how often one caller (a team, a client address) may do
// something costly: a token bucket per caller (golang.org/x/time/rate), so a burst
// passes at once and a steady stream at the configured rate, and the callers held are
// the most recent ones up to a fixed number, so a flood of new callers cannot grow
// memory. It knows nothing of HTTP: server answers a refusal 429 with Retry-After,
// the MCP tools as a tool error.
package ratelimit

import (
	"fmt"
	"math"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// maxCallers is how many callers' buckets are held. A caller evicted for a newer
// one starts again with a full burst, which needs this many others in between.
const maxCallers = 10000

// Limiter allows each caller Burst actions at once and PerMinute a minute after.
// A nil *Limiter allows everything.
type Limiter struct {
	what      string
	perMinute int
	burst     int
	buckets   *lru.Cache[string, *rate.Limiter]
	// allowed holds the keys of the most recent actions allowed by AllowRepeat,
	// as caller and key; mu makes looking one up and allowing it one step.
	mu      sync.Mutex
	allowed *lru.Cache[string, struct{}]
}

// New is a Limiter of perMinute actions a minute, burst at once, for each caller;
// what names the action in refusals ("changes"). Both must be positive.
func New(what string, perMinute, burst int) (*Limiter, error) {
	if perMinute <= 0 || burst <= 0 {
		return nil, fmt.Errorf("rate limit of %s: %d a minute with a burst of %d: both must be positive", what, perMinute, burst)
	}
	buckets, err := lru.New[string, *rate.Limiter](maxCallers)
	if err != nil {
		return nil, fmt.Errorf("rate limit of %s: %w", what, err)
	}
	allowed, err := lru.New[string, struct{}](maxCallers)
	if err != nil {
		return nil, fmt.Errorf("rate limit of %s: %w", what, err)
	}
	return &Limiter{what: what, perMinute: perMinute, burst: burst, buckets: buckets, allowed: allowed}, nil
}

// Allow takes one action of caller's bucket now, or returns a *RefusedError saying
// when the next one is allowed; a refused action takes nothing.
func (l *Limiter) Allow(caller string) error {
	return l.allowAt(caller, time.Now())
}

// AllowRepeat is Allow for an action that a key names (a change's idempotency
// key): the same key again takes nothing once the action was allowed, since a
// client repeating a request it may not have seen answered (a retry, a double
// click, many replicas of one assistant) starts nothing new, and refusing it
// would make the retry idempotency keys exist for fail. An empty key is Allow.
// The most recent maxCallers keys are remembered; one forgotten takes a token
// again.
func (l *Limiter) AllowRepeat(caller, key string) error {
	return l.allowRepeatAt(caller, key, time.Now())
}

func (l *Limiter) allowRepeatAt(caller, key string, now time.Time) error {
	if l == nil || key == "" {
		return l.allowAt(caller, now)
	}
	id := caller + "\x00" + key
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.allowed.Contains(id) {
		return nil
	}
	if err := l.allowAt(caller, now); err != nil {
		return err
	}
	l.allowed.Add(id, struct{}{})
	return nil
}

func (l *Limiter) allowAt(caller string, now time.Time) error {
	if l == nil {
		return nil
	}
	// Two first calls of one caller may both make a bucket; Add keeps one, and the
	// other's action is one more than the burst at most.
	b, ok := l.buckets.Get(caller)
	if !ok {
		b = rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), l.burst)
		l.buckets.Add(caller, b)
	}
	r := b.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		return &RefusedError{What: l.what, PerMinute: l.perMinute, Burst: l.burst, RetryAfter: delay}
	}
	return nil
}

// RefusedError is an action over its caller's limit.
type RefusedError struct {
	What      string
	PerMinute int
	Burst     int
	// RetryAfter is how long until the caller's next action is allowed.
	RetryAfter time.Duration
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up, at least 1: what
// a Retry-After header says.
func (e *RefusedError) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("too many %s: at most %d at once and %d a minute; retry in %d s", e.What, e.Burst, e.PerMinute, e.RetryAfterSeconds())
}
