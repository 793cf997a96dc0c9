package githubtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// apiPrefix is where GitHub Enterprise serves the REST API; go-github's
	// WithEnterpriseURLs appends it to the base URL.
	apiPrefix = "/api/v3"
	// uploadsPrefix is GitHub Enterprise's upload API root (unused, accepted as a base).
	uploadsPrefix = "/api/uploads"
	docsBase      = "https://docs.github.com/rest"
	// unmatchedEndpoint counts requests no route answers.
	unmatchedEndpoint = "unmatched"
)

// Server is a running fake GitHub. Create it with New (one per test) or NewServer (one
// shared by a package's tests, closed in TestMain). All methods are safe for concurrent
// use.
type Server struct {
	srv           *httptest.Server
	clock         *Clock
	dir           string
	app           *app
	webhookSecret string

	// mu guards everything below, including writes to the git repositories: the fake
	// favours simple, serialized state over throughput.
	mu            sync.Mutex
	nextID        int64
	accounts      map[string]*account
	repos         map[string]*repo
	installations map[int64]*installation
	tokens        map[string]*installationToken
	archives      map[string]*archiveLink
	requests      map[string]int
	totalRequests int
	// notModified counts 304 answers to conditional requests (see conditional.go).
	notModified int
	// limits enforces GitHub's secondary rate limits when a test asks (limits.go).
	limits limiter
	// onRequest holds test hooks run before an endpoint is served (see OnRequest).
	onRequest map[string]func()
	// faults are the injected faults in injection order (see InjectFault).
	faults []*injectedFault
	// verifiedCommits are commits GitHub would have signed (made by the App through
	// the API without a custom author or committer).
	verifiedCommits map[string]bool
	// oauth holds the App's OAuth client credentials, people who can sign in, their
	// authorization codes and user access tokens (see oauth.go).
	oauth *oauthState

	// recording and recorded: every request received, when a test asked for them
	// (see RecordRequests).
	recording bool
	recorded  []RecordedRequest

	hooks *deliverer
	// closing is closed when Close starts, so requests a fault holds end and Close
	// does not wait on them.
	closing   chan struct{}
	closeOnce sync.Once
}

// New starts a fake GitHub that is closed when the test ends.
func New(t TB) *Server {
	t.Helper()
	s, err := NewServer()
	if err != nil {
		t.Fatalf("start fake github: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// NewServer starts a fake GitHub; the caller must Close it. Use it to share one server
// between the tests of a package (start it in TestMain).
func NewServer() (*Server, error) {
	dir, err := os.MkdirTemp("", "githubtest-")
	if err != nil {
		return nil, fmt.Errorf("create repository root: %w", err)
	}
	a, err := newApp()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	hookSecret, err := randomToken(20)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("generate webhook secret: %w", err)
	}
	oauth, err := newOAuthState()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{
		oauth:           oauth,
		clock:           &Clock{},
		dir:             dir,
		app:             a,
		webhookSecret:   hookSecret,
		nextID:          1000,
		accounts:        map[string]*account{},
		repos:           map[string]*repo{},
		installations:   map[int64]*installation{},
		tokens:          map[string]*installationToken{},
		archives:        map[string]*archiveLink{},
		requests:        map[string]int{},
		onRequest:       map[string]func(){},
		verifiedCommits: map[string]bool{},
		closing:         make(chan struct{}),
	}
	s.hooks = newDeliverer(s)
	s.srv = httptest.NewServer(s.routes())
	return s, nil
}

// Close stops the server, the webhook deliverer and removes the repositories.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.srv.Close()
	s.hooks.stop()
	_ = os.RemoveAll(s.dir)
}

// URL is the server's root, e.g. http://127.0.0.1:34567. The REST API answers here and
// under /api/v3/.
func (s *Server) URL() string { return s.srv.URL }

// APIURL is the GitHub Enterprise style REST base URL, <URL>/api/v3/.
func (s *Server) APIURL() string { return s.srv.URL + apiPrefix + "/" }

// UploadURL is the GitHub Enterprise style upload base URL, <URL>/api/uploads/.
func (s *Server) UploadURL() string { return s.srv.URL + uploadsPrefix + "/" }

// Client returns an HTTP client for the server (plain transport, no credentials).
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Clock returns the clock that drives token and link expiry.
func (s *Server) Clock() *Clock { return s.clock }

// RequestCount returns how many requests reached the endpoint, named by its route
// pattern as listed by Endpoints (e.g. "POST /app/installations/{installation_id}/access_tokens").
func (s *Server) RequestCount(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[endpoint]
}

// TotalRequests returns how many HTTP requests the server received, of any kind
// (REST, archive downloads, git over HTTP, unknown paths).
func (s *Server) TotalRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.totalRequests
}

