package service

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/kube/kubetest"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// TestShutdownStopsClusterWatches runs a service in-process against a real API
// server: reading a registered cluster's repository suggestions starts its informer
// on Applications, held for minutes after the read so later readers share it. When
// the service stops, every goroutine it started, that informer's included, has
// ended by the time Run returns.
func TestShutdownStopsClusterWatches(t *testing.T) {
	env := kubetest.Start(t)
	argoNS := env.Namespace(t, "argocd")
	env.Create(t, kubetest.Application(kubetest.App{Namespace: argoNS, Name: "web", RepoURL: "https://github.com/acme/deploy", Path: "apps/web"}))
	db := storetest.SQLite(t)
	cfg := config.Default()
	cfg.Auth.DevTeam = "shop"
	cfg.Metrics.Address = ""
	cfg.Encryption.Key = secret.New(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, config.EncryptionKeyBytes)))
	cfg.Pipeline.CacheDir = t.TempDir()

	// Everything running before the service was built is not the service's.
	before := goleak.IgnoreCurrent()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	svc, err := New(ctx, cfg, db, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	call := func(method, path string, body any) (int, string) {
		var b bytes.Buffer
		if body != nil {
			if err := json.NewEncoder(&b).Encode(body); err != nil {
				t.Fatal(err)
			}
		}
		r := httptest.NewRequest(method, path, &b)
		r.Host = "127.0.0.1:8080" // the dev team acts at this machine's address alone
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		svc.Handler().ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	if status, body := call("POST", "/api/v1/clusters", map[string]any{"name": "prod", "kubeconfig": string(env.Kubeconfig)}); status != http.StatusCreated {
		t.Fatalf("register the cluster: %d %s", status, body)
	}
	// The suggestions read the Applications (through the held informer) before they
	// ask GitHub, which this service has none of: the answer does not matter.
	call("GET", "/api/v1/clusters/prod/repos/suggestions", nil)
	if err := goleak.Find(before); err == nil {
		t.Fatal("no goroutine of the held informer runs before the shutdown: this test would prove nothing")
	}

	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}
