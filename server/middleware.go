package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"github.com/rs/zerolog/hlog"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
)

// RequestIDHeader carries the request id in both directions: a caller's id is kept
// when it looks like one, so logs of a proxy and of this service line up.
const RequestIDHeader = "X-Request-Id"

// Log keys this package writes.
const (
	logKeyRequestID = "request_id"
	logKeyTeam      = "team"
)

var wellFormedRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

type teamKey struct{}

// TeamFrom returns the team that authenticated the request (see TeamAuth).
func TeamFrom(ctx context.Context) (store.Team, bool) {
	t, ok := ctx.Value(teamKey{}).(store.Team)
	return t, ok
}

// WithTeam returns ctx carrying team, for tests of handlers mounted with TeamAuth.
func WithTeam(ctx context.Context, team store.Team) context.Context {
	return context.WithValue(ctx, teamKey{}, team)
}

type scopesKey struct{}

// ScopesFrom returns the scopes of the token that authenticated the request (see
// TeamAuth); none outside an authenticated request.
func ScopesFrom(ctx context.Context) store.Scopes {
	s, _ := ctx.Value(scopesKey{}).(store.Scopes)
	return s
}

// WithScopes returns ctx carrying a token's scopes, for tests of handlers mounted
// with TeamAuth.
func WithScopes(ctx context.Context, scopes store.Scopes) context.Context {
	return context.WithValue(ctx, scopesKey{}, scopes)
}

// RequestID returns the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	if id, ok := ctx.Value(callerRequestIDKey{}).(string); ok {
		return id
	}
	if id, ok := hlog.IDFromCtx(ctx); ok {
		return id.String()
	}
	return ""
}

// callerRequestIDKey holds a request id the caller sent; ids this service makes
// are hlog's.
type callerRequestIDKey struct{}

// observe gives each request its own logger, an id carried by that logger and the
// X-Request-Id answer, and one log line when it is answered. Only the path is
// logged: query strings may carry one-time secrets (the installation state), and
// headers may carry tokens.
func (s *Server) observe(next http.Handler) http.Handler {
	logged := hlog.AccessHandler(logRequest)(next)
	newID := hlog.RequestIDHandler(logKeyRequestID, RequestIDHeader)(logged)
	withID := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !wellFormedRequestID.MatchString(id) {
			newID.ServeHTTP(w, r)
			return
		}
		zerolog.Ctx(r.Context()).UpdateContext(func(c zerolog.Context) zerolog.Context {
			return c.Str(logKeyRequestID, id)
		})
		w.Header().Set(RequestIDHeader, id)
		logged.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerRequestIDKey{}, id)))
	})
	return hlog.NewHandler(s.deps.Logger)(withID)
}

// logRequest writes the request's log line, an error for a 5xx answer. The
// request's logger names the request id and, once TeamAuth found it, the team.
func logRequest(r *http.Request, status, size int, duration time.Duration) {
	if status == 0 {
		// Nothing written: net/http answers 200.
		status = http.StatusOK
	}
	log := zerolog.Ctx(r.Context())
	ev := log.Info()
	if status >= 500 {
		ev = log.Error()
	}
	ev.Str("method", r.Method).
		Str("path", r.URL.Path).
		Int("status", status).
		Int("bytes", size).
		Dur("duration", duration).
		Str("remote", r.RemoteAddr).
		Msg("Request")
}

// ClientAddress is the address of the client r came from: the peer's IP, or with
// Config.TrustForwardedFor the last entry of X-Forwarded-For (the one the proxy in
// front wrote; the entries before it are the client's to write). An IPv6 address is
// cut to its /64, the least a site is given, so one host cannot pass for many.
func (s *Server) ClientAddress(r *http.Request) string {
	addr := r.RemoteAddr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	if s.cfg.TrustForwardedFor {
		if fwd := r.Header.Values("X-Forwarded-For"); len(fwd) > 0 {
			list := strings.Split(fwd[len(fwd)-1], ",")
			if last := strings.TrimSpace(list[len(list)-1]); last != "" {
				addr = last
			}
		}
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	if ip.Is6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return ip.String()
}

// hstsMaxAge is a year, the least HSTS preload lists accept. Subdomains are left
// out: the service's host says nothing of its neighbours'.
const hstsMaxAge = "max-age=31536000"

// secureHeaders sets the headers every answer needs, whoever writes it: nosniff, so
// no browser reads a stylesheet, a JSON error or a plain-text answer as another type,
// and Strict-Transport-Security when the service is reached over https. Handlers
// add their own (the pages' Content-Security-Policy).
func (s *Server) secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		if s.cfg.HSTS {
			h.Set("Strict-Transport-Security", hstsMaxAge)
		}
		next.ServeHTTP(w, r)
	})
}

// statusRecorder remembers whether a response has begun. Unwrap lets
// http.ResponseController reach Flush and deadlines of the real writer.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// recoverPanics turns a handler panic into a logged 500 instead of a dropped
// connection, so one bad request cannot take the process down.
// counted tells Deps.Requests of each request h answers on route, outside the
// route's options, so a refused token is counted as the route's 401. A handler
// that panicked counts as the 500 recoverPanics answers.
func (s *Server) counted(route string, h http.Handler) http.Handler {
	obs := s.deps.Requests
	if obs == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		start := time.Now()
		returned := false
		defer func() {
			status := rec.status
			switch {
			case !returned && status == 0:
				status = http.StatusInternalServerError
			case status == 0:
				status = http.StatusOK
			}
			obs.Request(route, status, time.Since(start))
		}()
		h.ServeHTTP(rec, r)
		returned = true
	})
}

