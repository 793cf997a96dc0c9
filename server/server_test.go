package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

type fakeAuth struct{ err error }

func (f fakeAuth) AuthenticateAPIToken(context.Context, secret.Secret) (store.APITokenAuth, error) {
	return store.APITokenAuth{}, f.err
}

func newServer(t *testing.T, cfg server.Config, deps server.Deps) (*server.Server, *servicetest.SyncBuffer) {
	t.Helper()
	logs := &servicetest.SyncBuffer{}
	deps.Logger = zerolog.New(logs)
	if deps.Auth == nil {
		deps.Auth = fakeAuth{err: store.ErrNotFound}
	}
	s, err := server.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

func do(t *testing.T, h http.Handler, req *http.Request) (*httptest.ResponseRecorder, server.ErrorBody) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body server.ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	return rec, body
}

func TestNewRefusesToRunWithoutAuthentication(t *testing.T) {
	if _, err := server.New(server.Config{}, server.Deps{}); err == nil {
		t.Fatal("server without an authenticator was created; the API must fail closed")
	}
}

func TestHealthAndReadiness(t *testing.T) {
	dbDown := errors.New("connection refused")
	cases := map[string]struct {
		path       string
		checks     []server.Check
		wantStatus int
		wantBody   string
		wantLog    string // in the log, and never in the answer
	}{
		"healthz ignores dependencies": {"/healthz", []server.Check{{Name: "database", Check: func(context.Context) error { return dbDown }}}, 200, `"status":"ok"`, ""},
		"readyz when all checks pass":  {"/readyz", []server.Check{{Name: "database", Check: func(context.Context) error { return nil }}}, 200, `"status":"ready"`, ""},
		"readyz names the failed check, the log has the detail": {"/readyz", []server.Check{
			{Name: "database", Check: func(context.Context) error { return nil }},
			{Name: "migrations", Check: func(context.Context) error { return errors.New("migrations not applied: [0002_x]") }},
		}, 503, `"reason":"migrations: check failed; see the server log for request `, "migrations not applied: [0002_x]"},
		"readyz keeps infrastructure details out of the answer": {"/readyz", []server.Check{
			{Name: "database", Check: func(context.Context) error {
				return errors.New(`dial tcp 10.1.2.3:5432: pq: password authentication failed for user "kukie"`)
			}},
		}, 503, `"reason":"database: check failed`, `password authentication failed for user`},
		"readyz with a warning is ready and lists it": {"/readyz", []server.Check{
			{Name: "database", Check: func(context.Context) error { return nil }, Warn: func() string { return "all 20 connections of the pool are in use" }},
		}, 200, `"warnings":["database: all 20 connections of the pool are in use"]`, ""},
		"readyz shows a reason fit to show, the log has the detail": {"/readyz", []server.Check{
			{Name: "database", Check: func(context.Context) error {
				return &store.HealthError{Reason: "the database cannot be reached", Err: errors.New("dial tcp 10.1.2.3:5432: connect: connection refused")}
			}},
		}, 503, `"reason":"database: check failed (the database cannot be reached); see the server log`, "10.1.2.3:5432"},
		"unknown path is a JSON 404": {"/nope", nil, 404, `"error":"not_found"`, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, logs := newServer(t, server.Config{}, server.Deps{Ready: tc.checks})
			rec, _ := do(t, s.Handler(), httptest.NewRequest("GET", tc.path, nil))
			if rec.Code != tc.wantStatus || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Fatalf("GET %s = %d %s; want %d containing %s", tc.path, rec.Code, rec.Body, tc.wantStatus, tc.wantBody)
			}
			if tc.wantLog != "" {
				if strings.Contains(rec.Body.String(), tc.wantLog) {
					t.Errorf("answer carries the check's error %q: %s", tc.wantLog, rec.Body)
				}
				if !strings.Contains(logs.String(), tc.wantLog) {
					t.Errorf("log lacks the check's error %q:\n%s", tc.wantLog, logs)
				}
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Content-Type = %q", ct)
			}
		})
	}
}

