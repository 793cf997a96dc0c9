// Package server owns the HTTP front of the service: the net/http server with its
// timeouts and body limits, the middleware every request passes (request id, request
// log, security headers, panic recovery, team authentication, each answer told by route to a
// RequestObserver), the health endpoints, JSON answers and
// errors, and graceful shutdown.
//
// It is the framework only: the service's endpoints live in the api/ packages
// (changes, setup, webhook), which mount themselves here; health and readiness are
// its only routes. It must not hold business logic, nor reach the database, GitHub
// or a cluster other than through the Authenticator and the readiness checks it is
// given.
//
// # Mounting routes
//
// Other packages add their endpoints to a Server before it runs, with Go 1.22
// method-and-path patterns:
//
//	srv, err := server.New(cfg, deps)
//	srv.Handle("POST /api/v1/changes", createChange, server.TeamAuth(store.ScopeChange))
//	srv.Handle("POST /webhooks/github", receive, server.MaxBody(25<<20))
//	err = srv.Run(ctx) // returns after ctx is cancelled and in-flight requests drained
//
// Every route gets the request id, request log and panic recovery, and the body
// limit of Config.MaxBodyBytes unless MaxBody says otherwise. TeamAuth makes a route
// require an API token (Authorization: Bearer kuk_...) with the scope the route
// needs; the handler then reads the caller's team with TeamFrom and the token's
// scopes with ScopesFrom. LimitPerClient limits a route anyone may call per client
// address (ClientAddress) and LimitPerTeam a token route per team, answered 429
// rate_limited past it; WriteRateLimited
// answers any other ratelimit refusal alike. Errors are answered with WriteError, which writes
// {"error": "<stable_code>", "reason": "<human text>"}.
package server

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
)

// Defaults used where Config leaves a field zero.
const (
	DefaultAddress           = "127.0.0.1:8080"
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultShutdownTimeout   = 30 * time.Second
	DefaultMaxBodyBytes      = 1 << 20
	// MaxHeaderBytes bounds a request's headers on every listener the service
	// opens; larger ones are answered 431.
	MaxHeaderBytes = 64 << 10
	// readinessCheckTimeout bounds all of /readyz's checks together, below the
	// chart's 3 s probe timeout, so a check that runs out is answered, and logged,
	// by name before the probe gives up.
	readinessCheckTimeout = 2500 * time.Millisecond
)

// Config holds the server's own settings.
type Config struct {
	Address           string
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// ShutdownTimeout bounds how long in-flight requests may take to finish after
	// shutdown begins; requests still running then are cut off.
	ShutdownTimeout time.Duration
	// DrainDelay is how long the server goes on accepting requests once shutdown
	// begins, answering /readyz 503, before it stops listening: a load balancer
	// (a Kubernetes Service's endpoints, an ingress) takes a few seconds to stop
	// sending a terminating replica new requests, and a listener closed at once
	// refuses them, GitHub's webhook deliveries among them, which GitHub does not
	// deliver again by itself. 0 stops listening at once.
	DrainDelay   time.Duration
	MaxBodyBytes int64
	// HSTS makes every answer carry Strict-Transport-Security: the service is
	// reached over https (server.public_url), even when a proxy in front of it ends
	// TLS and speaks plain HTTP to it.
	HSTS bool
	// TrustForwardedFor takes a request's client address from the last entry of
	// X-Forwarded-For, the one the proxy in front added; only for a service reached
	// through such a proxy alone, since anyone else can write the header.
	TrustForwardedFor bool
}

