package setup_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
	"github.com/kukie/kukie-gitops/store/storetest"
)

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster:
    server: https://prod.example:6443
contexts:
- name: prod
  context: {cluster: prod, user: admin}
current-context: prod
users:
- name: admin
  user:
    token: kube-token-do-not-leak
`

func TestRegisterClusters(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "kubeconfig": kubeconfig})
		if status != http.StatusCreated || !strings.Contains(string(body), `"access":"kubeconfig"`) {
			t.Fatalf("register = %d %s", status, body)
		}
		c, err := db.ClusterByName(ctx, e.teamA.ID, "prod")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(c.SealedCredentials, "kube-token-do-not-leak") || !strings.HasPrefix(c.SealedCredentials, "v1:") {
			t.Fatalf("stored credentials are not sealed: %q", c.SealedCredentials)
		}
		plain, err := e.api.Credentials.Open(c.SealedCredentials, store.CredentialsAssociatedData(c.TeamID, c.Name))
		if err != nil || string(plain) != kubeconfig {
			t.Errorf("sealed kubeconfig does not open to the original: %v", err)
		}
		status, body = e.do("GET", "/api/v1/clusters", e.tokenA, nil)
		if status != http.StatusOK || strings.Contains(string(body), "kube-token") || strings.Contains(string(body), "v1:") {
			t.Errorf("listing = %d %s, want no credentials", status, body)
		}
		if strings.Contains(e.logs.String(), "kube-token-do-not-leak") {
			t.Error("the kubeconfig's token reached the log")
		}

		cases := map[string]struct {
			body       map[string]any
			wantStatus int
			wantCode   string
		}{
			"duplicate":     {body: map[string]any{"name": "prod", "in_cluster": true}, wantStatus: http.StatusConflict, wantCode: "cluster_exists"},
			"bad name":      {body: map[string]any{"name": "Prod!", "in_cluster": true}, wantStatus: http.StatusBadRequest, wantCode: "invalid_cluster_name"},
			"neither":       {body: map[string]any{"name": "stage"}, wantStatus: http.StatusBadRequest, wantCode: "invalid_cluster"},
			"both":          {body: map[string]any{"name": "stage", "in_cluster": true, "kubeconfig": kubeconfig}, wantStatus: http.StatusBadRequest, wantCode: "invalid_cluster"},
			"not a config":  {body: map[string]any{"name": "stage", "kubeconfig": "{{{"}, wantStatus: http.StatusBadRequest, wantCode: "invalid_kubeconfig"},
			"no context":    {body: map[string]any{"name": "stage", "kubeconfig": "apiVersion: v1\nkind: Config\n"}, wantStatus: http.StatusBadRequest, wantCode: "invalid_kubeconfig"},
			"unknown field": {body: map[string]any{"name": "stage", "in_cluster": true, "token": "x"}, wantStatus: http.StatusBadRequest, wantCode: "invalid_json"},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				status, body := e.do("POST", "/api/v1/clusters", e.tokenA, tc.body)
				if status != tc.wantStatus || !strings.Contains(string(body), tc.wantCode) {
					t.Errorf("= %d %s, want %d %s", status, body, tc.wantStatus, tc.wantCode)
				}
			})
		}
		if status, body := e.do("POST", "/api/v1/clusters", e.tokenB, map[string]any{"name": "prod", "in_cluster": true}); status != http.StatusCreated {
			t.Errorf("another team's cluster of the same name = %d %s, want 201", status, body)
		}
	})
}

func TestKubeconfigRefusedWithoutKey(t *testing.T) {
	db := storetest.SQLite(t)
	e := newEnv(t, db, func(a *setup.API) { a.Credentials = &sealed.Box{} })
	status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "kubeconfig": kubeconfig})
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "credentials_key_missing") {
		t.Fatalf("= %d %s, want 503 credentials_key_missing", status, body)
	}
	if status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "in_cluster": true}); status != http.StatusCreated {
		t.Errorf("in-cluster without key = %d %s, want 201", status, body)
	}
}

type repoList struct {
	Repos       []repoItem `json:"repos"`
	Suggestions []repoItem `json:"suggestions"`
}

type repoItem struct {
	Repo     string `json:"repo"`
	FullName string `json:"full_name"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
}

func statuses(items []repoItem) map[string]string {
	out := map[string]string{}
	for _, it := range items {
		out[it.FullName] = it.Status
	}
	return out
}