func TestReadinessAgainstRealDatabase(t *testing.T) {
	storetest.ForEachEmpty(t, func(t *testing.T, db *store.DB) {
		s, _ := newServer(t, server.Config{}, server.Deps{Auth: db, Ready: []server.Check{
			{Name: "database", Check: db.PingContext},
			{Name: "migrations", Check: db.CheckSchema},
		}})
		rec, body := do(t, s.Handler(), httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code != 503 || !strings.HasPrefix(body.Reason, "migrations:") {
			t.Fatalf("unmigrated database: %d %+v; want 503 naming migrations", rec.Code, body)
		}
		if _, err := db.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		if rec, _ := do(t, s.Handler(), httptest.NewRequest("GET", "/readyz", nil)); rec.Code != 200 {
			t.Fatalf("migrated database: %d %s", rec.Code, rec.Body)
		}
		_ = db.Close()
		if rec, body := do(t, s.Handler(), httptest.NewRequest("GET", "/readyz", nil)); rec.Code != 503 || !strings.HasPrefix(body.Reason, "database:") {
			t.Fatalf("closed database: %d %+v", rec.Code, body)
		}
	})
}

func TestTeamAuth(t *testing.T) {
	ctx := context.Background()
	db := storetest.SQLite(t)
	team, err := db.CreateTeam(ctx, "payments")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := db.CreateTeam(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	_, valid, err := db.CreateAPIToken(ctx, team.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	revokedTok, revoked, err := db.CreateAPIToken(ctx, team.ID, "old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.RevokeAPIToken(ctx, revokedTok.ID); err != nil {
		t.Fatal(err)
	}
	_, readOnly, err := db.CreateAPIToken(ctx, team.ID, "private chat", store.ScopeRead)
	if err != nil {
		t.Fatal(err)
	}
	_, changeOnly, err := db.CreateAPIToken(ctx, team.ID, "writer", store.ScopeChange)
	if err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		auth       server.Authenticator
		devTeam    *store.Team
		header     string
		scope      store.Scope // the route's; read unless set
		wantStatus int
		wantCode   string
		wantTeam   string
		wantReason string
	}{
		"all-scope token on a change route": {header: "Bearer " + valid.Reveal(), scope: store.ScopeChange, wantStatus: 200, wantTeam: "payments"},
		"all-scope token on an admin route": {header: "Bearer " + valid.Reveal(), scope: store.ScopeAdmin, wantStatus: 200, wantTeam: "payments"},
		"read token on a read route":        {header: "Bearer " + readOnly.Reveal(), wantStatus: 200, wantTeam: "payments"},
		"read token on a change route": {header: "Bearer " + readOnly.Reveal(), scope: store.ScopeChange, wantStatus: 403, wantCode: "insufficient_scope",
			wantReason: "needs a token with the change scope; this token has read"},
		"read token on an admin route": {header: "Bearer " + readOnly.Reveal(), scope: store.ScopeAdmin, wantStatus: 403, wantCode: "insufficient_scope",
			wantReason: "needs a token with the admin scope"},
		"change does not imply read": {header: "Bearer " + changeOnly.Reveal(), wantStatus: 403, wantCode: "insufficient_scope",
			wantReason: "needs a token with the read scope; this token has change"},
		"dev team has every scope":     {devTeam: &dev, scope: store.ScopeAdmin, wantStatus: 200, wantTeam: "dev"},
		"valid token":                  {header: "Bearer " + valid.Reveal(), wantStatus: 200, wantTeam: "payments"},
		"scheme is case-insensitive":   {header: "bearer " + valid.Reveal(), wantStatus: 200, wantTeam: "payments"},
		"no header":                    {wantStatus: 401, wantCode: "missing_token"},
		"unknown token":                {header: "Bearer kuk_unknown", wantStatus: 401, wantCode: "invalid_token"},
		"revoked token":                {header: "Bearer " + revoked.Reveal(), wantStatus: 401, wantCode: "invalid_token"},
		"basic auth":                   {header: "Basic dXNlcjpwYXNz", wantStatus: 401, wantCode: "invalid_token"},
		"bearer without token":         {header: "Bearer ", wantStatus: 401, wantCode: "invalid_token"},
		"dev team without header":      {devTeam: &dev, wantStatus: 200, wantTeam: "dev"},
		"dev team still checks tokens": {devTeam: &dev, header: "Bearer kuk_unknown", wantStatus: 401, wantCode: "invalid_token"},
		"dev team with valid token":    {devTeam: &dev, header: "Bearer " + valid.Reveal(), wantStatus: 200, wantTeam: "payments"},
		"token store down":             {auth: fakeAuth{err: errors.New("db down")}, header: "Bearer kuk_x", wantStatus: 503, wantCode: "auth_unavailable"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			auth := tc.auth
			if auth == nil {
				auth = db
			}
			scope := tc.scope
			if scope == "" {
				scope = store.ScopeRead
			}
			s, _ := newServer(t, server.Config{}, server.Deps{Auth: auth, DevTeam: tc.devTeam})
			s.HandleFunc("GET /api/v1/whoami", func(w http.ResponseWriter, r *http.Request) {
				team, ok := server.TeamFrom(r.Context())
				if !ok {
					t.Error("handler ran without a team in the context")
				}
				if !server.ScopesFrom(r.Context()).Has(scope) {
					t.Errorf("handler ran with scopes %v, without the route's %s", server.ScopesFrom(r.Context()), scope)
				}
				server.WriteJSON(w, 200, map[string]string{"team": team.Name})
			}, server.TeamAuth(scope))
			req := httptest.NewRequest("GET", "/api/v1/whoami", nil)
			req.Host = "127.0.0.1:8080"
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			rec, body := do(t, s.Handler(), req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantCode != "" && body.Error != tc.wantCode {
				t.Fatalf("error %q, want %q", body.Error, tc.wantCode)
			}
			if tc.wantStatus == 401 && rec.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
			if tc.wantStatus == 403 && !strings.Contains(rec.Header().Get("WWW-Authenticate"), `error="insufficient_scope", scope="`+string(scope)+`"`) {
				t.Fatalf("403 WWW-Authenticate %q, want insufficient_scope naming %s", rec.Header().Get("WWW-Authenticate"), scope)
			}
			if !strings.Contains(body.Reason, tc.wantReason) {
				t.Fatalf("reason %q, want it to contain %q", body.Reason, tc.wantReason)
			}
			if tc.wantTeam != "" && !strings.Contains(rec.Body.String(), `"team":"`+tc.wantTeam+`"`) {
				t.Fatalf("body %s, want team %s", rec.Body, tc.wantTeam)
			}
		})
	}
}

// paymentsServer is a server authenticating against a real database in which team
// payments holds the returned token.
func paymentsServer(t *testing.T) (*server.Server, *servicetest.SyncBuffer, secret.Secret) {
	t.Helper()
	db := storetest.SQLite(t)
	ctx := context.Background()
	team, err := db.CreateTeam(ctx, "payments")
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := db.CreateAPIToken(ctx, team.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	s, logs := newServer(t, server.Config{}, server.Deps{Auth: db})
	return s, logs, token
}

func TestLogsCarryNoSecrets(t *testing.T) {
	s, logs, token := paymentsServer(t)
	s.HandleFunc("POST /api/v1/echo", func(w http.ResponseWriter, r *http.Request) {
		zerolog.Ctx(r.Context()).Info().Msg("Handling")
		server.WriteJSON(w, 200, map[string]string{"ok": "yes"})
	}, server.TeamAuth(store.ScopeRead))
	const stateSecret = "one-time-install-state-0123456789"
	for _, header := range []string{"Bearer " + token.Reveal(), "Bearer kuk_notvalid_but_secret_looking"} {
		req := httptest.NewRequest("POST", "/api/v1/echo?state="+stateSecret, strings.NewReader(`{}`))
		req.Header.Set("Authorization", header)
		do(t, s.Handler(), req)
	}
	out := logs.String()
	if !strings.Contains(out, `"path":"/api/v1/echo"`) || !strings.Contains(out, `"team":"payments"`) || !strings.Contains(out, `"request_id"`) {
		t.Fatalf("request log lacks path, team or request id:\n%s", out)
	}
	for _, leaked := range []string{token.Reveal(), "kuk_notvalid_but_secret_looking", stateSecret, store.HashAPIToken(token)} {
		if strings.Contains(out, leaked) {
			t.Fatalf("log contains a secret %q:\n%s", leaked, out)
		}
	}
}

func TestRequestID(t *testing.T) {
	cases := map[string]struct {
		incoming string
		keep     bool
	}{
		"generated when absent":    {"", false},
		"caller's id is kept":      {"abc-123.X_y", true},
		"malformed id is replaced": {"bad id\nwith newline", false},
		"overlong id is replaced":  {strings.Repeat("a", 65), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, logs := newServer(t, server.Config{}, server.Deps{})
			req := httptest.NewRequest("GET", "/healthz", nil)
			if tc.incoming != "" {
				req.Header.Set(server.RequestIDHeader, tc.incoming)
			}
			rec, _ := do(t, s.Handler(), req)
			got := rec.Header().Get(server.RequestIDHeader)
			if got == "" || (got == tc.incoming) != tc.keep {
				t.Fatalf("request id %q for incoming %q, keep=%v", got, tc.incoming, tc.keep)
			}
			if !strings.Contains(logs.String(), `"request_id":"`+got+`"`) {
				t.Fatalf("log lacks the request id %s:\n%s", got, logs)
			}
		})
	}
}

func TestPanicBecomesLogged500(t *testing.T) {
	s, logs := newServer(t, server.Config{}, server.Deps{})
	s.HandleFunc("GET /boom", func(http.ResponseWriter, *http.Request) { panic("kaboom") })
	rec, body := do(t, s.Handler(), httptest.NewRequest("GET", "/boom", nil))
	if rec.Code != 500 || body.Error != "internal" {
		t.Fatalf("panic answered %d %s; want 500 internal", rec.Code, rec.Body)
	}
	if out := logs.String(); !strings.Contains(out, "Handler panicked") || !strings.Contains(out, "kaboom") || !strings.Contains(out, `"status":500`) {
		t.Fatalf("panic not logged with status 500:\n%s", out)
	}
	if rec, _ := do(t, s.Handler(), httptest.NewRequest("GET", "/healthz", nil)); rec.Code != 200 {
		t.Fatalf("server unusable after a panic: %d", rec.Code)
	}
}

func TestBodyLimitsAndJSONDecoding(t *testing.T) {
	type payload struct {
		Name string `json:"name"`
	}
	handler := func(w http.ResponseWriter, r *http.Request) {
		var p payload
		if !server.DecodeJSON(w, r, &p) {
			return
		}
		server.WriteJSON(w, 200, p)
	}
	big := `{"name":"` + strings.Repeat("x", 200) + `"}`
	cases := map[string]struct {
		path       string
		body       string
		wantStatus int
		wantCode   string
	}{
		"small body":                 {"/small", `{"name":"a"}`, 200, ""},
		"over the default limit":     {"/small", big, 413, "body_too_large"},
		"route with a larger limit":  {"/large", big, 200, ""},
		"over the route's own limit": {"/large", `{"name":"` + strings.Repeat("x", 2000) + `"}`, 413, "body_too_large"},
		// The value fits and the white space after it runs past the limit: too
		// large, not "unexpected data" (failed with 400 invalid_json).
		"padded past the limit": {"/small", `{"name":"a"}` + strings.Repeat(" ", 200), 413, "body_too_large"},
		"unknown field":         {"/small", `{"name":"a","extra":1}`, 400, "invalid_json"},
		"trailing data":         {"/small", `{"name":"a"} {"name":"b"}`, 400, "invalid_json"},
		"empty body":            {"/small", ``, 400, "invalid_json"},
		"not json":              {"/small", `name=a`, 400, "invalid_json"},
		// Valid JSON whose field holds a value of the wrong type is an invalid
		// request, not invalid JSON (failed before: invalid_json); a body of the
		// wrong type whole is no request, and stays invalid_json.
		"a field of the wrong type": {"/small", `{"name":1}`, 400, "invalid_request"},
		"not an object":             {"/small", `"a"`, 400, "invalid_json"},
		// A member naming the field in another case, which encoding/json takes
		// for it, is refused as a member given twice is (failed before: 200).
		"a field in another case":          {"/small", `{"Name":"a"}`, 400, "invalid_json"},
		"a field given twice in two cases": {"/small", `{"name":"a","NAME":"b"}`, 400, "invalid_json"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, _ := newServer(t, server.Config{MaxBodyBytes: 100}, server.Deps{})
			s.HandleFunc("POST /small", handler)
			s.HandleFunc("POST /large", handler, server.MaxBody(1000))
			rec, body := do(t, s.Handler(), httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body)))
			if rec.Code != tc.wantStatus || body.Error != tc.wantCode {
				t.Fatalf("got %d %s; want %d %q", rec.Code, rec.Body, tc.wantStatus, tc.wantCode)
			}
		})
	}
}