func (c Config) withDefaults() Config {
	if c.Address == "" {
		c.Address = DefaultAddress
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return c
}

// Authenticator resolves an API token to the team it belongs to and its scopes. A
// token that is unknown or revoked must be reported as store.ErrNotFound.
// *store.DB implements it.
type Authenticator interface {
	AuthenticateAPIToken(ctx context.Context, token secret.Secret) (store.APITokenAuth, error)
}

// Check is one readiness condition, such as "the database answers".
type Check struct {
	Name  string
	Check func(ctx context.Context) error
	// Warn, when set and the check passed, describes a condition worth knowing
	// that does not make the replica unready (a busy connection pool): the answer
	// stays 200 and lists it, and it is logged. Empty means nothing to report.
	Warn func() string
}

// PublicReason is implemented by a check's error that can say why it failed
// without naming hosts, users or schema details; /readyz shows that reason.
type PublicReason interface {
	PublicReason() string
}

// Deps are the collaborators a Server needs.
type Deps struct {
	Logger zerolog.Logger
	// Auth resolves bearer tokens; required, so the API can never run unauthenticated.
	Auth Authenticator
	// DevTeam, when set, is the team of requests that carry no token at all, with
	// every scope. For the dev profile only: it makes the API usable without creating
	// tokens, and is logged as insecure at startup. A request with a bad token is
	// still refused.
	DevTeam *store.Team
	// Ready lists what /readyz checks.
	Ready []Check
	// Requests, when set, is told of every request answered: its route's pattern
	// ("POST /api/v1/changes"; UnmatchedRoute for a path no route serves), status
	// and duration.
	Requests RequestObserver
	// PerClient, when set, limits each client address on the routes mounted with
	// LimitPerClient (see ClientAddress).
	PerClient *ratelimit.Limiter
}

// RequestObserver is told of each request a Server answered; metrics implement
// it. It must not block.
type RequestObserver interface {
	Request(route string, status int, d time.Duration)
}

// UnmatchedRoute is the route of a request no route serves (answered 404).
const UnmatchedRoute = "unmatched"

// Server is the HTTP server. Create it with New, add routes, then Run.
type Server struct {
	cfg      Config
	deps     Deps
	mux      *http.ServeMux
	handler  http.Handler
	draining atomic.Bool
	addr     atomic.Value // net.Addr once listening
	patterns []string     // every pattern mounted, in mount order
	// devOrigins refuses the requests of another site's page that would act as
	// Deps.DevTeam without a token.
	devOrigins *http.CrossOriginProtection
	// drainWait is time.After; tests end the drain delay themselves.
	drainWait func(time.Duration) <-chan time.Time
}

// New builds a server with /healthz and /readyz mounted.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Auth == nil {
		return nil, errors.New("server: no authenticator configured; refusing to serve an unauthenticated API")
	}
	cfg = cfg.withDefaults()
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("server: max body bytes must be positive, got %d", cfg.MaxBodyBytes)
	}
	s := &Server{cfg: cfg, deps: deps, mux: http.NewServeMux(), drainWait: time.After, devOrigins: http.NewCrossOriginProtection()}
	s.handler = s.observe(s.secureHeaders(s.recoverPanics(s.limitBody(s.refuseUnreadableURL(s.mux)))))
	s.mux.Handle("GET /healthz", s.counted("GET /healthz", http.HandlerFunc(s.healthz)))
	s.mux.Handle("GET /readyz", s.counted("GET /readyz", http.HandlerFunc(s.readyz)))
	s.patterns = []string{"GET /healthz", "GET /readyz"}
	s.mux.Handle("/", s.counted(UnmatchedRoute, http.HandlerFunc(s.unmatched)))
	return s, nil
}

// probedMethods are the methods unmatched asks the routes for when a request's
// method finds none: every method a route of the service may be mounted with.
var probedMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// unmatched answers a request no route serves: 405 method_not_allowed with Allow
// when routes serve its path with other methods (a PUT of a path that takes GET and
// POST is a wrong method, not a path that does not exist), else 404 not_found.
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range probedMethods {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		WriteError(w, http.StatusMethodNotAllowed, "method_not_allowed",
			r.Method+" is not served at "+r.URL.Path+"; it takes "+strings.Join(allow, ", "))
		return
	}
	WriteError(w, http.StatusNotFound, "not_found", "no route for "+r.Method+" "+r.URL.Path)
}

// Handler is the complete handler with all middleware, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// RouteOption changes how one route is served.
type RouteOption func(s *Server, h http.Handler) http.Handler

// TeamAuth requires a valid API token (or, in the dev profile, no token at all)
// that has scope, and puts the caller's team and the token's scopes into the
// request context. A valid token without the scope is answered 403
// insufficient_scope naming the scope needed.
func TeamAuth(scope store.Scope) RouteOption {
	return func(s *Server, h http.Handler) http.Handler { return s.requireTeam(scope, h) }
}

