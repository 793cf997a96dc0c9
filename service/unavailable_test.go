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
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestPipelineThatCannotBeBuiltIsUnavailableWithItsReason: with a GitHub App, a
// pipeline whose caches cannot be made does not stop the service; the change API
// answers 503 pipeline_unavailable saying so (not the advice to configure an App,
// which is there, and not the host's paths), the failure is logged as an error,
// and the replica is not ready.
func TestPipelineThatCannotBeBuiltIsUnavailableWithItsReason(t *testing.T) {
	db := storetest.SQLite(t)
	gh := githubtest.New(t)
	notADir := filepath.Join(t.TempDir(), "cache")
	if err := os.WriteFile(notADir, []byte("a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.GitHub.AppID, cfg.GitHub.PrivateKey, cfg.GitHub.APIURL, cfg.GitHub.WebURL = gh.AppID(), gh.PrivateKeyPEM(), gh.APIURL(), gh.URL()
	cfg.Pipeline.CacheDir = notADir
	svc, logs := devServiceWithCluster(t, cfg, db)
	body := `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},` +
		`"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice"}`
	rec := devRequest(svc, http.MethodPost, "/api/v1/changes", body)
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
	if code, reason := readyz(t, svc); code != http.StatusServiceUnavailable || !strings.HasPrefix(reason, "pipeline:") {
		t.Errorf("GET /readyz = %d %q, want 503 naming the pipeline", code, reason)
	}
}

// TestReadinessIsTheDatabaseNotGitHub: a replica is ready while its database
// answers, whether GitHub does or not (an outage there would take every replica
// out at once), and not once the database stops answering; without an App, the
// pipeline that cannot run does not make it unready.
func TestReadinessIsTheDatabaseNotGitHub(t *testing.T) {
	for name, withApp := range map[string]bool{"with an App": true, "without an App": false} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := storetest.SQLite(t)
			cfg := config.Default()
			cfg.Pipeline.CacheDir = t.TempDir()
			var gh *githubtest.Server
			if withApp {
				gh = githubtest.New(t)
				cfg.GitHub.AppID, cfg.GitHub.PrivateKey, cfg.GitHub.APIURL, cfg.GitHub.WebURL = gh.AppID(), gh.PrivateKeyPEM(), gh.APIURL(), gh.URL()
			}
			svc, err := New(ctx, cfg, db, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			if code, reason := readyz(t, svc); code != http.StatusOK {
				t.Fatalf("GET /readyz = %d %q, want 200", code, reason)
			}
			if gh != nil {
				gh.Close()
				if code, reason := readyz(t, svc); code != http.StatusOK {
					t.Fatalf("with GitHub gone, GET /readyz = %d %q, want 200", code, reason)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if code, reason := readyz(t, svc); code != http.StatusServiceUnavailable || !strings.HasPrefix(reason, "database:") {
				t.Fatalf("with the database closed, GET /readyz = %d %q, want 503 naming the database", code, reason)
			}
		})
	}
}

// readyz asks the service's /readyz and returns the status and the reason.
func readyz(t *testing.T, svc *Service) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var answer struct{ Reason string }
	if rec.Code != http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil {
			t.Fatalf("GET /readyz = %d %s", rec.Code, rec.Body)
		}
	}
	return rec.Code, answer.Reason
}
