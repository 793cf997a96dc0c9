//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/internal/moduleroot"
)

const (
	// serviceCluster is the name the team registers the test cluster under.
	serviceCluster = "e2e"
	// serviceTeam is the team the dev profile acts as for requests without a token.
	serviceTeam = "e2e"
	// serviceBinEnv names a service binary built beforehand (by hack/e2e.sh); without
	// it the test builds one.
	serviceBinEnv = "KUKIE_E2E_SERVICE_BIN"
)

// service is the kukie-gitops binary, built from this module and running as a child
// process the way it runs in production: SQLite store, the fake GitHub as a GitHub
// Enterprise host, the test cluster registered by kubeconfig.
type service struct {
	url  string
	proc *argocdharness.Process
}

// startService builds and starts the service, binds the fake GitHub's installation to
// the team, registers the cluster and connects the gitops repository to it.
func (s *suite) startService(t *testing.T) *service {
	t.Helper()
	root, err := moduleroot.Find()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := os.Getenv(serviceBinEnv)
	if bin == "" {
		bin = filepath.Join(dir, "kukie-gitops")
		build := exec.Command("go", "build", "-o", bin, ".")
		build.Dir = root
		// The tests may run in a network namespace without a way out, so nothing may be
		// downloaded; hack/e2e.sh builds the binary beforehand for that reason.
		build.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build the service (or set %s): %v\n%s", serviceBinEnv, err, out)
		}
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	svc := &service{url: "http://" + addr}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"XDG_CACHE_HOME=" + filepath.Join(dir, "cache"),
		"KUKIE_SERVER_ADDRESS=" + addr,
		"KUKIE_SERVER_PUBLIC_URL=" + svc.url,
		"KUKIE_DATABASE_URL=sqlite:" + filepath.Join(dir, "kukie.db"),
		"KUKIE_GITHUB_APP_ID=" + strconv.FormatInt(s.github.AppID(), 10),
		"KUKIE_GITHUB_APP_SLUG=" + s.github.AppSlug(),
		"KUKIE_GITHUB_WEB_URL=" + s.github.URL(),
		"KUKIE_GITHUB_API_URL=" + s.github.APIURL(),
		"KUKIE_GITHUB_GRAPHQL_URL=" + s.github.URL() + "/api/graphql",
		"KUKIE_GITHUB_PRIVATE_KEY=" + s.github.PrivateKeyPEM().Reveal(),
		"KUKIE_GITHUB_WEBHOOK_SECRET=" + s.github.WebhookSecret().Reveal(),
		"KUKIE_GITHUB_CLIENT_ID=" + s.github.ClientID(),
		"KUKIE_GITHUB_CLIENT_SECRET=" + s.github.ClientSecret().Reveal(),
		"KUKIE_ENCRYPTION_KEY=" + base64.StdEncoding.EncodeToString(key),
		"KUKIE_AUTH_DEV_TEAM=" + serviceTeam,
		"KUKIE_PIPELINE_DEPLOY_TIMEOUT=3m",
		"KUKIE_LOG_LEVEL=debug",
	}
	svc.proc = argocdharness.StartProcess(t, "kukie-gitops", env, bin, "serve")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := svc.proc.WaitReady(ctx, func(ctx context.Context) error {
		return svc.call(ctx, http.MethodGet, "/readyz", nil, http.StatusOK, nil)
	}); err != nil {
		t.Fatalf("service not ready: %v", err)
	}
	s.github.SetWebhookURL(svc.url + "/webhooks/github")

	// The team installs the App on the organisation through the setup callback; GitHub's
	// installation webhook names the installing user, and GitHub hands their
	// authorization code along, which proves who came back.
	installation := s.github.CreateInstallationBy(t, "installer", "acme", gitopsRepo)
	var state struct {
		State string `json:"state"`
	}
	svc.must(t, http.MethodPost, "/api/v1/installations/state", nil, http.StatusCreated, &state)
	q := url.Values{"installation_id": {strconv.FormatInt(installation, 10)}, "setup_action": {"install"}, "state": {state.State},
		"code": {s.github.AuthorizationCode(t, "installer")}}
	svc.must(t, http.MethodGet, "/github/setup?"+q.Encode(), nil, http.StatusOK, nil)

	svc.must(t, http.MethodPost, "/api/v1/clusters", map[string]any{"name": serviceCluster, "kubeconfig": string(s.kube.Kubeconfig)}, http.StatusCreated, nil)
	// Connected under the URL Argo CD uses; the service normalizes it to the repo.
	svc.must(t, http.MethodPost, "/api/v1/clusters/"+serviceCluster+"/repos", map[string]any{"repo": s.repoURL}, http.StatusCreated, nil)
	return svc
}

// must calls the API and fails the test on an unexpected status.
func (svc *service) must(t *testing.T, method, path string, body any, want int, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := svc.call(ctx, method, path, body, want, out); err != nil {
		t.Fatal(err)
	}
}

// call sends a JSON request and decodes the answer into out when the status is want.
func (svc *service) call(ctx context.Context, method, path string, body any, want int, out any) error {
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, svc.url+path, reader)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w: %s", method, path, err, data)
		}
	}
	return nil
}