// LimitPerClient limits how often one client address (see ClientAddress) may call
// the route, by Deps.PerClient: for the routes anyone may call that make the service
// call out (GitHub's token endpoint after sign-in, the installation lookup after
// setup), so that nobody makes it call without bound. Over the limit: 429
// rate_limited with Retry-After.
func LimitPerClient() RouteOption {
	return func(s *Server, h http.Handler) http.Handler {
		if s.deps.PerClient == nil {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var refused *ratelimit.RefusedError
			if err := s.deps.PerClient.Allow(s.ClientAddress(r)); errors.As(err, &refused) {
				WriteRateLimited(w, refused)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// LimitPerTeam limits how often the caller's team may call the route, by limit
// (none when nil), whatever its token: for a token route that makes the service call
// GitHub or a cluster. It goes after TeamAuth, whose team it counts. Over the limit:
// 429 rate_limited with Retry-After.
func LimitPerTeam(limit *ratelimit.Limiter) RouteOption {
	return func(_ *Server, h http.Handler) http.Handler {
		if limit == nil {
			return h
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			t, ok := TeamFrom(r.Context())
			if !ok {
				// Mounted without TeamAuth before it: nothing to count, so nothing runs.
				WriteError(w, http.StatusUnauthorized, "missing_token", "an API token is required")
				return
			}
			var refused *ratelimit.RefusedError
			if err := limit.Allow(t.ID); errors.As(err, &refused) {
				WriteRateLimited(w, refused)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// MaxBody replaces the default request body limit for one route, such as webhooks,
// whose payloads GitHub caps at 25 MB.
func MaxBody(n int64) RouteOption {
	return func(_ *Server, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if raw, ok := r.Context().Value(rawBodyKey{}).(rawBody); ok {
				r.Body = http.MaxBytesReader(w, raw.body, n)
			}
			h.ServeHTTP(w, r)
		})
	}
}

// Handle mounts h on a Go 1.22 pattern ("POST /api/v1/changes"). Options apply in
// order, the first one outermost.
func (s *Server) Handle(pattern string, h http.Handler, opts ...RouteOption) {
	for i := len(opts) - 1; i >= 0; i-- {
		h = opts[i](s, h)
	}
	s.mux.Handle(pattern, s.counted(pattern, h))
	s.patterns = append(s.patterns, pattern)
}

// Patterns lists the patterns of every route mounted with Handle or HandleFunc, in
// the order they were mounted (the health endpoints first), so a service can check
// its own route table against what it serves.
func (s *Server) Patterns() []string { return slices.Clone(s.patterns) }

// HandleFunc is Handle for a function.
func (s *Server) HandleFunc(pattern string, h http.HandlerFunc, opts ...RouteOption) {
	s.Handle(pattern, h, opts...)
}

// Addr is the address the server listens on, once it does; nil before.
func (s *Server) Addr() net.Addr {
	a, _ := s.addr.Load().(net.Addr)
	return a
}

// Run listens on the configured address and serves until ctx is cancelled, then
// shuts down gracefully (see Serve).
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Address)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Address, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is cancelled. Then it fails /readyz so load
// balancers stop sending traffic, goes on serving for Config.DrainDelay while they
// do, stops accepting connections, waits up to
// Config.ShutdownTimeout for in-flight requests to finish, and returns nil if they
// all did. Request contexts are not cancelled by shutdown: a request that started
// is allowed to complete.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	log := s.deps.Logger
	s.addr.Store(ln.Addr())
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          stdlog.New(log.With().Str("component", "net/http").Logger(), "", 0),
		BaseContext: func(net.Listener) context.Context {
			return log.WithContext(context.WithoutCancel(ctx))
		},
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info().Str("address", ln.Addr().String()).Msg("Listening")

	select {
	case err := <-serveErr:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	if s.cfg.DrainDelay > 0 {
		log.Info().Dur("drain_delay", s.cfg.DrainDelay).Msg("Shutting down: /readyz fails, still serving while load balancers stop sending requests")
		select {
		case <-s.drainWait(s.cfg.DrainDelay):
		case err := <-serveErr:
			return fmt.Errorf("serve http: %w", err)
		}
	}
	log.Info().Dur("timeout", s.cfg.ShutdownTimeout).Msg("Shutting down: draining in-flight requests")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: requests still running after %s were cut off: %w", s.cfg.ShutdownTimeout, err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	log.Info().Msg("HTTP server stopped")
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		WriteError(w, http.StatusServiceUnavailable, "not_ready", "shutting down")
		return
	}
	// One deadline for all the checks, not one each: the answer must come within
	// the probe's timeout, or a slow but answering database makes the probe time
	// out while every check passes.
	ctx, cancel := context.WithTimeout(r.Context(), readinessCheckTimeout)
	defer cancel()
	var warnings []string
	for _, c := range s.deps.Ready {
		if err := c.Check(ctx); err != nil {
			zerolog.Ctx(r.Context()).Warn().Err(err).Str("check", c.Name).Msg("Readiness check failed")
			// The endpoint is unauthenticated and often public; the error may name
			// hosts, users or schema details, so it goes to the log only, and the
			// answer carries a reason only when the error has one fit to show.
			reason := "check failed"
			var public PublicReason
			if errors.As(err, &public) {
				reason += " (" + public.PublicReason() + ")"
			}
			WriteError(w, http.StatusServiceUnavailable, "not_ready", c.Name+": "+reason+"; see the server log for request "+RequestID(r.Context()))
			return
		}
		if c.Warn == nil {
			continue
		}
		if warning := c.Warn(); warning != "" {
			zerolog.Ctx(r.Context()).Warn().Str("check", c.Name).Str("warning", warning).Msg("Ready with a warning")
			warnings = append(warnings, c.Name+": "+warning)
		}
	}
	if len(warnings) > 0 {
		WriteJSON(w, http.StatusOK, readyAnswer{Status: "ready", Warnings: warnings})
		return
	}
	WriteJSON(w, http.StatusOK, readyAnswer{Status: "ready"})
}

// readyAnswer is /readyz's 200 body.
type readyAnswer struct {
	Status   string   `json:"status"`
	Warnings []string `json:"warnings,omitempty"`
}