// startServer runs s on a loopback port until the returned cancel is called; the
// returned channel yields Serve's result.
func startServer(t *testing.T, s *server.Server) (addr string, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, ln) }()
	t.Cleanup(cancel)
	return ln.Addr().String(), cancel, errc
}

func TestShutdownDrainsInFlightRequests(t *testing.T) {
	s, _ := newServer(t, server.Config{}, server.Deps{})
	entered, release := make(chan struct{}), make(chan struct{})
	s.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		if r.Context().Err() != nil {
			t.Error("request context was cancelled by shutdown")
		}
		server.WriteJSON(w, 200, map[string]string{"done": "yes"})
	})
	addr, stop, done := startServer(t, s)

	type result struct {
		status int
		body   string
		err    error
	}
	resc := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err != nil {
			resc <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		resc <- result{status: resp.StatusCode, body: string(b)}
	}()
	<-entered
	stop()

	// Shutdown has begun when new connections are refused; the slow request is
	// still running at that point.
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		_ = conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("server still accepts connections after shutdown began")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve returned (%v) before the in-flight request finished", err)
	default:
	}
	close(release)
	res := <-resc
	if res.err != nil || res.status != 200 || !strings.Contains(res.body, `"done":"yes"`) {
		t.Fatalf("in-flight request: %d %q %v; want it completed", res.status, res.body, res.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v, want nil after a clean drain", err)
	}
}

