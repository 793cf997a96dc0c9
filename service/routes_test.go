package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// testService is the service New builds on a fresh SQLite database with the
// default configuration, and a token of team shop for each of the scope sets asked.
func testService(t *testing.T, tokenScopes ...[]store.Scope) (*Service, *store.DB, []string) {
	t.Helper()
	return testServiceWith(t, config.Default(), tokenScopes...)
}

// testServiceWith is testService with cfg.
func testServiceWith(t *testing.T, cfg config.Config, tokenScopes ...[]store.Scope) (*Service, *store.DB, []string) {
	t.Helper()
	ctx := context.Background()
	db := storetest.SQLite(t)
	cfg.Pipeline.CacheDir = t.TempDir()
	svc, err := New(ctx, cfg, db, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	team, err := db.CreateTeam(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, scopes := range tokenScopes {
		_, tok, err := db.CreateAPIToken(ctx, team.ID, "test", scopes...)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok.Reveal())
	}
	return svc, db, tokens
}

// callRoute calls route r of svc, its path parameters filled in, with the
// Authorization header auth (none when empty) and body.
func callRoute(svc *Service, r Route, auth, body string) *httptest.ResponseRecorder {
	method, path, ok := strings.Cut(r.Pattern, " ")
	if !ok {
		method, path = http.MethodPost, r.Pattern
	}
	path = strings.NewReplacer("{cluster}", "prod", "{code}", "k1", "{namespace}", "shop", "{name}", "web", "{id}", "e1").Replace(path)
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, req)
	return rec
}

// TestRoutesAreWhatTheServiceServes holds the route table to the service New builds:
// the server mounts exactly the listed patterns, and each route enforces the access
// the table names (no token: 401 on token routes only; a read-only token: 403
// insufficient_scope on change and admin routes only).
func TestRoutesAreWhatTheServiceServes(t *testing.T) {
	svc, _, tokens := testService(t, []store.Scope{store.ScopeRead})
	readOnly := tokens[0]
	var listed []string
	for _, r := range Routes {
		listed = append(listed, r.Pattern)
	}
	mounted := svc.server.Patterns()
	slices.Sort(listed)
	slices.Sort(mounted)
	if !slices.Equal(listed, mounted) {
		t.Fatalf("Routes lists\n  %s\nthe server mounts\n  %s", strings.Join(listed, "\n  "), strings.Join(mounted, "\n  "))
	}

	call := func(r Route, token string) (int, string) {
		auth := ""
		if token != "" {
			auth = "Bearer " + token
		}
		rec := callRoute(svc, r, auth, "{}")
		var answer struct{ Error string }
		_ = json.Unmarshal(rec.Body.Bytes(), &answer)
		return rec.Code, answer.Error
	}
	for _, r := range Routes {
		t.Run(r.Pattern, func(t *testing.T) {
			status, code := call(r, "")
			if (status == http.StatusNotFound && code == "not_found") || code == "method_not_allowed" {
				t.Fatalf("no route answers %s", r.Pattern)
			}
			needsToken := strings.HasPrefix(r.Access, "token")
			if (status == http.StatusUnauthorized) != needsToken {
				t.Fatalf("without a token: %d %s; the table says access is %q", status, code, r.Access)
			}
			if !needsToken {
				return
			}
			status, code = call(r, readOnly)
			refused := status == http.StatusForbidden && code == "insufficient_scope"
			if want := r.Access != accessRead; refused != want || status == http.StatusUnauthorized {
				t.Fatalf("with a read-only token: %d %s; the table says access is %q", status, code, r.Access)
			}
		})
	}
}

// TestEveryRouteSetsSecurityHeaders: with an https server.public_url, every route's
// answer (the stylesheet's included) carries Strict-Transport-Security and nosniff.
func TestEveryRouteSetsSecurityHeaders(t *testing.T) {
	cfg := config.Default()
	cfg.Pipeline.CacheDir = t.TempDir()
	cfg.Server.PublicURL = "https://kukie.example.com"
	svc, err := New(context.Background(), cfg, storetest.SQLite(t), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Routes {
		rec := callRoute(svc, r, "", "{}")
		if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s answers %d with X-Content-Type-Options %q, want nosniff", r.Pattern, rec.Code, got)
		}
		if got := rec.Header().Get("Strict-Transport-Security"); !strings.HasPrefix(got, "max-age=") {
			t.Errorf("%s answers %d with Strict-Transport-Security %q, want max-age=...", r.Pattern, rec.Code, got)
		}
	}
}

