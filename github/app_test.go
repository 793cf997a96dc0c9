package github_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/palantir/go-githubapp/githubapp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
)

func appClients(t *testing.T, s *githubtest.Server, reg prometheus.Registerer) githubapp.ClientCreator {
	t.Helper()
	cc, err := github.NewClientCreator(github.Config{
		AppID: s.AppID(), PrivateKey: s.PrivateKeyPEM(), APIURL: s.APIURL(), WebURL: s.URL(),
	}, reg)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func TestNewClientCreatorRefusesIncompleteConfig(t *testing.T) {
	cases := map[string]github.Config{
		"no app id":      {PrivateKey: "pem"},
		"no private key": {AppID: 1},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := github.NewClientCreator(cfg, nil); err == nil {
				t.Error("NewClientCreator accepted an incomplete configuration")
			}
		})
	}
}

func TestLoadAppAndMetrics(t *testing.T) {
	s := githubtest.New(t)
	reg := prometheus.NewRegistry()
	cc := appClients(t, s, reg)
	app, err := github.LoadApp(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	if app.ID != s.AppID() || app.Slug != s.AppSlug() || app.BotLogin() != s.BotLogin() {
		t.Errorf("app = %+v, want id %d slug %s", app, s.AppID(), s.AppSlug())
	}
	if got, want := app.InstallURL(""), s.URL()+"/apps/"+s.AppSlug()+"/installations/new"; got != want {
		t.Errorf("InstallURL = %q, want %q", got, want)
	}
	if got := requestCount(t, reg); got != 1 {
		t.Errorf("kukie_github_requests_total = %v after GET /app, want 1", got)
	}
	// A second creator in the same registry shares the collectors.
	_ = appClients(t, s, reg)
}

func TestInstallationsAgainstGitHub(t *testing.T) {
	ctx := context.Background()
	s := githubtest.New(t)
	s.CreateRepo(t, "acme", "deploy", map[string]string{"a.yaml": "a: 1\n"}, "main")
	s.CreateRepo(t, "acme", "infra", nil, "main")
	s.CreateRepo(t, "acme", "outside", nil, "main")
	id := s.CreateInstallation(t, "acme", "deploy", "Infra")
	svc := github.Installations{Clients: appClients(t, s, nil)}
	host := (github.Config{WebURL: s.URL()})
	webHost, err := host.WebHost()
	if err != nil {
		t.Fatal(err)
	}

	inst, err := svc.Get(ctx, id)
	if err != nil || inst.ID != id || inst.AccountLogin != "acme" || inst.Suspended {
		t.Fatalf("Get = %+v, %v", inst, err)
	}
	if _, err := svc.Get(ctx, 424242); !errors.Is(err, github.ErrInstallationNotFound) {
		t.Errorf("Get of an unknown installation: %v, want ErrInstallationNotFound", err)
	}

	refs, err := svc.Repositories(ctx, id, webHost)
	if err != nil || len(refs) != 2 {
		t.Fatalf("Repositories = %+v, %v", refs, err)
	}
	for _, r := range refs {
		if r.Repo.Host != webHost || r.Repo.Owner != "acme" || r.ID == 0 {
			t.Errorf("repository %+v, want lower-case acme on %s with an id", r, webHost)
		}
	}

	deploy := github.Repo{Host: webHost, Owner: "acme", Name: "deploy"}
	for repo, want := range map[string]bool{"deploy": true, "infra": true, "outside": false, "missing": false} {
		has, err := svc.HasRepository(ctx, id, github.Repo{Host: webHost, Owner: "acme", Name: repo})
		if err != nil || has != want {
			t.Errorf("HasRepository(acme/%s) = %v, %v; want %v", repo, has, err, want)
		}
	}
	if has, err := svc.HasRepository(ctx, id+1, deploy); err != nil || has {
		t.Errorf("HasRepository of another installation = %v, %v; want false", has, err)
	}
	remove := s.InjectFault(githubtest.Fault{Status: http.StatusBadGateway, Times: 1}.On("GET", "/repos/acme/deploy/installation"))
	if _, err := svc.HasRepository(ctx, id, deploy); err == nil {
		t.Error("HasRepository with GitHub answering 502: no error")
	}
	remove()

	tok, err := svc.MintRepoToken(ctx, id, deploy)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Value.String() != "[redacted]" || tok.Repository != "acme/deploy" || time.Until(tok.ExpiresAt) < 50*time.Minute {
		t.Errorf("token = %+v", tok)
	}
	if tok.Permissions["contents"] != "write" || tok.Permissions["pull_requests"] != "write" || tok.Permissions["checks"] != "" {
		t.Errorf("permissions = %v, want contents and pull_requests write only", tok.Permissions)
	}
	client, err := gh.NewClient(nil).WithAuthToken(tok.Value.Reveal()).WithEnterpriseURLs(s.URL(), s.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.Repositories.Get(ctx, "acme", "deploy"); err != nil {
		t.Errorf("token cannot read its repository: %v", err)
	}
	if _, res, err := client.Repositories.Get(ctx, "acme", "infra"); err == nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("token reads another repository: %v", err)
	}
	if _, err := svc.MintRepoToken(ctx, id, github.Repo{Host: webHost, Owner: "acme", Name: "outside"}); err == nil {
		t.Error("minted a token for a repository outside the installation")
	}

	s.SuspendInstallation(t, id)
	if inst, err := svc.Get(ctx, id); err != nil || !inst.Suspended {
		t.Errorf("Get of a suspended installation = %+v, %v", inst, err)
	}
	if _, err := svc.MintRepoToken(ctx, id, deploy); err == nil {
		t.Error("minted a token on a suspended installation")
	}
}

func requestCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, f := range families {
		if f.GetName() != "kukie_github_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}
