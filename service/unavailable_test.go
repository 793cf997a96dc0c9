package service

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestPipelineThatCannotBeBuiltIsUnavailableWithItsReason: with a GitHub App, a
// pipeline whose caches cannot be made does not stop the service; the change API
// answers 503 pipeline_unavailable saying so (not the advice to configure an App,
// which is there, and not the host's paths), and the failure is logged as an error.
func TestPipelineThatCannotBeBuiltIsUnavailableWithItsReason(t *testing.T) {
	ctx := context.Background()
	db := storetest.SQLite(t)
	gh := githubtest.New(t)
	notADir := filepath.Join(t.TempDir(), "cache")
	if err := os.WriteFile(notADir, []byte("a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.GitHub.AppID, cfg.GitHub.PrivateKey, cfg.GitHub.APIURL, cfg.GitHub.WebURL = gh.AppID(), gh.PrivateKeyPEM(), gh.APIURL(), gh.URL()
	cfg.Auth.DevTeam = "dev"
	cfg.Pipeline.CacheDir = notADir
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
	body := `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},` +
		`"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice"}`
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/changes", strings.NewReader(body)))
	var answer struct{ Error, Reason string }
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || rec.Code != http.StatusServiceUnavailable || answer.Error != plan.CodePipelineUnavailable {
		t.Fatalf("POST /api/v1/changes = %d %s, want 503 %s", rec.Code, rec.Body, plan.CodePipelineUnavailable)
	}
	if !strings.Contains(answer.Reason, "could not be built") || strings.Contains(answer.Reason, notADir) || strings.Contains(answer.Reason, "github.app_id") {
		t.Errorf("reason %q, want the pipeline not built, without the path %s", answer.Reason, notADir)
	}
	if !strings.Contains(logs.String(), `"level":"error"`) || !strings.Contains(logs.String(), "Change pipeline not available") || !strings.Contains(logs.String(), notADir) {
		t.Errorf("no error-level log line about the pipeline:\n%s", logs)
	}
}
