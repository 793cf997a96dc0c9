package githubtest

import (
	"fmt"
	"math"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// Fault makes the fake misbehave the way GitHub does on a bad day: answer an error
// status, hold a request, or never answer at all. Inject one with Server.InjectFault.
type Fault struct {
	// Method is the HTTP method the fault applies to; "" matches any method.
	Method string
	// Path is a pattern matched against the request path, with the /api/v3 prefix of
	// the Enterprise base URL removed and without the query string. Segments are split
	// on '/' and matched one by one with path.Match, so '*' matches within exactly one
	// segment ("/repos/*/*/check-runs", "/repos/acme/*/git/*"); a final "**" segment
	// matches one or more remaining segments ("/repos/*/*/tarball/**",
	// "/repos/*/*/git/refs/**"). "" matches every path.
	Path string
	// Times is how many matching requests the fault affects; 0 affects every one until
	// the fault is removed.
	Times int
	// Delay holds the request this long before answering Status, or before passing it
	// to the real handler when Status is 0. A request whose client gives up while held
	// is not answered.
	Delay time.Duration
	// Status is the status to answer with (e.g. 502, 403, 429); 0 passes the request
	// through to the real handler after Delay.
	Status int
	// Header holds extra response headers, e.g. Retry-After, X-RateLimit-Remaining,
	// X-RateLimit-Reset.
	Header http.Header
	// Body is the response body; "" answers GitHub's JSON error body with the status
	// text as its message.
	Body string
	// Hold, when set, holds the request until the channel is closed (or the client
	// gives up, or the server closes), then goes on as after Delay: a test decides
	// when a request in flight is answered.
	Hold <-chan struct{}
	// Hang never answers: the request is held until the client gives up (its context
	// ends, e.g. a client timeout) or the server closes. Status and Body are ignored.
	Hang bool
	// Served has the real handler serve the request first, its effects made (a
	// pull request opened, a ref or a check run created), and only its answer lost:
	// replaced by Status, or never sent with Hang. GitHub fails so when it times out
	// or a proxy in front of it answers 502 after the work was done; a client that
	// takes such a failure for "nothing happened" and simply tries again makes the
	// effect twice. Served needs Status or Hang (InjectFault panics otherwise); the
	// request counts in RequestCount as one its endpoint served.
	Served bool
	// A request held by Delay, Hold or Hang whose client gave up goes on counting
	// toward the enforced concurrency limit (see SecondaryLimits.ServerTimeout) as
	// long as the fault would have held it: GitHub does not see a client leave.
}

// injectedFault is a Fault in the server's list with its bookkeeping. Fields other than
// the Fault are guarded by Server.mu.
type injectedFault struct {
	Fault
	key      faultKey
	segments []string
	hits     int
	removed  bool
}

// faultKey names faults for FaultHits.
type faultKey struct{ method, path string }

// On returns f applied to requests with method (or "" for any) to paths matching
// pattern (see Fault.Path).
func (f Fault) On(method, pattern string) Fault {
	f.Method, f.Path = method, pattern
	return f
}

// Rate limit documentation URLs as GitHub puts them in error bodies; clients tell a
// secondary rate limit from other 403s by the latter's fragment.
const (
	primaryRateLimitDoc   = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-rate-limits"
	secondaryRateLimitDoc = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	// rateLimitPerHour is the primary limit an installation's headers report.
	rateLimitPerHour = 5000
)

// PrimaryRateLimit is GitHub's answer once an installation used its hourly requests:
// 403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset at reset (UTC epoch seconds).
// Some endpoints answer 429 instead; set Status to get that.
func PrimaryRateLimit(reset time.Time) Fault {
	h := http.Header{}
	h.Set("X-RateLimit-Limit", strconv.Itoa(rateLimitPerHour))
	h.Set("X-RateLimit-Remaining", "0")
	h.Set("X-RateLimit-Used", strconv.Itoa(rateLimitPerHour))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	return Fault{
		Status: http.StatusForbidden,
		Header: h,
		Body:   errorBody("API rate limit exceeded for installation.", primaryRateLimitDoc, http.StatusForbidden),
	}
}

// SecondaryRateLimit is GitHub's answer to too many requests in a burst: 403 with
// Retry-After (whole seconds, rounded up) and the secondary rate limit message. Some
// endpoints answer 429 instead; set Status to get that.
func SecondaryRateLimit(retryAfter time.Duration) Fault {
	h := http.Header{}
	h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(retryAfter.Seconds())), 10))
	return Fault{
		Status: http.StatusForbidden,
		Header: h,
		Body: errorBody("You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			secondaryRateLimitDoc, http.StatusForbidden),
	}
}

