package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
	"github.com/kukie/kukie-gitops/web"
)

const (
	repoName = "acme/deploy"
	// plantedSecret is a Secret value of the form leakscan recognises: were it on a
	// page, leakscan.Matches would find it.
	plantedSecret = "kkQ7w2Zp4Lm9Rx"
	// gitDiffLine is a line of the change's git diff a page must show.
	gitDiffLine = "+    newTag: v1.4.2"
	reader      = "alice"
	outsider    = "mallory"
)

// env is the service's pages on a real server and store, signing in against the fake
// GitHub, where reader can read repoName (private) and outsider cannot.
type env struct {
	gh   *githubtest.Server
	db   *store.DB
	srv  *httptest.Server
	code string
	// check is the id of a pull request's check of repoName, with a Deployment's
	// and a Secret's diff.
	check string
	clock *clock
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOver(t, false)
}

// newEnvOver is newEnv served over https when overTLS.
func newEnvOver(t *testing.T, overTLS bool) *env {
	t.Helper()
	return newEnvOn(t, storetest.SQLite(t), overTLS, nil)
}

// newEnvOn is newEnvOver on db, with the pages' PageLimit.
func newEnvOn(t *testing.T, db *store.DB, overTLS bool, pageLimit *ratelimit.Limiter) *env {
	t.Helper()
	gh := githubtest.New(t)
	gh.CreateRepo(t, "acme", "deploy", map[string]string{"apps/web/kustomization.yaml": "resources: [deploy.yaml]\n"}, "main")
	gh.CreateInstallation(t, "acme", "deploy")
	gh.AddUser(reader)
	gh.AddUser(outsider)
	gh.SetPermission(t, repoName, reader, githubtest.RoleRead)

	e := &env{gh: gh, db: db, clock: &clock{now: time.Now()}}
	e.code = createPlan(t, db)
	e.check = createCheck(t, db)

	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db})
	if err != nil {
		t.Fatal(err)
	}
	// The pages need the address they are served on (their public URL), so they
	// are mounted once the listener is up.
	e.srv = httptest.NewUnstartedServer(srv.Handler())
	if overTLS {
		e.srv.StartTLS()
	} else {
		e.srv.Start()
	}
	t.Cleanup(e.srv.Close)
	gh.AddCallbackURL(e.srv.URL + web.CallbackPath)

	cfg := github.Config{AppID: gh.AppID(), PrivateKey: gh.PrivateKeyPEM(), APIURL: gh.APIURL(), WebURL: gh.URL(),
		ClientID: gh.ClientID(), ClientSecret: gh.ClientSecret()}
	cc, err := github.NewClientCreator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	signIn, err := github.NewUserInstallations(cfg, cc)
	if err != nil {
		t.Fatal(err)
	}
	key, err := web.SessionKey(gh.ClientSecret())
	if err != nil {
		t.Fatal(err)
	}
	pages, err := web.New(web.Deps{Plans: db, Checks: db, SignIn: signIn, PublicURL: e.srv.URL, SessionKey: key, Now: e.clock.Now,
		PageLimit: pageLimit})
	if err != nil {
		t.Fatal(err)
	}
	pages.Mount(srv)
	return e
}

// createPlan stores a verified change of repoName whose cluster diff has a
// Deployment and a Secret, and returns its code.
func createPlan(t *testing.T, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	team, err := db.EnsureTeam(ctx, "payments")
	if err != nil {
		t.Fatal(err)
	}
	pay := plan.Payload{
		Decision: &plan.DecisionInfo{Path: argocd.PathGit, Known: true, Reason: "the Application syncs from Git automatically"},
		GitDiff: "diff --git a/apps/web/kustomization.yaml b/apps/web/kustomization.yaml\n" +
			"--- a/apps/web/kustomization.yaml\n+++ b/apps/web/kustomization.yaml\n@@ -3,2 +3,2 @@\n" +
			"   - name: web\n-    newTag: v1.4.1\n" + gitDiffLine + "\n",
		Warnings: []string{"the image tag is not pinned by digest"},
		ClusterDiff: []render.ObjectDiff{
			{App: "web", APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "web", Action: "modified",
				Changes: []render.FieldChange{{Path: "spec.template.spec.containers[0].image", Before: "web:v1.4.1", After: "web:v1.4.2"}},
				Diff:    "--- web/Deployment/web\n+++ web/Deployment/web\n@@ -1 +1 @@\n-        image: web:v1.4.1\n+        image: web:v1.4.2\n"},
			// A Secret whose value reached the payload unmasked: the page must still
			// not show it.
			{App: "web", APIVersion: "v1", Kind: "Secret", Namespace: "web", Name: "web-db", Action: "modified",
				Changes: []render.FieldChange{{Path: "stringData.password", Before: "old" + plantedSecret, After: plantedSecret}},
				Diff:    "-  password: old" + plantedSecret + "\n+  password: " + plantedSecret + "\n"},
		},
		Verification: &render.Verification{Verified: true, Apps: []render.AppVerification{{App: "web", Objects: 4, Changed: 2}}},
		Deployment:   &plan.Deployment{State: "synced", SyncRevision: "abc123", Health: "Healthy"},
	}
	raw, err := json.Marshal(pay)
	if err != nil {
		t.Fatal(err)
	}
	p := store.Plan{Code: "K7PX2M", TeamID: team.ID, Cluster: "prod", Status: "deployed", Path: "git",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "web"},
		Change: json.RawMessage(`{"type":"image","image":{"name":"web","tag":"v1.4.2"}}`), Reason: "release 1.4.2",
		RequestedBy: "chat:bob", Repo: repoName, BaseBranch: "main", Branch: "kukie/K7PX2M", Payload: raw}
	created, _, err := db.CreatePlan(ctx, p, store.PlanEvent{Actor: "chat:bob", Message: "requested"})
	if err != nil {
		t.Fatal(err)
	}
	return created.Code
}