func TestShutdownGivesUpAfterTimeout(t *testing.T) {
	s, _ := newServer(t, server.Config{ShutdownTimeout: 50 * time.Millisecond}, server.Deps{})
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	s.HandleFunc("GET /stuck", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	})
	addr, stop, done := startServer(t, s)
	go func() {
		resp, err := http.Get("http://" + addr + "/stuck")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	stop()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "cut off") {
		t.Fatalf("Serve = %v; want an error saying requests were cut off", err)
	}
}

func TestReadyzFailsWhileDraining(t *testing.T) {
	s, _ := newServer(t, server.Config{}, server.Deps{})
	entered, release := make(chan struct{}), make(chan struct{})
	s.HandleFunc("GET /slow", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	})
	addr, stop, done := startServer(t, s)
	go func() {
		resp, err := http.Get("http://" + addr + "/slow")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	if rec, _ := do(t, s.Handler(), httptest.NewRequest("GET", "/readyz", nil)); rec.Code != 200 {
		t.Fatalf("/readyz before shutdown = %d", rec.Code)
	}
	stop()
	// New connections are refused once draining starts, so ask the handler directly
	// (a load balancer's probe on a kept-alive connection sees the same answer).
	deadline := time.Now().Add(60 * time.Second)
	for {
		rec, body := do(t, s.Handler(), httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code == 503 && body.Reason == "shutting down" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d after shutdown began", rec.Code)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRequestLogLine: each request is logged once with the request id, the team once
// authenticated, method, path, status, size, duration and remote address; a 5xx is
// logged as an error. A team learned by one request never reaches another's lines.
func TestRequestLogLine(t *testing.T) {
	s, logs, token := paymentsServer(t)
	s.HandleFunc("GET /api/v1/fail", func(w http.ResponseWriter, r *http.Request) {
		zerolog.Ctx(r.Context()).Info().Msg("Handling")
		server.WriteError(w, http.StatusBadGateway, "upstream", "upstream failed")
	}, server.TeamAuth(store.ScopeRead))

	req := httptest.NewRequest("GET", "/api/v1/fail", nil)
	req.Header.Set("Authorization", "Bearer "+token.Reveal())
	req.Header.Set(server.RequestIDHeader, "req-1")
	rec, _ := do(t, s.Handler(), req)
	do(t, s.Handler(), httptest.NewRequest("GET", "/healthz", nil))

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want the handler's and two request lines:\n%s", len(lines), logs)
	}
	handling, failed, health := lines[0], lines[1], lines[2]
	if handling["message"] != "Handling" || handling["request_id"] != "req-1" || handling["team"] != "payments" {
		t.Errorf("the handler's line = %v, want request_id req-1 and team payments", handling)
	}
	want := map[string]any{"level": "error", "message": "Request", "request_id": "req-1", "team": "payments",
		"method": "GET", "path": "/api/v1/fail", "status": float64(502), "bytes": float64(rec.Body.Len()), "remote": req.RemoteAddr}
	for k, v := range want {
		if failed[k] != v {
			t.Errorf("request line %s = %v, want %v (line %v)", k, failed[k], v, failed)
		}
	}
	if _, ok := failed["duration"].(float64); !ok {
		t.Errorf("request line without a duration: %v", failed)
	}
	if health["level"] != "info" || health["status"] != float64(200) || health["path"] != "/healthz" {
		t.Errorf("health request line = %v, want info 200 /healthz", health)
	}
	if _, ok := health["team"]; ok {
		t.Errorf("another request's team reached the health request's line: %v", health)
	}
	if id, _ := health["request_id"].(string); id == "" || id == "req-1" {
		t.Errorf("health request id = %q, want its own", id)
	}
}

// requestLog is a RequestObserver that keeps what it is told.
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) Request(route string, status int, _ time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, fmt.Sprintf("%s %d", route, status))
}