func TestConnectRepositories(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		e.gh.CreateRepo(t, "acme", "late", nil, "main")
		e.gh.CreateRepo(t, "other", "private", nil, "main")
		id := e.install(e.tokenA, "acme", "deploy")
		if status, page := e.bind(e.tokenA, id); status != http.StatusOK {
			t.Fatalf("bind: %d %s", status, page)
		}
		for _, tok := range []secret.Secret{e.tokenA, e.tokenB} {
			req := map[string]any{"name": "prod", "in_cluster": true}
			if status, body := e.do("POST", "/api/v1/clusters", tok, req); status != http.StatusCreated {
				t.Fatalf("create cluster: %d %s", status, body)
			}
		}

		// Every spelling of one repository connects the same one.
		for _, spelling := range []string{"acme/deploy", e.gh.URL() + "/Acme/Deploy.git", "https://" + strings.TrimPrefix(e.gh.URL(), "http://") + "/acme/deploy/"} {
			status, body := e.do("POST", "/api/v1/clusters/prod/repos", e.tokenA, map[string]string{"repo": spelling})
			if status != http.StatusCreated && status != http.StatusOK {
				t.Fatalf("connect %s = %d %s", spelling, status, body)
			}
		}
		var list repoList
		status, body := e.do("GET", "/api/v1/clusters/prod/repos", e.tokenA, nil)
		if err := json.Unmarshal(body, &list); err != nil || status != http.StatusOK {
			t.Fatalf("list = %d %s", status, body)
		}
		if len(list.Repos) != 1 || list.Repos[0].Repo != e.repoURL("acme/deploy") || list.Repos[0].Status != "connected" {
			t.Fatalf("repos = %+v, want acme/deploy connected once", list.Repos)
		}

		status, body = e.do("POST", "/api/v1/clusters/prod/repos", e.tokenA, map[string]string{"repo": "other/private"})
		var refusal struct {
			Error, Reason string
			InstallURL    string `json:"install_url"`
		}
		_ = json.Unmarshal(body, &refusal)
		if status != http.StatusForbidden || refusal.Error != "repo_not_installed" || !strings.Contains(refusal.Reason, "other/private") ||
			!strings.HasSuffix(refusal.InstallURL, "/apps/"+e.gh.AppSlug()+"/installations/new") {
			t.Errorf("connecting an uninstalled repo = %d %s, want 403 repo_not_installed with the install link", status, body)
		}
		status, body = e.do("POST", "/api/v1/clusters/prod/repos", e.tokenB, map[string]string{"repo": "acme/deploy"})
		if status != http.StatusForbidden || !strings.Contains(string(body), "repo_not_installed") {
			t.Errorf("team-b connecting team-a's installation's repo = %d %s, want 403", status, body)
		}
		for name, repo := range map[string]string{
			"other host": "https://gitlab.example/acme/deploy",
			"not a repo": "https://" + strings.TrimPrefix(e.gh.URL(), "http://") + "/acme/deploy/tree/main",
			"empty":      "",
		} {
			t.Run(name, func(t *testing.T) {
				status, body := e.do("POST", "/api/v1/clusters/prod/repos", e.tokenA, map[string]string{"repo": repo})
				if status != http.StatusBadRequest || !strings.Contains(string(body), "invalid_repo") {
					t.Errorf("= %d %s, want 400 invalid_repo", status, body)
				}
			})
		}
		if status, body := e.do("POST", "/api/v1/clusters/nope/repos", e.tokenA, map[string]string{"repo": "acme/deploy"}); status != http.StatusNotFound {
			t.Errorf("unknown cluster = %d %s, want 404", status, body)
		}

		// A repository added on GitHub whose webhook has not been processed yet is
		// found by re-reading the installation's list.
		e.gh.AddInstallationRepos(t, id, "late")
		e.gh.ResetRequestCounts()
		status, body = e.do("POST", "/api/v1/clusters/prod/repos", e.tokenA, map[string]string{"repo": "acme/late"})
		if status != http.StatusCreated {
			t.Errorf("connect a just-added repo = %d %s, want 201", status, body)
		}
		if n := e.gh.RequestCount("GET /installation/repositories"); n != 1 {
			t.Errorf("re-read the installation's repositories %d times, want once", n)
		}

		status, body = e.do("DELETE", "/api/v1/clusters/prod/repos?repo=acme/late", e.tokenA, nil)
		if status != http.StatusNoContent {
			t.Errorf("disconnect = %d %s", status, body)
		}
		status, body = e.do("DELETE", "/api/v1/clusters/prod/repos?repo=acme/late", e.tokenA, nil)
		if status != http.StatusNotFound || !strings.Contains(string(body), "repo_not_connected") {
			t.Errorf("second disconnect = %d %s, want 404", status, body)
		}
	})
}