// checkDiffLine is a line of the check's cluster diff a page must show.
const checkDiffLine = "+        image: api:v2.0.1"

// checkFindingMessage is the message of the check's policy finding at
// apps/api/deployment.yaml:9.
const checkFindingMessage = "the destination cluster refuses it in a server-side dry-run: Deployment.apps \"api\" is invalid: spec.replicas: Invalid value: -1"

// createCheck stores a completed check of pull request 7 of repoName, after an
// older check of the same pull request that a newer push superseded, and returns
// its id.
func createCheck(t *testing.T, db *store.DB) string {
	t.Helper()
	ctx := context.Background()
	head := store.PullCheck{InstallationID: 1, Repo: repoName, RepoURL: "https://github.example/" + repoName, Key: "pull/7",
		BaseBranch: "main", BaseSHA: "1111111111111111111111111111111111111111"}
	head.HeadSHA = "2222222222222222222222222222222222222222"
	older, err := db.BeginPullCheck(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	head.HeadSHA = "3333333333333333333333333333333333333333"
	c, err := db.BeginPullCheck(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.FinishPullCheck(ctx, older.ID, store.PullCheckSuperseded, "cancelled", "A newer commit (3333333) was pushed; it is checked instead.", nil); err != nil {
		t.Fatal(err)
	}
	res := prcheck.Result{Title: "1 Applications affected, 1 change in the cluster", Conclusion: "success", Deploying: 3,
		Files: []prcheck.ResultFile{{Path: "apps/api/deployment.yaml", Status: "modified", Lines: [][2]int{{12, 12}}}},
		Apps: []prcheck.ResultApp{{Name: "argocd/api (cluster prod)", Cluster: "prod", SyncPolicy: "self_heal", Changed: 2,
			Files: []string{"apps/api/deployment.yaml"},
			Diffs: []render.ObjectDiff{
				{App: "argocd/api (cluster prod)", APIVersion: "apps/v1", Kind: "Deployment", Namespace: "api", Name: "api", Action: "modified",
					Diff: "--- api/Deployment/api\n+++ api/Deployment/api\n@@ -1 +1 @@\n-        image: api:v2.0.0\n" + checkDiffLine + "\n"},
				// A Secret whose value reached the result unmasked: the page must still
				// not show it.
				{App: "argocd/api (cluster prod)", APIVersion: "v1", Kind: "Secret", Namespace: "api", Name: "api-token", Action: "modified",
					Changes: []render.FieldChange{{Path: "stringData.token", Before: "old" + plantedSecret, After: plantedSecret}},
					Diff:    "-  token: old" + plantedSecret + "\n+  token: " + plantedSecret + "\n"},
			}},
			{Name: "argocd/jobs (cluster prod)", Cluster: "prod", SyncPolicy: "manual", NotChecked: "a Helm chart from another repository"}},
		Policy: &prcheck.ResultPolicy{Title: "1 errors, 1 warnings, 0 notices", Conclusion: "failure", DefaultBranch: "main", Configured: true,
			Findings: []prcheck.ResultFinding{
				{Rule: "dry_run", Level: "error", App: "argocd/api (cluster prod)", Object: "Deployment api/api", Path: "apps/api/deployment.yaml", Line: 9,
					Message: checkFindingMessage},
				{Rule: "image_digest", Level: "warning", App: "argocd/api (cluster prod)", Object: "Deployment api/api",
					Message: "container api: image api:v2.0.1 is not pinned by digest (name@sha256:…)"}},
			DryRun: "rejected (1 changed objects sent, 1 refused).", NotChecked: []string{"argocd/jobs (cluster prod): a Helm chart from another repository"}},
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.FinishPullCheck(ctx, c.ID, store.PullCheckCompleted, "success", "", raw); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// noRedirects is a client that stops at every redirect, with its own cookie jar.
func noRedirects(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