// RequestCounts returns a copy of the per-endpoint counters.
func (s *Server) RequestCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.requests))
	for k, v := range s.requests {
		out[k] = v
	}
	return out
}

// ResetRequestCounts sets every counter back to zero.
func (s *Server) ResetRequestCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = map[string]int{}
	s.totalRequests = 0
}

// OnRequest makes fn run each time a request reaches endpoint (a pattern as listed by
// Endpoints), after it is counted and before it is answered; nil removes the hook. It
// lets a test observe the service while it waits on GitHub, e.g. that it holds no
// database transaction across the call. fn runs outside the server's lock and may
// block to make GitHub slow.
func (s *Server) OnRequest(endpoint string, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fn == nil {
		delete(s.onRequest, endpoint)
		return
	}
	s.onRequest[endpoint] = fn
}

// Endpoints lists the route patterns the server answers, sorted.
func (s *Server) Endpoints() []string {
	var out []string
	for _, r := range s.routeTable() {
		if r.dispatch != nil {
			out = append(out, r.dispatch...)
			continue
		}
		out = append(out, r.pattern)
	}
	sort.Strings(out)
	return out
}

type route struct {
	pattern string
	// doc is the path of GitHub's REST documentation for the endpoint, used in error
	// bodies as GitHub does.
	doc     string
	handler http.HandlerFunc
	// dispatch names the endpoints a route serves when one mux pattern must take
	// several of GitHub's paths; such a route counts each request under the endpoint's
	// name itself (see serveCounted) instead of under its pattern.
	dispatch []string
}

type docKey struct{}

func (s *Server) routeTable() []route {
	var routes []route
	routes = append(routes, s.appRoutes()...)
	routes = append(routes, s.repoRoutes()...)
	routes = append(routes, s.pullRoutes()...)
	routes = append(routes, s.checkRoutes()...)
	routes = append(routes, s.commentRoutes()...)
	routes = append(routes, s.collaboratorRoutes()...)
	routes = append(routes, s.archiveRoutes()...)
	routes = append(routes, s.smartHTTPRoutes()...)
	routes = append(routes, s.oauthRoutes()...)
	routes = append(routes, s.webFlowRoutes()...)
	return routes
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routeTable() {
		if rt.dispatch != nil {
			mux.HandleFunc(rt.pattern, rt.handler)
			continue
		}
		mux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			s.serveCounted(w, r, rt.pattern, rt.doc, rt.handler)
		})
	}
	// serve is the real handling of a request, past limits and faults.
	serve := func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			s.count(unmatchedEndpoint)
			writeError(w, r, http.StatusNotFound, "Not Found")
			return
		}
		if r.Method != http.MethodGet {
			mux.ServeHTTP(w, r)
			return
		}
		cw := &conditionalWriter{ResponseWriter: w, ifNoneMatch: r.Header.Get("If-None-Match"), notModified: func() {
			s.mu.Lock()
			s.notModified++
			s.mu.Unlock()
		}}
		mux.ServeHTTP(cw, r)
		cw.finish()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = stripAPIPrefix(r)
		s.record(r)
		done, retryAfter := s.limits.admit(r, time.Now())
		if done == nil {
			s.mu.Lock()
			s.totalRequests++
			s.mu.Unlock()
			refuseOverLimit(w, retryAfter)
			return
		}
		if f := s.takeFault(r); f != nil {
			if f.Served {
				// The work is done; its answer goes nowhere, and the fault answers instead.
				serve(&lostAnswer{header: http.Header{}}, r)
			}
			answered, busy := s.serveFault(w, r, f)
			if busy != nil {
				s.finishLater(busy, done)
				return
			}
			if answered {
				done()
				return
			}
		}
		defer done()
		serve(w, r)
	})
}

// lostAnswer is a ResponseWriter whose answer nobody receives: a Served fault's
// real answer.
type lostAnswer struct{ header http.Header }

func (l *lostAnswer) Header() http.Header         { return l.header }
func (l *lostAnswer) Write(b []byte) (int, error) { return len(b), nil }
func (l *lostAnswer) WriteHeader(int)             {}