func TestConnectWhileInstallationAwaitsApproval(t *testing.T) {
	db := storetest.SQLite(t)
	e := newEnv(t, db)
	e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
	if status, page := e.callback("setup_action=request&state=" + e.state(e.tokenA)); status != http.StatusAccepted {
		t.Fatalf("request: %d %s", status, page)
	}
	if status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "in_cluster": true}); status != http.StatusCreated {
		t.Fatalf("create cluster: %d %s", status, body)
	}
	status, body := e.do("POST", "/api/v1/clusters/prod/repos", e.tokenA, map[string]string{"repo": "acme/deploy"})
	if status != http.StatusAccepted || !strings.Contains(string(body), `"status":"pending_approval"`) {
		t.Fatalf("connect while pending = %d %s, want 202 pending_approval", status, body)
	}
	if status, _, body := e.mint("prod", "acme/deploy"); status != http.StatusForbidden || !strings.Contains(body, "connection_pending_approval") {
		t.Errorf("token while pending = %d %s, want 403", status, body)
	}

	// The owner approves; the team finishes with a fresh link; the connection follows.
	id := e.install(e.tokenA, "acme", "deploy")
	if status, page := e.callback("installation_id=" + itoa(id) + "&setup_action=update&state=" + e.state(e.tokenA) + "&code=" + e.code(e.tokenA, id)); status != http.StatusOK {
		t.Fatalf("bind after approval: %d %s", status, page)
	}
	var list repoList
	_, body = e.do("GET", "/api/v1/clusters/prod/repos", e.tokenA, nil)
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if got := statuses(list.Repos); got["acme/deploy"] != "connected" {
		t.Errorf("after approval: %v, want connected", got)
	}
}

type fakeAppRepos struct{ urls []string }

func (f fakeAppRepos) RepoURLs(context.Context, store.Cluster) ([]string, error) { return f.urls, nil }

func TestSuggestions(t *testing.T) {
	db := storetest.SQLite(t)
	var lister fakeAppRepos
	e := newEnv(t, db)
	e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
	e.gh.CreateRepo(t, "acme", "infra", nil, "main")
	id := e.install(e.tokenA, "acme", "deploy", "infra")
	if status, page := e.bind(e.tokenA, id); status != http.StatusOK {
		t.Fatalf("bind: %d %s", status, page)
	}
	if status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "in_cluster": true}); status != http.StatusCreated {
		t.Fatalf("create cluster: %d %s", status, body)
	}
	if status, body := e.do("POST", "/api/v1/clusters/prod/repos", e.tokenA, map[string]string{"repo": "acme/deploy"}); status != http.StatusCreated {
		t.Fatalf("connect: %d %s", status, body)
	}

	if status, body := e.do("GET", "/api/v1/clusters/prod/repos/suggestions", e.tokenA, nil); status != http.StatusServiceUnavailable ||
		!strings.Contains(string(body), "suggestions_unavailable") {
		t.Errorf("suggestions without an Application reader = %d %s, want 503 suggestions_unavailable", status, body)
	}

	host := strings.TrimPrefix(e.gh.URL(), "http://")
	lister.urls = []string{
		"https://" + host + "/acme/deploy.git", // connected
		"https://" + host + "/ACME/infra",      // installable
		"https://" + host + "/acme/infra.git/", // the same repo again
		"https://" + host + "/acme/unknown",    // not installed
		"https://gitlab.example/x/y",           // not on this GitHub
	}
	e.api.AppRepos = lister
	_, body := e.do("GET", "/api/v1/clusters/prod/repos/suggestions", e.tokenA, nil)
	var got repoList
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"acme/deploy": "connected", "acme/infra": "installable", "acme/unknown": "not_installed"}
	st := statuses(got.Suggestions)
	for name, status := range want {
		if st[name] != status {
			t.Errorf("suggestion %s = %q, want %q (all: %s)", name, st[name], status, body)
		}
	}
	if len(got.Suggestions) != 3 {
		t.Errorf("%d suggestions, want 3 (duplicates merged): %s", len(got.Suggestions), body)
	}
	if !bytes.Contains(body, []byte(`"skipped"`)) || !bytes.Contains(body, []byte("gitlab.example")) {
		t.Errorf("the repo on another host is not reported as skipped: %s", body)
	}
}