// ServerError is an outage: status (500, 502, 503, 504) with GitHub's error body.
func ServerError(status int) Fault {
	return Fault{Status: status}
}

func errorBody(message, doc string, status int) string {
	return fmt.Sprintf(`{"message":%q,"documentation_url":%q,"status":"%d"}`, message, doc, status)
}

// InjectFault makes requests matching f misbehave as f says until remove is called or
// f.Times requests were affected. Faults apply to every request the server receives
// (REST, archive downloads, git over HTTP) before routing; when several match, the one
// injected first that has requests left wins. A request answered by a fault counts in
// TotalRequests and FaultHits but not in RequestCount, since no endpoint served it; a
// request a Status 0 fault only delays is counted by its endpoint as usual. A bad Path
// pattern panics.
func (s *Server) InjectFault(f Fault) (remove func()) {
	if f.Served && f.Status == 0 && !f.Hang {
		panic("githubtest: a Served fault needs a Status or Hang: the answer it loses must be replaced by something")
	}
	segments := splitPath(f.Path)
	for _, seg := range segments {
		if _, err := path.Match(seg, ""); err != nil {
			panic(fmt.Sprintf("githubtest: fault path %q: %v", f.Path, err))
		}
	}
	if f.Header != nil {
		f.Header = f.Header.Clone()
	}
	inj := &injectedFault{Fault: f, key: faultKey{f.Method, f.Path}, segments: segments}
	s.mu.Lock()
	s.faults = append(s.faults, inj)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		inj.removed = true
	}
}

// FaultHits returns how many requests faults injected with method and pattern (as in
// Fault.Method and Fault.Path) affected, removed or used up ones included.
func (s *Server) FaultHits(method, pattern string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.faults {
		if f.key == (faultKey{method, pattern}) {
			n += f.hits
		}
	}
	return n
}

// takeFault returns the fault that applies to r, counting the hit, or nil.
func (s *Server) takeFault(r *http.Request) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.faults {
		if f.removed || (f.Times > 0 && f.hits >= f.Times) {
			continue
		}
		if f.Method != "" && f.Method != r.Method || !matchSegments(f.segments, splitPath(r.URL.Path)) {
			continue
		}
		f.hits++
		if (f.Status != 0 || f.Hang) && !f.Served { // a served one is counted by its endpoint
			s.totalRequests++
		}
		out := f.Fault
		return &out
	}
	return nil
}

// serveFault plays f on the request and reports whether it answered (or abandoned)
// the request; false means the real handler should serve it. A request whose client
// gave up while the fault held it is still being served, as far as GitHub's limits
// go, until the fault would have let it go: busy is closed then (never, for Hang),
// and is nil when the server is done with the request.
func (s *Server) serveFault(w http.ResponseWriter, r *http.Request, f *Fault) (answered bool, busy <-chan struct{}) {
	if f.Hang {
		select {
		case <-r.Context().Done():
			return true, make(chan struct{})
		case <-s.closing:
			return true, nil
		}
	}
	if f.Hold != nil {
		select {
		case <-f.Hold:
		case <-r.Context().Done():
			return true, f.Hold
		case <-s.closing:
			return true, nil
		}
	}
	if f.Delay > 0 {
		end := time.Now().Add(f.Delay)
		t := time.NewTimer(f.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return true, closedAt(end)
		case <-s.closing:
			return true, nil
		}
	}
	if f.Status == 0 {
		return false, nil
	}
	for k, vs := range f.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	body := f.Body
	if body == "" {
		body = errorBody(http.StatusText(f.Status), docsBase, f.Status)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
	}
	w.WriteHeader(f.Status)
	_, _ = w.Write([]byte(body))
	return true, nil
}

// closedAt returns a channel closed at t.
func closedAt(t time.Time) <-chan struct{} {
	c := make(chan struct{})
	time.AfterFunc(time.Until(t), func() { close(c) })
	return c
}

// finishLater ends a request's share of the limits (done) once busy is closed or
// the server closes.
func (s *Server) finishLater(busy <-chan struct{}, done func()) {
	go func() {
		defer done()
		select {
		case <-busy:
		case <-s.closing:
		}
	}()
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// matchSegments matches path segments against pattern segments (see Fault.Path). No
// pattern segments match every path.
func matchSegments(pattern, segs []string) bool {
	if len(pattern) == 0 {
		return true
	}
	for i, p := range pattern {
		if p == "**" && i == len(pattern)-1 {
			return len(segs) > i
		}
		if i >= len(segs) {
			return false
		}
		if ok, _ := path.Match(p, segs[i]); !ok {
			return false
		}
	}
	return len(segs) == len(pattern)
}
