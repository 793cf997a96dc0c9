package setup_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// connected sets up team-a with an installation on acme (deploy, infra), a cluster
// "prod" and deploy connected to it. other/private exists but is not installed.
func connected(t *testing.T, e *env) int64 {
	t.Helper()
	e.gh.CreateRepo(t, "acme", "deploy", map[string]string{"apps/web.yaml": "kind: Deployment\n"}, "main")
	e.gh.CreateRepo(t, "acme", "infra", map[string]string{"README.md": "infra\n"}, "main")
	e.gh.CreateRepo(t, "other", "private", map[string]string{"README.md": "secret\n"}, "main")
	id := e.install(e.tokenA, "acme", "deploy", "infra")
	if status, page := e.bind(e.tokenA, id); status != http.StatusOK {
		t.Fatalf("bind: %d %s", status, page)
	}
	e.drain()
	if status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "in_cluster": true}); status != http.StatusCreated {
		t.Fatalf("create cluster: %d %s", status, body)
	}
	if status, body := e.do("POST", "/api/v1/clusters/prod/repos", e.tokenA, map[string]string{"repo": "acme/deploy"}); status != http.StatusCreated {
		t.Fatalf("connect: %d %s", status, body)
	}
	return id
}

type tokenAnswer struct {
	Token       string            `json:"token"`
	ExpiresAt   time.Time         `json:"expires_at"`
	Repository  string            `json:"repository"`
	Permissions map[string]string `json:"permissions"`
}

func (e *env) mint(cluster, repo string) (int, tokenAnswer, string) {
	e.t.Helper()
	status, body := e.do("POST", "/api/v1/internal/tokens", e.tokenA, map[string]string{"cluster": cluster, "repo": repo})
	var out tokenAnswer
	if status == http.StatusCreated {
		if err := json.Unmarshal(body, &out); err != nil {
			e.t.Fatal(err)
		}
	}
	return status, out, string(body)
}

// repoClient is what an agent does with the token: plain go-github on the fake.
func (e *env) repoClient(token string) *gh.Client {
	e.t.Helper()
	c, err := gh.NewClient(nil).WithAuthToken(token).WithEnterpriseURLs(e.gh.URL(), e.gh.URL())
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func TestTokenIsScopedToTheConnectedRepo(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		connected(t, e)

		status, tok, body := e.mint("prod", e.gh.URL()+"/acme/deploy.git")
		if status != http.StatusCreated {
			t.Fatalf("mint = %d %s", status, body)
		}
		if tok.Repository != "acme/deploy" || tok.Permissions["contents"] != "write" || tok.Permissions["pull_requests"] != "write" {
			t.Errorf("token = %+v, want acme/deploy with contents and pull_requests write", tok)
		}
		if d := time.Until(tok.ExpiresAt); d < 50*time.Minute || d > 61*time.Minute {
			t.Errorf("token expires in %v, want about an hour", d)
		}
		if len(tok.Permissions) > 3 {
			t.Errorf("token has more permissions than asked: %v", tok.Permissions)
		}

		client := e.repoClient(tok.Token)
		if _, _, err := client.Repositories.Get(ctx, "acme", "deploy"); err != nil {
			t.Errorf("the token cannot read its repository: %v", err)
		}
		blob := &gh.Blob{Content: gh.String("replicas: 3\n"), Encoding: gh.String("utf-8")}
		if _, _, err := client.Git.CreateBlob(ctx, "acme", "deploy", blob); err != nil {
			t.Errorf("the token cannot write to its repository: %v", err)
		}
		if _, res, err := client.Git.CreateBlob(ctx, "acme", "infra", blob); err == nil || res == nil || res.StatusCode != http.StatusNotFound {
			t.Errorf("the token writes to another repository of the installation: %v", err)
		}
		_, res, err := client.Repositories.Get(ctx, "acme", "infra")
		if err == nil || res == nil || res.StatusCode != http.StatusNotFound {
			t.Errorf("the token reads another repository of the installation: %v", err)
		}
		_, res, err = client.Repositories.Get(ctx, "other", "private")
		if err == nil || res == nil || res.StatusCode != http.StatusNotFound {
			t.Errorf("the token reads a repository outside the installation: %v", err)
		}

		// The token is in no log line, no listing, no audit row, no stored delivery.
		for path, body := range map[string]string{
			"clusters":      string(must(e.do("GET", "/api/v1/clusters", e.tokenA, nil))),
			"repos":         string(must(e.do("GET", "/api/v1/clusters/prod/repos", e.tokenA, nil))),
			"suggestions":   string(must(e.do("GET", "/api/v1/clusters/prod/repos/suggestions", e.tokenA, nil))),
			"installations": string(must(e.do("GET", "/api/v1/installations", e.tokenA, nil))),
			"logs":          e.logs.String(),
			"audit":         auditText(t, db),
		} {
			if strings.Contains(body, tok.Token) {
				t.Errorf("the token appears in %s", path)
			}
		}
		if !strings.Contains(e.logs.String(), "Installation token issued") {
			t.Error("the log has no line about the issued token; the scan above proves nothing")
		}
	})
}