// serveCounted counts the request under endpoint and serves it with GitHub's
// documentation link for errors.
func (s *Server) serveCounted(w http.ResponseWriter, r *http.Request, endpoint, doc string, h http.HandlerFunc) {
	s.count(endpoint)
	h(w, r.WithContext(context.WithValue(r.Context(), docKey{}, docsBase+doc)))
}

// stripAPIPrefix lets the same routes answer at the root and under /api/v3/.
func stripAPIPrefix(r *http.Request) *http.Request {
	if !strings.HasPrefix(r.URL.Path, apiPrefix+"/") {
		return r
	}
	r2 := r.Clone(r.Context())
	u := *r.URL
	u.Path = strings.TrimPrefix(u.Path, apiPrefix)
	if u.RawPath != "" {
		u.RawPath = strings.TrimPrefix(u.RawPath, apiPrefix)
	}
	r2.URL = &u
	return r2
}

// count records a request to endpoint and runs its OnRequest hook, if any.
func (s *Server) count(endpoint string) {
	s.mu.Lock()
	s.requests[endpoint]++
	s.totalRequests++
	hook := s.onRequest[endpoint]
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
}

func (s *Server) newID() int64 {
	s.nextID++
	return s.nextID
}

// apiURL builds the API URL of a resource the way GitHub links them in bodies.
func (s *Server) apiURL(format string, args ...any) string {
	return s.srv.URL + apiPrefix + "/" + fmt.Sprintf(format, args...)
}

// htmlURL builds a web URL on the fake host.
func (s *Server) htmlURL(format string, args ...any) string {
	return s.srv.URL + "/" + fmt.Sprintf(format, args...)
}

// apiError is GitHub's error body.
type apiError struct {
	Message          string       `json:"message"`
	Errors           []fieldError `json:"errors,omitempty"`
	DocumentationURL string       `json:"documentation_url"`
	Status           string       `json:"status"`
}

// fieldError is one entry of a 422 "Validation Failed" body.
type fieldError struct {
	Resource string `json:"resource,omitempty"`
	Field    string `json:"field,omitempty"`
	Code     string `json:"code"`
	Message  string `json:"message,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("encode response: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-GitHub-Media-Type", "github.v3; format=json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func docURL(r *http.Request) string {
	if d, ok := r.Context().Value(docKey{}).(string); ok {
		return d
	}
	return docsBase
}

func writeError(w http.ResponseWriter, r *http.Request, status int, message string) {
	writeJSON(w, status, apiError{Message: message, DocumentationURL: docURL(r), Status: strconv.Itoa(status)})
}

// found returns v, or answers GitHub's 404 when a resource the path names is missing
// (nil) and returns nil.
func found[T any](w http.ResponseWriter, r *http.Request, v *T) *T {
	if v == nil {
		writeError(w, r, http.StatusNotFound, "Not Found")
	}
	return v
}

// writeValidation answers 422 "Validation Failed" with field errors, as GitHub does for
// semantically invalid requests.
func writeValidation(w http.ResponseWriter, r *http.Request, errs ...fieldError) {
	writeJSON(w, http.StatusUnprocessableEntity, apiError{
		Message:          "Validation Failed",
		Errors:           errs,
		DocumentationURL: docURL(r),
		Status:           strconv.Itoa(http.StatusUnprocessableEntity),
	})
}

// writeInvalidRequest answers 422 the way GitHub's request schema validation does
// ("Invalid request.\n\n<reason>").
func writeInvalidRequest(w http.ResponseWriter, r *http.Request, reason string) {
	writeError(w, r, http.StatusUnprocessableEntity, "Invalid request.\n\n"+reason)
}

// field names a request field and whether the request supplied it.
type field struct {
	name     string
	supplied bool
}

// requireFields answers GitHub's schema error for the first field the request lacks
// (422 `"<name>" wasn't supplied.`) and reports whether all were supplied.
func requireFields(w http.ResponseWriter, r *http.Request, fields ...field) bool {
	for _, f := range fields {
		if !f.supplied {
			writeInvalidRequest(w, r, fmt.Sprintf("%q wasn't supplied.", f.name))
			return false
		}
	}
	return true
}

// decodeBody reads a JSON request body; a malformed body gets GitHub's 400.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		writeError(w, r, http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

// pageOf applies GitHub's page/per_page query parameters to a list of n items and
// returns the slice bounds. List handlers use paginate, which also writes the Link
// header.
func pageOf(q url.Values, n int) (int, int) {
	return pageRequestOf(q).bounds(n)
}