// TestRequestsAreObservedByRoute: each answered request is told by its route's
// pattern, never its path: a refused token as its route's 401, a panic as the
// 500 answered, a path no route serves as unmatched.
func TestRequestsAreObservedByRoute(t *testing.T) {
	seen := &requestLog{}
	s, _ := newServer(t, server.Config{}, server.Deps{Requests: seen})
	s.HandleFunc("GET /api/v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		server.WriteJSON(w, http.StatusOK, map[string]string{"id": r.PathValue("id")})
	}, server.TeamAuth(store.ScopeRead))
	s.HandleFunc("POST /boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	s.HandleFunc("GET /quiet", func(http.ResponseWriter, *http.Request) {})
	for _, r := range []*http.Request{
		httptest.NewRequest("GET", "/healthz", nil),
		httptest.NewRequest("GET", "/api/v1/things/secret-id-7", nil),
		httptest.NewRequest("POST", "/boom", nil),
		httptest.NewRequest("GET", "/quiet", nil),
		httptest.NewRequest("GET", "/no/such/path", nil),
	} {
		do(t, s.Handler(), r)
	}
	want := []string{"GET /healthz 200", "GET /api/v1/things/{id} 401", "POST /boom 500", "GET /quiet 200", "unmatched 404"}
	if !slices.Equal(seen.seen, want) {
		t.Fatalf("observed %q, want %q", seen.seen, want)
	}
}

// TestReadinessChecksShareOneDeadline: the checks of one /readyz run within one
// deadline, so the answer comes within it however the time is spread over them.
func TestReadinessChecksShareOneDeadline(t *testing.T) {
	var deadlines []time.Time
	record := func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		if !ok {
			return errors.New("no deadline")
		}
		deadlines = append(deadlines, d)
		return nil
	}
	s, _ := newServer(t, server.Config{}, server.Deps{Ready: []server.Check{{Name: "database", Check: record}, {Name: "migrations", Check: record}}})
	if rec, _ := do(t, s.Handler(), httptest.NewRequest("GET", "/readyz", nil)); rec.Code != http.StatusOK {
		t.Fatalf("GET /readyz = %d %s", rec.Code, rec.Body)
	}
	if len(deadlines) != 2 || !deadlines[0].Equal(deadlines[1]) {
		t.Fatalf("the checks' deadlines %v, want one shared", deadlines)
	}
}

// TestSecurityHeadersOnEveryAnswer: every answer, whoever writes it (a handler that
// sets no header, a 404, a panic), carries nosniff, and Strict-Transport-Security
// exactly when the server is configured for https.
func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	for name, hsts := range map[string]bool{"https": true, "http": false} {
		t.Run(name, func(t *testing.T) {
			s, _ := newServer(t, server.Config{HSTS: hsts}, server.Deps{})
			s.HandleFunc("GET /style.css", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "body{}") })
			s.HandleFunc("GET /panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
			for _, path := range []string{"/style.css", "/healthz", "/no-such-route", "/panic"} {
				rec, _ := do(t, s.Handler(), httptest.NewRequest(http.MethodGet, path, nil))
				if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
					t.Errorf("%s: X-Content-Type-Options %q, want nosniff", path, got)
				}
				got := rec.Header().Get("Strict-Transport-Security")
				if hsts && !strings.HasPrefix(got, "max-age=") {
					t.Errorf("%s: Strict-Transport-Security %q, want max-age=...", path, got)
				}
				if !hsts && got != "" {
					t.Errorf("%s: Strict-Transport-Security %q over http", path, got)
				}
			}
		})
	}
}

// TestLimitPerClient: a route mounted with LimitPerClient answers one client
// address its burst, then 429 rate_limited with Retry-After, while another address
// still gets through. X-Forwarded-For names the client only when the server trusts
// it, and then only its last entry (the proxy's); an IPv6 client is its /64.
func TestLimitPerClient(t *testing.T) {
	cases := map[string]struct {
		trust          bool
		first, second  func(*http.Request) // the same client, then another one
		sameAfterLimit func(*http.Request) // the first client again, otherwise disguised
	}{
		"peer address, the header ignored": {
			first:  func(r *http.Request) { r.RemoteAddr = "203.0.113.7:4000" },
			second: func(r *http.Request) { r.RemoteAddr = "203.0.113.8:4000" },
			sameAfterLimit: func(r *http.Request) {
				r.RemoteAddr = "203.0.113.7:4001"
				r.Header.Set("X-Forwarded-For", "198.51.100.1")
			},
		},
		"trusted proxy, its last entry": {
			trust:  true,
			first:  func(r *http.Request) { r.RemoteAddr = "10.0.0.1:4000"; r.Header.Set("X-Forwarded-For", "203.0.113.7") },
			second: func(r *http.Request) { r.RemoteAddr = "10.0.0.1:4000"; r.Header.Set("X-Forwarded-For", "203.0.113.8") },
			sameAfterLimit: func(r *http.Request) {
				r.RemoteAddr = "10.0.0.2:4000"
				r.Header.Set("X-Forwarded-For", "198.51.100.1, 203.0.113.7")
			},
		},
		"IPv6 by its /64": {
			first:          func(r *http.Request) { r.RemoteAddr = "[2001:db8:1:2::1]:4000" },
			second:         func(r *http.Request) { r.RemoteAddr = "[2001:db8:1:3::1]:4000" },
			sameAfterLimit: func(r *http.Request) { r.RemoteAddr = "[2001:db8:1:2:ffff::9]:4000" },
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			limit, err := ratelimit.New("requests from this address", 1, 2)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := newServer(t, server.Config{TrustForwardedFor: c.trust}, server.Deps{PerClient: limit})
			calls := 0
			s.HandleFunc("GET /callback", func(w http.ResponseWriter, _ *http.Request) { calls++ }, server.LimitPerClient())
			call := func(from func(*http.Request)) (*httptest.ResponseRecorder, server.ErrorBody) {
				req := httptest.NewRequest(http.MethodGet, "/callback", nil)
				from(req)
				return do(t, s.Handler(), req)
			}
			for i := range 2 {
				if rec, _ := call(c.first); rec.Code != http.StatusOK {
					t.Fatalf("call %d within the burst: %d", i+1, rec.Code)
				}
			}
			rec, body := call(c.sameAfterLimit)
			if rec.Code != http.StatusTooManyRequests || body.Error != server.CodeRateLimited || body.Reason == "" {
				t.Fatalf("the same client past its burst: %d %+v, want 429 rate_limited", rec.Code, body)
			}
			if got := rec.Header().Get("Retry-After"); got != "60" {
				t.Errorf("Retry-After %q, want 60", got)
			}
			if rec, _ := call(c.second); rec.Code != http.StatusOK {
				t.Fatalf("another client: %d", rec.Code)
			}
			if calls != 3 {
				t.Fatalf("the handler ran %d times, want 3: a refused call must not reach it", calls)
			}
		})
	}
}

