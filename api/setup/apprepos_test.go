package setup_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// TestSuggestionsFromClusterApplications reads real Applications from an API server:
// one repository spelt five ways, a multi-source app, a Helm chart source, a
// repository on another host and a URL that names no repository.
func TestSuggestionsFromClusterApplications(t *testing.T) {
	k := kubetest.Start(t)
	db := storetest.SQLite(t)
	// Repositories live on github.com while the API is the fake, as with a GitHub
	// Enterprise web host: Argo CD's ssh spellings carry no port.
	e := newEnv(t, db, func(a *setup.API) { a.WebHost = "github.com" })
	lister := setup.ApplicationRepos{Clusters: clusteraccess.Clusters{DB: db, Registry: kube.NewClusters(kube.Options{}), Credentials: e.api.Credentials}}
	e.api.AppRepos = lister

	ns := k.Namespace(t, "argocd")
	app := func(name, repoURL string) *unstructured.Unstructured {
		return kubetest.Application(kubetest.App{Namespace: ns, Name: name, RepoURL: repoURL, Path: "apps/" + name})
	}
	multi := app("multi", "")
	unstructured.RemoveNestedField(multi.Object, "spec", "source")
	if err := unstructured.SetNestedSlice(multi.Object, []any{
		map[string]any{"repoURL": "https://github.com/acme/infra.git", "path": "base", "targetRevision": "main"},
		map[string]any{"repoURL": "git@github.com:acme/values", "ref": "values", "targetRevision": "main"},
		map[string]any{"repoURL": "https://charts.example.com/stable", "chart": "redis", "targetRevision": "18.1.0"},
	}, "spec", "sources"); err != nil {
		t.Fatal(err)
	}
	k.Create(t,
		app("web", "https://github.com/Acme/Deploy.git"),
		app("web-slash", "https://github.com/acme/deploy/"),
		app("web-scp", "git@github.com:acme/deploy.git"),
		app("web-ssh", "ssh://git@github.com/acme/deploy"),
		app("web-ssh-port", "ssh://git@github.com:22/ACME/deploy.git"),
		app("infra", "https://github.com/acme/infra"),
		multi,
		app("elsewhere", "https://gitlab.example/x/y"),
		app("broken", "https://github.com/acme"),
	)

	// Team A: an active installation that sees deploy and infra; deploy is connected.
	e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
	e.gh.CreateRepo(t, "acme", "infra", nil, "main")
	id := e.install(e.tokenA, "acme", "deploy", "infra")
	if status, page := e.bind(e.tokenA, id); status != http.StatusOK {
		t.Fatalf("bind: %d %s", status, page)
	}
	// Team B: an installation request still waiting for an owner's approval.
	if status, page := e.callback("setup_action=request&state=" + e.state(e.tokenB)); status != http.StatusAccepted {
		t.Fatalf("request: %d %s", status, page)
	}
	for team, token := range map[string]secret.Secret{"a": e.tokenA, "b": e.tokenB} {
		if status, body := e.do("POST", "/api/v1/clusters", token, map[string]any{"name": "prod", "kubeconfig": string(k.Kubeconfig)}); status != http.StatusCreated {
			t.Fatalf("register cluster for team %s: %d %s", team, status, body)
		}
	}
	if status, body := e.do("POST", "/api/v1/clusters/prod/repos", e.tokenA, map[string]string{"repo": "git@github.com:acme/deploy.git"}); status != http.StatusCreated {
		t.Fatalf("connect: %d %s", status, body)
	}

	t.Run("lister", func(t *testing.T) {
		cl, err := db.ClusterByName(context.Background(), e.teamA.ID, "prod")
		if err != nil {
			t.Fatal(err)
		}
		got, err := lister.RepoURLs(context.Background(), cl)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"https://github.com/acme", "https://github.com/acme/deploy", "https://github.com/acme/infra",
			"https://github.com/acme/values", "https://gitlab.example/x/y"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("RepoURLs = %q\nwant %q", got, want)
		}
	})

	cases := map[string]struct {
		token secret.Secret
		want  map[string]string
	}{
		"team with an active installation": {e.tokenA, map[string]string{
			"acme/deploy": "connected", "acme/infra": "installable", "acme/values": "not_installed"}},
		"team whose installation awaits approval": {e.tokenB, map[string]string{
			"acme/deploy": "pending_approval", "acme/infra": "pending_approval", "acme/values": "pending_approval"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, body := e.do("GET", "/api/v1/clusters/prod/repos/suggestions", tc.token, nil)
			if status != http.StatusOK {
				t.Fatalf("suggestions = %d %s", status, body)
			}
			var got struct {
				Suggestions []repoItem `json:"suggestions"`
				Skipped     []struct {
					URL    string `json:"url"`
					Reason string `json:"reason"`
				} `json:"skipped"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if st := statuses(got.Suggestions); !reflect.DeepEqual(st, tc.want) || len(got.Suggestions) != len(tc.want) {
				t.Errorf("suggestions %v, want each repository once: %v\n%s", st, tc.want, body)
			}
			for _, s := range got.Suggestions {
				if !strings.HasPrefix(s.Repo, "https://github.com/acme/") {
					t.Errorf("suggestion %q is not in canonical form", s.Repo)
				}
			}
			skipped := map[string]bool{}
			for _, s := range got.Skipped {
				skipped[s.URL] = s.Reason != ""
			}
			if len(skipped) != 2 || !skipped["https://gitlab.example/x/y"] || !skipped["https://github.com/acme"] {
				t.Errorf("skipped %+v, want the other host and the URL without a repository, with reasons", got.Skipped)
			}
		})
	}
}
