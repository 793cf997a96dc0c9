package plan_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/internal/leakscan"
	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

// secretsRepo holds a planted secret in every shape render masks (see leakscan).
const secretsRepo = "../testdata/secrets-repo"

// TestNoSecretLeavesThePipeline runs changes through the whole pipeline (change
// API, real render, fake GitHub, database) over a repository with a planted secret
// in every shape, the diffs of both changes showing secret lines as context, and
// requires that no planted value appears in anything the service sends or keeps:
// the PR, the check run, every GitHub request body, every stored row, every log
// line and the change API's answers.
func TestNoSecretLeavesThePipeline(t *testing.T) {
	t.Parallel()
	// One per shape: generator literals (Secret and ConfigMap), env files and
	// files, Secret stringData and data, a ConfigMap key, env entries in manifests
	// and in an inline patch.
	files, scan := leakscan.Planted(t, secretsRepo, 12)
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		// As the service runs with an encryption key: plans keep the edited files
		// sealed (see plan.EditSealer).
		db.SealPlanPayloads(plan.EditSealer{Box: testBox(t)})
		gh := githubtest.New(t)
		gh.CreateRepo(t, "acme", "deploy", files, "main")
		inst := gh.CreateInstallation(t, "acme", "deploy")
		gh.RecordRequests()
		cc, err := github.NewClientCreator(github.Config{AppID: gh.AppID(), PrivateKey: gh.PrivateKeyPEM(), APIURL: gh.APIURL(), WebURL: gh.URL()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		cacheDir := t.TempDir()
		archives, err := cache.NewArchives(cacheDir, 64<<20, cache.DefaultArchiveLimits)
		if err != nil {
			t.Fatal(err)
		}
		renders, err := cache.NewRenders(cacheDir, 16<<20)
		if err != nil {
			t.Fatal(err)
		}
		cluster := newFakeCluster()
		cluster.app.Status.SourceType = "Kustomize"
		logs := &servicetest.SyncBuffer{}
		logger := zerolog.New(logs).Level(zerolog.DebugLevel)
		ctx := logger.WithContext(context.Background())

		p := plan.New(plan.Deps{Store: db, Clusters: cluster, Renderer: cache.RenderEngine{Renders: renders},
			Repos: github.Repos{Clients: cc, Archives: archives}, Connections: &connections{inst: inst, connected: true}},
			plan.Config{ClaimTTL: testClaimTTL, DeployPoll: 20 * time.Millisecond,
				DeployTimeout: 10 * time.Second, PublicURL: "https://kukie.example", BotLogin: gh.BotLogin()})
		t.Cleanup(p.Close)
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		team, err := db.CreateTeam(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateCluster(ctx, store.Cluster{TeamID: team.ID, Name: "prod", Access: store.ClusterInCluster}); err != nil {
			t.Fatal(err)
		}
		_, token, err := db.CreateAPIToken(ctx, team.ID, "chat")
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(server.Config{}, server.Deps{Logger: logger, Auth: db})
		if err != nil {
			t.Fatal(err)
		}
		(&changes.API{Store: db, Pipeline: p}).Mount(srv)
		api := httptest.NewServer(srv.Handler())
		t.Cleanup(api.Close)

		target := objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}
		submit := func(key string, change render.Change) string {
			t.Helper()
			status, body := servicetest.Do(t, api, "POST", "/api/v1/changes", token, plan.Request{Cluster: "prod", Target: target,
				Change: change, Reason: "release", RequestedBy: "alice", IdempotencyKey: key})
			if status != http.StatusAccepted && status != http.StatusCreated {
				t.Fatalf("POST /api/v1/changes (%s) = %d %s", key, status, body)
			}
			var view struct{ Code string }
			if err := json.Unmarshal(body, &view); err != nil || view.Code == "" {
				t.Fatalf("change answer %s (%v)", body, err)
			}
			return view.Code
		}
		e := &env{t: t, db: db}

		// An admission policy that quotes the env value it refuses: the refusal
		// reaches the API, the database and the logs, masked.
		cluster.mu.Lock()
		cluster.dryRunErr = &clusteraccess.DryRunRejection{Object: "Deployment shop/web",
			Message: `admission webhook "policy" denied the request: STRIPE_API_KEY=kkpFvjVD4D3rux must come from a Secret`}
		cluster.mu.Unlock()
		rejected := e.waitFor(submit("rejected", render.Change{Replicas: &render.Replicas{Count: 5}}), "refused", func(pl store.Plan) bool {
			return pl.ErrorCode == plan.CodeClusterRejected
		})
		if !strings.Contains(rejected.StatusReason, "STRIPE_API_KEY=[redacted] must come from a Secret") {
			t.Errorf("rejection reason %q, want the policy's words with the value masked", rejected.StatusReason)
		}
		cluster.mu.Lock()
		cluster.dryRunErr = nil
		cluster.mu.Unlock()
		changes := map[string]render.Change{
			// The images entry sits between the secretGenerator's literal and the
			// configMapGenerator's literals.
			"kustomization.yaml": {Image: &render.Image{Container: "web", Tag: "2.5.0"}},
			// The proxy's env holds PROXY_AUTH_TOKEN next to the edited entry, and
			// the Deployment's cluster diff carries every container's env.
			"deployment.yaml": {Env: &render.Env{Container: "proxy", Set: map[string]string{"UPSTREAM": "http://127.0.0.1:9090"}}},
		}
		codes := []string{rejected.Code}
		for file, change := range changes {
			codes = append(codes, submit(file, change))
		}
		for _, code := range codes[1:] {
			pl := e.waitStatus(code, plan.StatusPROpen)
			// The commit carries the file as it is, secrets and all: that is the
			// edit, and the repository holds those bytes already.
			for _, path := range []string{"apps/web/kustomization.yaml", "apps/web/deployment.yaml"} {
				got, _ := gh.FileAt(t, "acme/deploy", pl.Branch, path)
				if !leakscan.Matches(got) {
					t.Errorf("%s on %s lost its secrets: the commit must not be masked:\n%s", path, pl.Branch, got)
				}
			}
			for _, run := range gh.CheckRuns(t, "acme/deploy", pl.HeadSHA) {
				out, _ := json.Marshal(run)
				scan.Check(t, "check run of "+code, string(out))
			}
		}
		for _, path := range append([]string{"/api/v1/changes"}, prefixed("/api/v1/changes/", codes)...) {
			status, body := servicetest.Do(t, api, "GET", path, token, nil)
			if status != http.StatusOK {
				t.Fatalf("GET %s = %d %s", path, status, body)
			}
			scan.CheckJSON(t, "GET "+path, body)
		}
		pulls := gh.PullRequests(t, "acme/deploy")
		if len(pulls) != len(changes) {
			t.Fatalf("%d pull requests, want %d", len(pulls), len(changes))
		}
		var bodies string
		for _, pr := range pulls {
			scan.Check(t, "pull request title", pr.GetTitle())
			scan.Check(t, "pull request body", pr.GetBody())
			bodies += pr.GetBody()
		}
		// The scan must see the secrets' lines, or it proves nothing.
		for _, shown := range []string{"      - password=[redacted]", "  - literals: [redacted]", "              value: [redacted]"} {
			if !strings.Contains(bodies, shown) {
				t.Errorf("the pull requests lack the masked line %q; the diffs do not show the secrets' context:\n%s", shown, bodies)
			}
		}

		for _, r := range gh.Requests() {
			// A blob is the edited file's content going to Git: the repository
			// holds those bytes already, and they must stay unmasked. Trees and
			// commits only name blobs by SHA, so they are scanned like the rest.
			if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/git/blobs") {
				continue
			}
			scan.CheckJSON(t, fmt.Sprintf("GitHub request %s %s", r.Method, r.Path), r.Body)
		}
		for table, rows := range dumpTables(t, db) {
			for _, row := range rows {
				scan.CheckJSON(t, "stored row of "+table, []byte(row))
			}
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			scan.Check(t, "log line", line)
		}
	})
}

func prefixed(prefix string, list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = prefix + s
	}
	return out
}

// dumpTables returns every row of every table as text, a JSON object per row.
func dumpTables(t *testing.T, db *store.DB) map[string][]string {
	t.Helper()
	ctx := context.Background()
	query := `SELECT name FROM sqlite_master WHERE type = 'table'`
	if db.Dialect() == store.Postgres {
		query = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`
	}
	var tables []string
	if err := db.SelectContext(ctx, &tables, query); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, table := range tables {
		rows, err := db.QueryxContext(ctx, `SELECT * FROM `+table)
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		for rows.Next() {
			row := map[string]any{}
			if err := rows.MapScan(row); err != nil {
				t.Fatal(err)
			}
			for k, v := range row {
				if b, ok := v.([]byte); ok {
					row[k] = string(b)
				}
			}
			text, err := json.Marshal(row)
			if err != nil {
				t.Fatal(err)
			}
			out[table] = append(out[table], string(text))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	if len(out["plans"]) == 0 {
		t.Fatalf("no plans stored; tables read: %v", tables)
	}
	return out
}
