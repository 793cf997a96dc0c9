package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	gh "github.com/google/go-github/v62/github"
)

// defaultRateLimitWait is how long to stay away after a rate limit that names no
// time: GitHub's documentation asks for at least a minute.
const defaultRateLimitWait = time.Minute

// StatusError is an answer of GitHub that go-github does not turn into one of its
// error types: a failed archive redirect or download. It keeps the status and the
// headers so RetryAt and Transient can read them.
type StatusError struct {
	Op         string
	StatusCode int
	Header     http.Header
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: GitHub answered %d %s", e.Op, e.StatusCode, http.StatusText(e.StatusCode))
}

// RetryAt reports whether err is GitHub asking to be called again later (a primary
// or secondary rate limit, as a 403 or a 429) and from when: the X-RateLimit-Reset
// of a primary limit, the Retry-After of a secondary one, or a minute after now when
// GitHub names no time. go-github's own refusals before a request (its client
// remembers the last limit) carry the same times, and so does a request the client's
// budget held back (*BudgetError).
func RetryAt(err error, now time.Time) (time.Time, bool) {
	var be *BudgetError
	if errors.As(err, &be) {
		return be.Until, true
	}
	var rl *gh.RateLimitError
	if errors.As(err, &rl) {
		if rl.Rate.Reset.Time.IsZero() {
			return now.Add(defaultRateLimitWait), true
		}
		return rl.Rate.Reset.Time, true
	}
	var al *gh.AbuseRateLimitError
	if errors.As(err, &al) {
		if al.RetryAfter == nil {
			return now.Add(defaultRateLimitWait), true
		}
		return now.Add(*al.RetryAfter), true
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return headersRetryAt(er.Response.StatusCode, er.Response.Header, now)
	}
	var se *StatusError
	if errors.As(err, &se) {
		return headersRetryAt(se.StatusCode, se.Header, now)
	}
	return time.Time{}, false
}

// headersRetryAt reads GitHub's rate limit headers from an answer go-github did not
// classify (it knows only 403 rate limits; GitHub also answers 429).
func headersRetryAt(status int, h http.Header, now time.Time) (time.Time, bool) {
	if status != http.StatusForbidden && status != http.StatusTooManyRequests {
		return time.Time{}, false
	}
	if v := h.Get("Retry-After"); v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
			return now.Add(time.Duration(secs) * time.Second), true
		}
		if at, err := http.ParseTime(v); err == nil {
			return at, true
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if secs, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil && secs > 0 {
			return time.Unix(secs, 0), true
		}
		return now.Add(defaultRateLimitWait), true
	}
	if status == http.StatusTooManyRequests {
		return now.Add(defaultRateLimitWait), true
	}
	return time.Time{}, false // a 403 without rate limit headers is a refused permission
}

// Transient reports whether err may pass without anyone changing anything: a rate
// limit, a 5xx, a request that timed out, a broken connection or a truncated body.
// Everything else (404, 422, a refused permission) fails the same way again.
func Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if _, ok := RetryAt(err, time.Now()); ok {
		return true
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode >= 500
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode >= 500
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var ue *url.Error
	return errors.As(err, &ue) // the request did not get an answer at all
}
