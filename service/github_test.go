package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestWithoutAnAppTheInstallEndpointsSaySo: a run without a GitHub App hands out
// no install link (it was "/installations/new", relative and leading nowhere):
// every route that would hand one out or ask GitHub about an installation, and
// the setup callback, answer 503 github_not_configured naming the settings, as the
// startup log says; the callback leaves a state made earlier unused.
func TestWithoutAnAppTheInstallEndpointsSaySo(t *testing.T) {
	ctx := context.Background()
	db := storetest.SQLite(t)
	cfg := config.Default()
	cfg.Pipeline.CacheDir = t.TempDir()
	svc, logs := devServiceWithCluster(t, cfg, db)
	if !strings.Contains(logs.String(), "No GitHub App configured") || !strings.Contains(logs.String(), "503 "+setup.CodeGitHubNotConfigured) {
		t.Errorf("the startup log does not say what the endpoints answer:\n%s", logs)
	}
	bodies := map[string]string{
		"POST /api/v1/clusters/{cluster}/repos": `{"repo":"acme/shop"}`,
		"POST /api/v1/internal/tokens":          `{"cluster":"prod","repo":"acme/shop"}`,
	}
	for _, route := range setup.NeedApp {
		method, path, _ := strings.Cut(route, " ")
		path = strings.ReplaceAll(path, "{cluster}", "prod")
		rec := devRequest(svc, method, path, bodies[route])
		var answer struct{ Error, Reason string }
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || rec.Code != http.StatusServiceUnavailable ||
			answer.Error != setup.CodeGitHubNotConfigured || !strings.Contains(answer.Reason, "github.app_id") {
			t.Errorf("%s = %d %s, want 503 %s naming github.app_id", route, rec.Code, rec.Body, setup.CodeGitHubNotConfigured)
		}
		if strings.Contains(rec.Body.String(), "installations/new") {
			t.Errorf("%s hands out an install link: %s", route, rec.Body)
		}
	}

	team, err := db.TeamByName(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	state, _, err := db.CreateInstallState(ctx, team.ID, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	q := url.Values{"installation_id": {"7"}, "setup_action": {"install"}, "state": {state.Reveal()}, "code": {"c"}}
	svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, setup.CallbackPath+"?"+q.Encode(), nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "no GitHub App configured") {
		t.Errorf("GET %s = %d, want 503 saying no GitHub App is configured\n%s", setup.CallbackPath, rec.Code, rec.Body)
	}
	if _, err := db.ConsumeInstallState(ctx, state); err != nil {
		t.Errorf("the callback used up the state of a later run: %v", err)
	}
}

// devServiceWithCluster starts the service on db with cfg, its dev team "dev"
// having the in-cluster cluster "prod", and returns it with its log.
func devServiceWithCluster(t *testing.T, cfg config.Config, db *store.DB) (*Service, *servicetest.SyncBuffer) {
	t.Helper()
	ctx := context.Background()
	cfg.Auth.DevTeam = "dev"
	logs := &servicetest.SyncBuffer{}
	svc, err := New(ctx, cfg, db, zerolog.New(logs))
	if err != nil {
		t.Fatalf("the service did not start: %v", err)
	}
	team, err := db.TeamByName(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCluster(ctx, store.Cluster{TeamID: team.ID, Name: "prod", Access: store.ClusterInCluster}); err != nil {
		t.Fatal(err)
	}
	return svc, logs
}

// devRequest sends a request as the dev team, without a token.
func devRequest(svc *Service, method, path, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Host = "127.0.0.1:8080" // the dev team acts at this machine's address alone
	svc.Handler().ServeHTTP(rec, req)
	return rec
}