// credentialsListener records the clusters whose credentials changed.
type credentialsListener struct{ changed []clusteraccess.Ref }

func (l *credentialsListener) CredentialsChanged(_ context.Context, ref clusteraccess.Ref) error {
	l.changed = append(l.changed, ref)
	return nil
}

// TestReplaceClusterKubeconfig: a team replaces its cluster's kubeconfig; the new
// one is checked as at registration, stored sealed in place of the old, and the
// service's cluster access is told, once. A bad kubeconfig or an unknown cluster
// changes nothing and tells nobody.
func TestReplaceClusterKubeconfig(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		listener := &credentialsListener{}
		e := newEnv(t, db, func(a *setup.API) { a.Access = listener })
		if status, body := e.do("POST", "/api/v1/clusters", e.tokenA, map[string]any{"name": "prod", "kubeconfig": kubeconfig}); status != http.StatusCreated {
			t.Fatalf("register = %d %s", status, body)
		}
		rotated := strings.Replace(kubeconfig, "kube-token-do-not-leak", "rotated-token-do-not-leak", 1)
		cases := map[string]struct {
			path       string
			body       map[string]any
			wantStatus int
			wantCode   string
		}{
			"not a config":    {"/api/v1/clusters/prod/kubeconfig", map[string]any{"kubeconfig": "{{{"}, http.StatusBadRequest, "invalid_kubeconfig"},
			"none":            {"/api/v1/clusters/prod/kubeconfig", map[string]any{}, http.StatusBadRequest, "invalid_kubeconfig"},
			"runs a command":  {"/api/v1/clusters/prod/kubeconfig", map[string]any{"kubeconfig": strings.Replace(kubeconfig, "token: kube-token-do-not-leak", "exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}", 1)}, http.StatusBadRequest, "exec"},
			"unknown cluster": {"/api/v1/clusters/stage/kubeconfig", map[string]any{"kubeconfig": rotated}, http.StatusNotFound, "cluster_not_found"},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				status, body := e.do("PUT", tc.path, e.tokenA, tc.body)
				if status != tc.wantStatus || !strings.Contains(string(body), tc.wantCode) {
					t.Errorf("= %d %s, want %d %s", status, body, tc.wantStatus, tc.wantCode)
				}
			})
		}
		if len(listener.changed) != 0 {
			t.Fatalf("refused replacements told the cluster access of %v", listener.changed)
		}
		status, body := e.do("PUT", "/api/v1/clusters/prod/kubeconfig", e.tokenA, map[string]any{"kubeconfig": rotated})
		if status != http.StatusOK || !strings.Contains(string(body), `"access":"kubeconfig"`) || strings.Contains(string(body), "rotated-token") {
			t.Fatalf("replace = %d %s", status, body)
		}
		c, err := db.ClusterByName(ctx, e.teamA.ID, "prod")
		if err != nil {
			t.Fatal(err)
		}
		plain, err := e.api.Credentials.Open(c.SealedCredentials, store.CredentialsAssociatedData(c.TeamID, c.Name))
		if err != nil || string(plain) != rotated {
			t.Fatalf("the stored kubeconfig is not the new one: %v", err)
		}
		if want := (clusteraccess.Ref{TeamID: e.teamA.ID, Name: "prod"}); len(listener.changed) != 1 || listener.changed[0] != want {
			t.Fatalf("cluster access told of %v, want %v once", listener.changed, want)
		}
		if status, _ := e.do("PUT", "/api/v1/clusters/prod/kubeconfig", e.tokenB, map[string]any{"kubeconfig": rotated}); status != http.StatusNotFound {
			t.Errorf("another team replaced the kubeconfig: %d, want 404", status)
		}
		if strings.Contains(e.logs.String(), "rotated-token-do-not-leak") {
			t.Error("the new kubeconfig's token reached the log")
		}
	})
}
