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
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/textcut"
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

// requestError marks an error of a call the service made to GitHub (every
// method of Repos): a connection that failed or timed out is then known to be
// GitHub's, where the same error of a cluster or a chart repository is not. It
// changes nothing else of the error it wraps.
type requestError struct{ err error }

func (e *requestError) Error() string { return e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// called marks err, if any, as the error of a call to GitHub.
func called(err error) error {
	if err == nil {
		return nil
	}
	return &requestError{err: err}
}

// maxAnswerMessage bounds GitHub's own words quoted by Answer.
const maxAnswerMessage = 200

// Answer says in words what GitHub answered a request that failed, for the people
// who read a change's problem, history and check run: "GitHub answered 503 Service
// Unavailable", "GitHub answered 403 Forbidden: Resource not accessible by
// integration", "GitHub did not answer in time". The error itself names the
// request's method and address, and a download's may carry its token (an archive
// link's ?token=); the answer holds neither, only the status and GitHub's message.
// ok is false when err holds no answer of GitHub's nor a call to it (a connection
// is known to be GitHub's only through Repos).
func Answer(err error) (string, bool) {
	var be *BudgetError
	if errors.As(err, &be) {
		return "the request was held back to stay within GitHub's rate limit (" + be.Reason + ")", true
	}
	var rl *gh.RateLimitError
	if errors.As(err, &rl) {
		return "GitHub's rate limit was reached", true
	}
	var al *gh.AbuseRateLimitError
	if errors.As(err, &al) {
		return "GitHub's secondary rate limit was reached", true
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		answer := statusWords(er.Response.StatusCode)
		words := []string{}
		if m := messageWords(er.Message); m != "" && !strings.EqualFold(m, http.StatusText(er.Response.StatusCode)) {
			words = append(words, m)
		}
		for _, e := range er.Errors {
			if m := messageWords(e.Message); m != "" {
				words = append(words, m)
			}
		}
		if len(words) > 0 {
			answer += ": " + strings.Join(words, "; ")
		}
		return answer, true
	}
	var se *StatusError
	if errors.As(err, &se) {
		return statusWords(se.StatusCode), true
	}
	var re *requestError
	if !errors.As(err, &re) {
		return "", false
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "GitHub did not answer in time", true
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "GitHub's answer broke off", true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "the connection to GitHub failed", true
	}
	return "", false
}

func statusWords(code int) string {
	if text := http.StatusText(code); text != "" {
		return fmt.Sprintf("GitHub answered %d %s", code, text)
	}
	return fmt.Sprintf("GitHub answered HTTP %d", code)
}

// messageWords is GitHub's message as Answer quotes it: on one line, bounded, and
// none at all when it holds an address (GitHub's messages name none; one that does
// is no message of GitHub's to repeat).
func messageWords(m string) string {
	m = strings.Join(strings.Fields(m), " ")
	if strings.Contains(m, "://") {
		return ""
	}
	return textcut.Cut(m, maxAnswerMessage)
}