// TestShutdownServesThroughTheDrainDelay: once shutdown begins, the server goes on
// accepting connections for the drain delay, answering /readyz 503 and serving
// every other route, so requests a load balancer still sends its way (GitHub's
// webhook deliveries among them) are answered, not refused; then it stops
// listening and Serve returns. Without the delay the listener closed at once.
func TestShutdownServesThroughTheDrainDelay(t *testing.T) {
	s, _ := newServer(t, server.Config{DrainDelay: time.Hour}, server.Deps{})
	waited, drained := make(chan time.Duration, 1), make(chan time.Time)
	server.SetDrainWait(s, func(d time.Duration) <-chan time.Time {
		waited <- d
		return drained
	})
	addr, stop, done := startServer(t, s)
	stop()
	select {
	case d := <-waited:
		if d != time.Hour {
			t.Fatalf("drain delay %s, want the configured hour", d)
		}
	case err := <-done:
		t.Fatalf("Serve returned (%v) without a drain delay", err)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, error) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get("/readyz"); err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz on a new connection while draining = %d, %v; want 503", code, err)
	}
	if code, err := get("/healthz"); err != nil || code != http.StatusOK {
		t.Fatalf("/healthz on a new connection while draining = %d, %v; want 200", code, err)
	}
	close(drained)
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := get("/healthz"); err == nil {
		t.Fatal("a connection was accepted after the drain delay ended")
	}
}

// TestDuplicateMembersAreRefused: a body that gives one member twice, at any depth,
// is refused 400 invalid_json naming it, since encoding/json would keep the last and
// something else reading the body may take the first (failed before: 200 with the
// last value).
func TestDuplicateMembersAreRefused(t *testing.T) {
	type inner struct {
		Set map[string]string `json:"set"`
	}
	type payload struct {
		Cluster string            `json:"cluster"`
		Change  inner             `json:"change"`
		Items   []map[string]bool `json:"items"`
	}
	cases := map[string]struct {
		body       string
		wantStatus int
		wantReason string
	}{
		"each member once":           {`{"cluster":"prod","change":{"set":{"A":"1","a":"2"}},"items":[{"x":true},{"x":false}]}`, 200, ""},
		"top-level member twice":     {`{"cluster":"prod","cluster":"other"}`, 400, `member "/cluster" is given twice`},
		"nested member twice":        {`{"change":{"set":{"A":"1","A":"2"}}}`, 400, `member "/change/set/A" is given twice`},
		"member of an item twice":    {`{"items":[{"x":true},{"x":true,"x":false}]}`, 400, `member "/items/1/x" is given twice`},
		"name with a slash twice":    {`{"change":{"set":{"a/b~":"1","a/b~":"2"}}}`, 400, `member "/change/set/a~1b~0" is given twice`},
		"same name in two objects":   {`{"change":{"set":{"cluster":"x"}},"cluster":"prod"}`, 200, ""},
		"a member after an object":   {`{"change":{"set":{}},"change":{"set":{"B":"2"}}}`, 400, `member "/change" is given twice`},
		"a member after a list":      {`{"items":[],"cluster":"a","items":[]}`, 400, `member "/items" is given twice`},
		"escaped spelling of a key":  {`{"cluster":"prod","clust\u0065r":"other"}`, 400, `member "/cluster" is given twice`},
		"a NUL in a value":           {`{"cluster":"pr\u0000od"}`, 400, `the string at "/cluster" holds a NUL character`},
		"a NUL in an item":           {`{"items":[{"x":true},{"a\u0000":true}]}`, 400, `the string at "/items/1/a\x00" holds a NUL character`},
		"a NUL in a map's value":     {`{"change":{"set":{"A":"\u0000"}}}`, 400, `the string at "/change/set/A" holds a NUL character`},
		"an escaped backslash and u": {`{"cluster":"pr\\u0000od"}`, 200, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, _ := newServer(t, server.Config{}, server.Deps{})
			s.HandleFunc("POST /p", func(w http.ResponseWriter, r *http.Request) {
				var p payload
				if server.DecodeJSON(w, r, &p) {
					server.WriteJSON(w, 200, p)
				}
			})
			rec, body := do(t, s.Handler(), httptest.NewRequest("POST", "/p", strings.NewReader(tc.body)))
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus != 200 && (body.Error != "invalid_json" || !strings.Contains(body.Reason, tc.wantReason)) {
				t.Fatalf("answer %s, want invalid_json with %q", rec.Body, tc.wantReason)
			}
		})
	}
}

