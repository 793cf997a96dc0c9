package githubtest

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SecondaryLimits are GitHub's secondary rate limits, as EnforceSecondaryLimits makes
// the fake apply them to each caller (an installation's token, the App's JWT, or no
// credentials at all). GitHub's own values are 100 concurrent requests and 80
// content-creating requests a minute (500 an hour); a test scales the window down so
// it does not wait for minutes.
type SecondaryLimits struct {
	// Concurrent is how many requests of one caller may be in flight at once; 0: no
	// limit.
	Concurrent int
	// Content is how many content-creating requests (POST, PATCH, PUT, DELETE on the
	// REST API; GraphQL, OAuth and git over HTTP are not) one caller may make in any
	// window of Per; 0: no limit.
	Content int
	Per     time.Duration
	// ServerTimeout is how long GitHub serves a request before it ends it (GitHub:
	// 10 s): a request stops counting toward Concurrent when its handler returns or
	// this long after it arrived, whichever comes first. Whether its client is still
	// there does not matter: GitHub goes on serving a request whose client gave up.
	// The fake cannot stop its handler, which finishes what it does, unseen by the
	// limit. 0: DefaultServerTimeout.
	ServerTimeout time.Duration
}

// DefaultServerTimeout is how long GitHub serves a request at most.
const DefaultServerTimeout = 10 * time.Second

// limiter is the state of enforced secondary limits. Its own mutex keeps it off the
// server's lock, which handlers hold while they work.
type limiter struct {
	mu       sync.Mutex
	limits   SecondaryLimits
	inFlight map[string]int
	// content holds the arrival times of each caller's content-creating requests
	// within the last window, oldest first.
	content    map[string][]time.Time
	violations int
}

// EnforceSecondaryLimits makes the fake refuse every request over l the way GitHub
// does (403, Retry-After and the secondary rate limit message), counting each refusal
// in LimitViolations. A request refused counts toward no limit. The zero value stops
// enforcing.
func (s *Server) EnforceSecondaryLimits(l SecondaryLimits) {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	s.limits.limits = l
	s.limits.inFlight = map[string]int{}
	s.limits.content = map[string][]time.Time{}
}

// LimitViolations returns how many requests went over the enforced secondary limits
// (and were refused for it).
func (s *Server) LimitViolations() int {
	s.limits.mu.Lock()
	defer s.limits.mu.Unlock()
	return s.limits.violations
}

// admit applies the secondary limits to r. It returns the function that ends the
// request's share of the concurrency limit (safe to call more than once; the
// server timeout ends it too), or a nonzero wait when r is over a limit and must be
// refused with that Retry-After.
func (l *limiter) admit(r *http.Request, now time.Time) (done func(), retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.limits
	if lim.Concurrent <= 0 && lim.Content <= 0 {
		return func() {}, 0
	}
	caller := callerOf(r)
	if lim.Concurrent > 0 && l.inFlight[caller] >= lim.Concurrent {
		l.violations++
		return nil, time.Second
	}
	if lim.Content > 0 && createsContent(r) {
		recent := l.content[caller]
		for len(recent) > 0 && !recent[0].After(now.Add(-lim.Per)) {
			recent = recent[1:]
		}
		if len(recent) >= lim.Content {
			l.content[caller] = recent
			l.violations++
			return nil, max(recent[0].Add(lim.Per).Sub(now), time.Millisecond)
		}
		l.content[caller] = append(recent, now)
	}
	l.inFlight[caller]++
	inFlight := l.inFlight // EnforceSecondaryLimits starts a new count
	var once sync.Once
	end := func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			inFlight[caller]--
		})
	}
	timeout := lim.ServerTimeout
	if timeout <= 0 {
		timeout = DefaultServerTimeout
	}
	t := time.AfterFunc(timeout, end)
	return func() {
		t.Stop()
		end()
	}, 0
}

// callerOf names whose limits a request counts against: its credentials (a token, a
// JWT) stand for the installation or the App.
func callerOf(r *http.Request) string {
	c := credentials(r)
	if c == "" {
		return "anonymous"
	}
	if isJWT(c) {
		return "app"
	}
	return "token:" + c
}

// createsContent reports whether GitHub counts r as content-creating.
func createsContent(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	p := r.URL.Path
	return p != "/graphql" && !strings.HasPrefix(p, "/login/oauth/") && !strings.Contains(p, ".git/")
}

// refuseOverLimit answers GitHub's secondary rate limit refusal.
func refuseOverLimit(w http.ResponseWriter, retryAfter time.Duration) {
	f := SecondaryRateLimit(retryAfter)
	w.Header().Set("Retry-After", strconv.FormatInt(int64(math.Ceil(retryAfter.Seconds())), 10))
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(f.Status)
	_, _ = w.Write([]byte(f.Body))
}