func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				// The handler asked for the connection to be dropped; net/http does that.
				panic(p)
			}
			zerolog.Ctx(r.Context()).Error().
				Interface("panic", p).
				Str("stack", string(debug.Stack())).
				Msg("Handler panicked")
			if rec.status == 0 {
				WriteError(rec, http.StatusInternalServerError, "internal", "internal error; see the server log for request "+RequestID(r.Context()))
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

// refuseUnreadableURL refuses a request whose path or query holds a NUL
// character or bytes that are not UTF-8: no name, code or id of the service holds
// one, and PostgreSQL cannot even be asked about such a text, so the route's
// lookup would fail as an internal error rather than find nothing.
func (s *Server) refuseUnreadableURL(next http.Handler) http.Handler {
	refuse := s.counted(UnmatchedRoute, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusBadRequest, "invalid_request", unreadableURL(r.URL))
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unreadableURL(r.URL) != "" {
			refuse.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unreadableURL says what part of u holds a NUL character or bytes that are not
// UTF-8, or "" when none does.
func unreadableURL(u *url.URL) string {
	if !readableText(u.Path) {
		return "the path holds a NUL character or bytes that are not UTF-8; no name, code or id does"
	}
	query, _ := url.ParseQuery(u.RawQuery)
	for key, values := range query {
		if !readableText(key) {
			return "a query parameter's name holds a NUL character or bytes that are not UTF-8"
		}
		for _, v := range values {
			if !readableText(v) {
				return "query parameter " + strconv.Quote(key) + " holds a NUL character or bytes that are not UTF-8; no name, code or id does"
			}
		}
	}
	return ""
}

func readableText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

type rawBodyKey struct{}

type rawBody struct{ body io.ReadCloser }

// limitBody caps every request body at Config.MaxBodyBytes; MaxBody can grant a
// route more, which is why the unwrapped body is kept in the context.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), rawBodyKey{}, rawBody{r.Body})
		r = r.WithContext(ctx)
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// requireTeam authenticates the caller by bearer token and requires scope.
func (s *Server) requireTeam(scope store.Scope, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log := zerolog.Ctx(r.Context())
		header := r.Header.Get("Authorization")
		var team store.Team
		var scopes store.Scopes
		switch {
		case header == "" && s.deps.DevTeam != nil:
			// Nothing of the request proves who sent it, so any site a developer's
			// browser opens could post to the API as the dev team (a form, or a
			// fetch of text/plain, needs no preflight): such a request, told by the
			// browser's Sec-Fetch-Site or Origin, is refused.
			if err := s.devOrigins.Check(r); err != nil {
				WriteError(w, http.StatusForbidden, "cross_origin_request",
					"a request without a token acts as the dev team only when it does not come from another site's page; send a token (Authorization: Bearer <token>)")
				return
			}
			// A page of another site can also be its own origin: a name of the
			// attacker's made to resolve to this machine (DNS rebinding) passes the
			// origin check and reads the answers. Its requests name that host, while
			// the developer's browser and programs name this machine.
			if !loopbackHost(r.Host) {
				WriteError(w, http.StatusForbidden, "dev_team_not_local",
					"a request without a token acts as the dev team only when it names this machine (localhost, 127.0.0.1, [::1]) as its host, "+
						"since a web page can make any other name lead here; this one names "+strconv.Quote(r.Host)+": send a token (Authorization: Bearer <token>)")
				return
			}
			team, scopes = *s.deps.DevTeam, store.AllScopes
		case header == "":
			unauthorized(w, "missing_token", "this endpoint needs an API token: Authorization: Bearer <token>")
			return
		default:
			scheme, token, ok := strings.Cut(header, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
				unauthorized(w, "invalid_token", "the Authorization header must be 'Bearer <token>'")
				return
			}
			found, err := s.deps.Auth.AuthenticateAPIToken(r.Context(), secret.New(strings.TrimSpace(token)))
			if errors.Is(err, store.ErrNotFound) {
				unauthorized(w, "invalid_token", "the API token is unknown or revoked")
				return
			}
			if err != nil {
				log.Error().Err(err).Msg("Token lookup failed")
				WriteError(w, http.StatusServiceUnavailable, "auth_unavailable", "cannot check the API token right now; retry later")
				return
			}
			team, scopes = found.Team, found.Scopes
		}
		// The request's own logger learns the team, so that every later line of the
		// request names it, its log line included (also when the scope is refused).
		log.UpdateContext(func(c zerolog.Context) zerolog.Context { return c.Str(logKeyTeam, team.Name) })
		if !scopes.Has(scope) {
			insufficientScope(w, scope, scopes)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithScopes(WithTeam(r.Context(), team), scopes)))
	})
}

// loopbackHost reports whether a request's Host (with or without a port) names
// this machine: localhost or a name under it, or a loopback address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// insufficientScope answers a valid token that may not use the route, in RFC 6750's
// terms (error="insufficient_scope" and the scope needed) as well as the API's.
func insufficientScope(w http.ResponseWriter, need store.Scope, have store.Scopes) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="kukie-gitops", error="insufficient_scope", scope=%q`, need))
	WriteError(w, http.StatusForbidden, "insufficient_scope",
		fmt.Sprintf("this endpoint needs a token with the %s scope; this token has %s (make one with 'kukie-gitops token create --scope %s')", need, describeScopes(have), need))
}

func describeScopes(s store.Scopes) string {
	if len(s) == 0 {
		return "no scopes"
	}
	return s.String()
}

func unauthorized(w http.ResponseWriter, code, reason string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kukie-gitops"`)
	WriteError(w, http.StatusUnauthorized, code, reason)
}