// TestWrongMethodIsRefused405: a path routes serve with other methods answers 405
// method_not_allowed with Allow naming them; a path none serves stays 404 (failed
// before: 404 not_found "no route for PUT ...", no Allow).
func TestWrongMethodIsRefused405(t *testing.T) {
	s, _ := newServer(t, server.Config{}, server.Deps{})
	ok := func(w http.ResponseWriter, _ *http.Request) { server.WriteJSON(w, 200, map[string]string{}) }
	s.HandleFunc("GET /api/v1/things", ok, server.TeamAuth(store.ScopeRead))
	s.HandleFunc("POST /api/v1/things", ok, server.TeamAuth(store.ScopeChange))
	s.HandleFunc("POST /api/v1/things/{id}/cancel", ok)
	cases := map[string]struct {
		method, path string
		wantStatus   int
		wantCode     string
		wantAllow    string
	}{
		"PUT of a GET and POST path":         {"PUT", "/api/v1/things", 405, "method_not_allowed", "GET, HEAD, POST"},
		"DELETE of a GET and POST path":      {"DELETE", "/api/v1/things", 405, "method_not_allowed", "GET, HEAD, POST"},
		"OPTIONS":                            {"OPTIONS", "/api/v1/things", 405, "method_not_allowed", "GET, HEAD, POST"},
		"an unknown method":                  {"BREW", "/api/v1/things", 405, "method_not_allowed", "GET, HEAD, POST"},
		"GET of a POST path with a wildcard": {"GET", "/api/v1/things/x7/cancel", 405, "method_not_allowed", "POST"},
		"GET of /healthz still answers":      {"GET", "/healthz", 200, "", ""},
		"PUT of /healthz":                    {"PUT", "/healthz", 405, "method_not_allowed", "GET, HEAD"},
		"a path no route serves":             {"PUT", "/api/v1/nothing", 404, "not_found", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec, body := do(t, s.Handler(), httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.wantStatus || body.Error != tc.wantCode {
				t.Fatalf("got %d %s, want %d %q", rec.Code, rec.Body, tc.wantStatus, tc.wantCode)
			}
			if got := rec.Header().Get("Allow"); got != tc.wantAllow {
				t.Fatalf("Allow %q, want %q", got, tc.wantAllow)
			}
			if tc.wantStatus == 405 && !strings.Contains(body.Reason, tc.method+" is not served at "+tc.path+"; it takes "+tc.wantAllow) {
				t.Fatalf("reason %q does not say the method and what the path takes", body.Reason)
			}
		})
	}
}

// TestDevTeamRefusesAnotherSitesPage: without a token the dev team acts only for a
// request no other site's page sent: a form or a text/plain fetch of another origin
// needs no preflight, so any page a developer opened could otherwise change their
// clusters as the dev team (failed before: 200 for each cross-site write).
func TestDevTeamRefusesAnotherSitesPage(t *testing.T) {
	dev := store.Team{ID: "t1", Name: "dev"}
	s, _ := newServer(t, server.Config{}, server.Deps{DevTeam: &dev})
	s.HandleFunc("POST /api/v1/changes", func(w http.ResponseWriter, r *http.Request) {
		server.WriteJSON(w, 200, map[string]string{"ran": "yes"})
	}, server.TeamAuth(store.ScopeChange))
	s.HandleFunc("GET /api/v1/changes", func(w http.ResponseWriter, r *http.Request) {
		server.WriteJSON(w, 200, map[string]string{"ran": "yes"})
	}, server.TeamAuth(store.ScopeRead))
	cases := map[string]struct {
		method     string
		headers    map[string]string
		wantStatus int
	}{
		"a program (no browser headers)":  {"POST", nil, 200},
		"the service's own page":          {"POST", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200},
		"typed into the address bar":      {"POST", map[string]string{"Sec-Fetch-Site": "none"}, 200},
		"another site's form":             {"POST", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"}, 403},
		"a sibling subdomain's fetch":     {"POST", map[string]string{"Sec-Fetch-Site": "same-site", "Content-Type": "text/plain"}, 403},
		"an old browser, another origin":  {"POST", map[string]string{"Origin": "https://evil.example"}, 403},
		"an old browser, the same origin": {"POST", map[string]string{"Origin": "http://localhost:8080"}, 200},
		"a read from another site":        {"GET", map[string]string{"Sec-Fetch-Site": "cross-site"}, 200},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "/api/v1/changes", strings.NewReader(`{}`))
			req.Host = "localhost:8080"
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec, body := do(t, s.Handler(), req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus == 403 && (body.Error != "cross_origin_request" || !strings.Contains(body.Reason, "send a token")) {
				t.Fatalf("answer %s, want cross_origin_request saying to send a token", rec.Body)
			}
		})
	}
	// A token is checked as ever, whatever page sent it: a browser never adds one
	// by itself.
	req := httptest.NewRequest("POST", "/api/v1/changes", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Authorization", "Bearer kuk_unknown")
	if rec, body := do(t, s.Handler(), req); rec.Code != 401 || body.Error != "invalid_token" {
		t.Fatalf("a cross-site request with a token: %d %s, want 401 invalid_token", rec.Code, rec.Body)
	}
}

