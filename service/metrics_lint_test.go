package service

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestMetricsFollowPrometheusConventions: every metric the service exposes, with
// a GitHub App and its pipeline built, passes Prometheus' own linter: help strings,
// units in base units and in the name, counters ending in _total, no reserved
// suffixes on gauges.
func TestMetricsFollowPrometheusConventions(t *testing.T) {
	gh := githubtest.New(t)
	cfg := config.Default()
	cfg.Pipeline.CacheDir = t.TempDir()
	cfg.GitHub.AppID, cfg.GitHub.PrivateKey, cfg.GitHub.APIURL, cfg.GitHub.WebURL = gh.AppID(), gh.PrivateKeyPEM(), gh.APIURL(), gh.URL()
	svc, err := New(context.Background(), cfg, storetest.SQLite(t), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, MetricsPath, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", MetricsPath, rec.Code, rec.Body)
	}
	problems, err := promlint.New(rec.Body).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