func must(_ int, body []byte) []byte { return body }

func auditText(t *testing.T, db *store.DB) string {
	t.Helper()
	events, err := db.ListAuditEvents(context.Background(), store.AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(events)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestTokenRefusals(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		id := connected(t, e)
		if status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "stage", "in_cluster": true}); status != http.StatusCreated {
			t.Fatalf("create stage: %d %s", status, body)
		}

		expectRefusal := func(t *testing.T, cluster, repo, code string) {
			t.Helper()
			e.gh.ResetRequestCounts()
			status, _, body := e.mint(cluster, repo)
			if status != http.StatusForbidden || !strings.Contains(body, `"error":"`+code+`"`) || !strings.Contains(body, `"reason"`) {
				t.Errorf("mint(%s, %s) = %d %s, want 403 %s with a reason", cluster, repo, status, body, code)
			}
			if n := e.gh.RequestCount("POST /app/installations/{installation_id}/access_tokens"); n != 0 {
				t.Errorf("a refused request minted %d tokens on GitHub", n)
			}
		}
		t.Run("repo not connected to the cluster", func(t *testing.T) { expectRefusal(t, "stage", "acme/deploy", "repo_not_connected") })
		t.Run("repo of the installation, never connected", func(t *testing.T) { expectRefusal(t, "prod", "acme/infra", "repo_not_connected") })
		t.Run("unknown cluster", func(t *testing.T) { expectRefusal(t, "nope", "acme/deploy", "cluster_not_found") })
		t.Run("other team's cluster", func(t *testing.T) {
			status, body := e.do("POST", "/api/v1/internal/tokens", e.tokenB, map[string]string{"cluster": "prod", "repo": "acme/deploy"})
			if status != http.StatusForbidden || !strings.Contains(string(body), "cluster_not_found") {
				t.Errorf("team-b minting on team-a's cluster = %d %s", status, body)
			}
		})

		e.gh.SuspendInstallation(t, id)
		e.drain()
		t.Run("installation suspended", func(t *testing.T) { expectRefusal(t, "prod", "acme/deploy", "installation_suspended") })
		e.gh.UnsuspendInstallation(t, id)
		e.drain()
		if status, _, body := e.mint("prod", "acme/deploy"); status != http.StatusCreated {
			t.Fatalf("after unsuspend: %d %s", status, body)
		}

		e.gh.RemoveInstallationRepos(t, id, "deploy")
		e.drain()
		t.Run("repo removed from the installation", func(t *testing.T) { expectRefusal(t, "prod", "acme/deploy", "connection_revoked") })
		status, body := e.do("GET", "/api/v1/clusters/prod/repos", e.tokenA, nil)
		if status != http.StatusOK || !strings.Contains(string(body), `"status":"revoked"`) || !strings.Contains(string(body), "removed the repository") {
			t.Errorf("listing after removal = %d %s, want revoked with the reason", status, body)
		}

		e.gh.AddInstallationRepos(t, id, "deploy")
		e.drain()
		if status, _, body := e.mint("prod", "acme/deploy"); status != http.StatusCreated {
			t.Fatalf("after re-adding the repository: %d %s", status, body)
		}

		if status, body := e.do("DELETE", "/api/v1/clusters/prod/repos?repo="+url.QueryEscape(e.gh.URL()+"/ACME/Deploy.git/"), e.tokenA, nil); status != http.StatusNoContent {
			t.Fatalf("disconnect = %d %s", status, body)
		}
		t.Run("disconnected repo", func(t *testing.T) { expectRefusal(t, "prod", "acme/deploy", "repo_not_connected") })

		if status, body := e.do("POST", "/api/v1/clusters/prod/repos", e.tokenA, map[string]string{"repo": "acme/deploy"}); status != http.StatusCreated {
			t.Fatalf("reconnect: %d %s", status, body)
		}
		e.gh.DeleteInstallation(t, id)
		e.drain()
		t.Run("installation deleted", func(t *testing.T) { expectRefusal(t, "prod", "acme/deploy", "installation_missing") })
		status, body = e.do("GET", "/api/v1/clusters/prod/repos", e.tokenA, nil)
		if status != http.StatusOK || !strings.Contains(string(body), `"status":"not_installed"`) {
			t.Errorf("listing after uninstall = %d %s, want not_installed", status, body)
		}
	})
}