// TestUnreadableURLsAreRefused400: a path or query holding a NUL character or bytes
// that are not UTF-8 is refused 400 invalid_request before any route looks it up:
// PostgreSQL cannot be asked about such a text, so a lookup of /api/v1/changes/a%00b
// failed as a 500 internal error, logged as one (failed before: the handler ran).
func TestUnreadableURLsAreRefused400(t *testing.T) {
	seen := &requestLog{}
	s, _ := newServer(t, server.Config{}, server.Deps{Requests: seen})
	s.HandleFunc("GET /api/v1/changes/{code}", func(w http.ResponseWriter, r *http.Request) {
		server.WriteJSON(w, 200, map[string]string{"code": r.PathValue("code")})
	})
	cases := map[string]struct {
		target     string
		wantStatus int
		wantReason string
	}{
		"a code":                     {"/api/v1/changes/k7x2", 200, ""},
		"a code that is not ASCII":   {"/api/v1/changes/%D0%BA", 200, ""},
		"a NUL in the path":          {"/api/v1/changes/a%00b", 400, "the path holds a NUL character"},
		"bytes that are not UTF-8":   {"/api/v1/changes/%FF%FE", 400, "the path holds a NUL character or bytes that are not UTF-8"},
		"a NUL in a query value":     {"/api/v1/changes/k7x2?cluster=a%00b", 400, `query parameter "cluster" holds a NUL`},
		"not UTF-8 in a query value": {"/api/v1/changes/k7x2?status=%C3", 400, `query parameter "status" holds`},
		"a NUL in a query name":      {"/api/v1/changes/k7x2?a%00=b", 400, "a query parameter's name holds a NUL"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec, body := do(t, s.Handler(), httptest.NewRequest("GET", tc.target, nil))
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus == 400 && (body.Error != "invalid_request" || !strings.Contains(body.Reason, tc.wantReason)) {
				t.Fatalf("answer %s, want invalid_request saying %q", rec.Body, tc.wantReason)
			}
		})
	}
	if n := len(seen.seen); n != len(cases) {
		t.Fatalf("%d requests observed, want all %d: %q", n, len(cases), seen.seen)
	}
}

// TestDevTeamOnlyAtThisMachine: without a token the dev team acts only for a
// request naming this machine as its host. A page of a name the attacker makes
// resolve here (DNS rebinding) is its own origin, so the origin check lets it
// through and it reads the answers (the team's changes, a repository token);
// its requests name that host (failed before: 200 for each).
func TestDevTeamOnlyAtThisMachine(t *testing.T) {
	dev := store.Team{ID: "t1", Name: "dev"}
	s, _ := newServer(t, server.Config{}, server.Deps{DevTeam: &dev})
	s.HandleFunc("POST /api/v1/internal/tokens", func(w http.ResponseWriter, r *http.Request) {
		server.WriteJSON(w, 200, map[string]string{"token": "ghs_x"})
	}, server.TeamAuth(store.ScopeAdmin))
	for host, want := range map[string]int{
		"localhost:8080":                  200,
		"LOCALHOST":                       200,
		"kukie.localhost:8080":            200,
		"127.0.0.1:8080":                  200,
		"127.1.2.3":                       200,
		"[::1]:8080":                      200,
		"rebound.attacker.example:8080":   403,
		"localhost.attacker.example:8080": 403,
		"192.168.1.5:8080":                403,
		"0.0.0.0:8080":                    403,
		"":                                403,
	} {
		t.Run(host, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/api/v1/internal/tokens", strings.NewReader(`{}`))
			req.Host = host
			req.Header.Set("Origin", "http://"+host)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			rec, body := do(t, s.Handler(), req)
			if rec.Code != want {
				t.Fatalf("host %q: %d %s, want %d", host, rec.Code, rec.Body, want)
			}
			if want == 403 && (body.Error != "dev_team_not_local" || !strings.Contains(body.Reason, strconv.Quote(host)) || !strings.Contains(body.Reason, "send a token")) {
				t.Fatalf("host %q: %s, want dev_team_not_local naming the host and saying to send a token", host, rec.Body)
			}
		})
	}
	// A token is taken whatever host the request names.
	req := httptest.NewRequest("POST", "/api/v1/internal/tokens", nil)
	req.Host = "rebound.attacker.example"
	req.Header.Set("Authorization", "Bearer kuk_unknown")
	if rec, body := do(t, s.Handler(), req); rec.Code != 401 || body.Error != "invalid_token" {
		t.Fatalf("a token at another host: %d %s, want 401 invalid_token", rec.Code, rec.Body)
	}
}

// TestMemberInAnotherCaseIsRefused: a member that names a field of the body's type
// only in another case is refused naming it by its JSON pointer and the field's
// name, through nested objects, lists, map values and embedded structs, while a
// map's keys, whatever their case, and fields named exactly are taken (failed
// before: each was taken for the field).
func TestMemberInAnotherCaseIsRefused(t *testing.T) {
	type Base struct {
		Kind string `json:"kind"`
	}
	type item struct {
		Base
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	type body struct {
		Target struct {
			Name string `json:"name"`
		} `json:"target"`
		Items  []item            `json:"items"`
		Byname map[string]*item  `json:"by_name"`
		Labels map[string]string `json:"labels"`
		Plain  string
	}
	for data, want := range map[string]string{
		`{"Target":{"name":"a"}}`:               `member "/Target" names the field "target" in another case; give it as "target"`,
		`{"target":{"Name":"a"}}`:               `member "/target/Name" names the field "name"`,
		`{"items":[{"path":"a"},{"PATH":"b"}]}`: `member "/items/1/PATH" names the field "path"`,
		`{"items":[{"Kind":"a"}]}`:              `member "/items/0/Kind" names the field "kind"`,
		`{"by_name":{"x":{"Value":1}}}`:         `member "/by_name/x/Value" names the field "value"`,
		`{"plain":"a"}`:                         `member "/plain" names the field "Plain"`,
	} {
		var v body
		if err := server.DecodeStrict([]byte(data), &v); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %s", data, err, want)
		}
	}
	var v body
	if err := server.DecodeStrict([]byte(`{"target":{"name":"a"},"items":[{"kind":"k","path":"p","value":{"Any":1}}],"labels":{"Team":"a","team":"b"},"Plain":"x"}`), &v); err != nil {
		t.Fatalf("exact names: %v", err)
	}
}