// TestCallbacksAreLimitedPerClient: the routes anyone may call that make the
// service call GitHub (the sign-in and setup callbacks, sign-out) share one limit
// per client address, rate_limits.client_burst at once; the other routes anyone may
// call are not limited.
func TestCallbacksAreLimitedPerClient(t *testing.T) {
	// One a minute after a burst: the default's token every 2 s could refill the
	// bucket while a loaded machine runs the burst, and the call past it pass.
	cfg := config.Default()
	cfg.RateLimits.ClientPerMinute, cfg.RateLimits.ClientBurst = 1, 6
	svc, _, _ := testServiceWith(t, cfg)
	limited := []string{"GET /auth/github/callback", "GET /github/setup", "POST /auth/signout"}
	route := func(pattern string) Route { return routeOf(t, pattern) }
	for i := range int(cfg.RateLimits.ClientBurst) {
		if rec := callRoute(svc, route(limited[i%len(limited)]), "", ""); rec.Code == http.StatusTooManyRequests {
			t.Fatalf("call %d, within the burst of %d: %d %s", i+1, cfg.RateLimits.ClientBurst, rec.Code, rec.Body)
		}
	}
	for _, pattern := range limited {
		rec := callRoute(svc, route(pattern), "", "")
		if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"rate_limited"`) || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s past the client's burst: %d %s (Retry-After %q), want 429 rate_limited", pattern, rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
	}
	for _, pattern := range []string{"GET /healthz", "GET /assets/style.css", "GET /api/v1/openapi.json"} {
		if rec := callRoute(svc, route(pattern), "", ""); rec.Code != http.StatusOK {
			t.Errorf("%s from the same client: %d, want 200", pattern, rec.Code)
		}
	}
}

// TestTokenRoutesThatCallOutAreLimitedPerTeam: the token routes that download,
// render or ask GitHub or a cluster share their team's limits of the configuration,
// one per kind of work: past each limit's burst every route of it is answered 429
// rate_limited with Retry-After, while the routes of the other limits and those
// that only read the store still answer.
func TestTokenRoutesThatCallOutAreLimitedPerTeam(t *testing.T) {
	cfg := config.Default()
	// One a minute after bursts of their own: no refill within the test.
	rl := &cfg.RateLimits
	rl.TeamRepositoryPerMinute, rl.TeamRepositoryBurst = 1, 3
	rl.TeamClusterReadsPerMinute, rl.TeamClusterReadsBurst = 1, 4
	rl.TeamAdminPerMinute, rl.TeamAdminBurst = 1, 5
	svc, _, tokens := testServiceWith(t, cfg, []store.Scope{store.ScopeRead, store.ScopeChange, store.ScopeAdmin})
	auth := "Bearer " + tokens[0]
	route := func(pattern string) Route { return routeOf(t, pattern) }
	limits := []struct {
		name   string
		burst  int
		routes []string
	}{
		{"rate_limits.team_repository_*", int(rl.TeamRepositoryBurst), []string{"GET /api/v1/clusters/{cluster}/repository"}},
		{"rate_limits.team_cluster_reads_*", int(rl.TeamClusterReadsBurst), []string{"POST /api/v1/decide",
			"GET /api/v1/clusters/{cluster}/argocd/apps", "GET /api/v1/clusters/{cluster}/argocd/apps/{namespace}/{name}"}},
		{"rate_limits.team_admin_*", int(rl.TeamAdminBurst), []string{"PUT /api/v1/clusters/{cluster}/kubeconfig",
			"POST /api/v1/clusters/{cluster}/repos", "GET /api/v1/clusters/{cluster}/repos/suggestions", "POST /api/v1/internal/tokens"}},
	}
	for _, l := range limits {
		for i := range l.burst {
			if rec := callRoute(svc, route(l.routes[i%len(l.routes)]), auth, "{}"); rec.Code == http.StatusTooManyRequests {
				t.Fatalf("%s: call %d, within the burst of %d: %d %s", l.name, i+1, l.burst, rec.Code, rec.Body)
			}
		}
		for _, pattern := range l.routes {
			rec := callRoute(svc, route(pattern), auth, "{}")
			if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), `"rate_limited"`) || rec.Header().Get("Retry-After") != "60" {
				t.Errorf("%s past %s's burst: %d %s (Retry-After %q), want 429 rate_limited", pattern, l.name, rec.Code, rec.Body, rec.Header().Get("Retry-After"))
			}
		}
	}
	for _, pattern := range []string{"GET /api/v1/changes", "GET /api/v1/clusters", "GET /api/v1/installations"} {
		if rec := callRoute(svc, route(pattern), auth, ""); rec.Code == http.StatusTooManyRequests {
			t.Errorf("%s, which asks only the store, with every limit spent: %d %s", pattern, rec.Code, rec.Body)
		}
	}
}

// routeOf is the route of Routes with pattern.
func routeOf(t *testing.T, pattern string) Route {
	t.Helper()
	for _, r := range Routes {
		if r.Pattern == pattern {
			return r
		}
	}
	t.Fatalf("no route %s", pattern)
	return Route{}
}
