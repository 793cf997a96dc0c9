package changes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/setup"
	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/notify"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/sealed"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// stubPipeline records plans in the store the way the pipeline would, without
// GitHub or a cluster: the API's answers are what is under test here.
type stubPipeline struct{ db *store.DB }

func (s stubPipeline) Submit(ctx context.Context, teamID, actor string, req plan.Request) (store.Plan, bool, error) {
	if err := req.Validate(); err != nil {
		return store.Plan{}, false, err
	}
	change, _ := json.Marshal(req.Change)
	p := store.Plan{Code: "web1", TeamID: teamID, IdempotencyKey: req.IdempotencyKey,
		Cluster: req.Cluster, Target: req.Target, Change: change, Reason: req.Reason, RequestedBy: req.RequestedBy,
		Status: string(plan.StatusPreparing), Path: "git"}
	if req.Change.Patch != nil {
		p.Code = "patch1"
	}
	if req.Change.DeleteResource != nil {
		p.Code = "delete1"
	}
	if req.Target.Name == "adhoc" {
		p.Code, p.Status, p.Path = "refused1", string(plan.StatusRefused), "direct"
		p.ErrorCode, p.StatusReason = plan.CodeNotGitOpsManaged, "No Argo CD Application tracks Deployment shop/adhoc."
		p.Payload, _ = json.Marshal(plan.Payload{Problem: &plan.Error{Code: p.ErrorCode, Reason: p.StatusReason,
			Details: map[string]any{"decision": plan.DecisionInfo{Path: argocd.PathDirect, Known: true}}}})
	}
	return s.db.CreatePlan(ctx, p, store.PlanEvent{Actor: actor})
}

func (s stubPipeline) Cancel(ctx context.Context, teamID, code, reason string) (store.Plan, error) {
	p, err := s.db.TeamPlan(ctx, teamID, code)
	if err != nil {
		return p, err
	}
	if plan.Status(p.Status) == plan.StatusClosed {
		return p, &plan.Error{Code: plan.CodeConflict, Reason: "plan " + code + " is closed and can no longer be cancelled"}
	}
	p.Status = string(plan.StatusClosed)
	pay, err := plan.PayloadOf(p)
	if err != nil {
		return p, err
	}
	pay.CancelReason = reason
	p.Payload, _ = json.Marshal(pay)
	return s.db.UpdatePlan(ctx, p, store.PlanEvent{Step: "cancel", Message: "cancelled: " + reason})
}

func (s stubPipeline) Retry(ctx context.Context, teamID, code string) (store.Plan, error) {
	if _, err := s.db.TeamPlan(ctx, teamID, code); err != nil {
		return store.Plan{}, err
	}
	return store.Plan{}, &plan.Error{Code: plan.CodeConflict, Reason: "only failed plans can be retried"}
}

func (s stubPipeline) Rollback(ctx context.Context, teamID, code, requestedBy, reason string) (store.Plan, error) {
	p, err := s.db.TeamPlan(ctx, teamID, code)
	if err != nil {
		return p, err
	}
	rb := p
	rb.Code, rb.IdempotencyKey, rb.RollbackOf, rb.Status = "rollback1", "", code, string(plan.StatusPreparing)
	out, _, err := s.db.CreatePlan(ctx, rb, store.PlanEvent{})
	return out, err
}

func (s stubPipeline) Decide(_ context.Context, _ clusteraccess.Ref, t objref.Target) argocd.Decision {
	return argocd.Decision{Path: argocd.PathDirect, Known: true, Level: argocd.LevelNone, Reason: "No Application tracks " + t.Name + "."}
}

func (s stubPipeline) RepoView(_ context.Context, _ clusteraccess.Ref, repo, revision string) (plan.RepoView, error) {
	if repo != "https://github.com/acme/deploy" {
		return plan.RepoView{}, &plan.Error{Code: plan.CodeRepoNotConnected, Reason: "repository " + repo + " is not connected to cluster prod"}
	}
	return plan.RepoView{Repo: "acme/deploy", Revision: revision, SHA: strings.Repeat("a", 40),
		Folders: []plan.RepoFolder{{Path: "apps/web", Apps: []string{"argocd/web"}}},
		Apps:    []plan.RepoApp{{Name: "argocd/web", Path: "apps/web", SourceType: "Kustomize", Level: argocd.LevelSelfHeal, Ownership: "managed by Argo CD app argocd/web with self-heal", Objects: 1, YAML: "kind: Deployment\n"}}}, nil
}

type stubApps struct{}

func (stubApps) AppList(context.Context, clusteraccess.Ref) (argocd.AppList, error) {
	return argocd.SummarizeApps([]argocd.Application{webApp()}), nil
}

func (stubApps) AppDetail(_ context.Context, _ clusteraccess.Ref, ns, name string) (argocd.AppDetail, error) {
	if ns != "argocd" || name != "web" {
		return argocd.AppDetail{}, clusteraccess.ErrObjectNotFound
	}
	return argocd.DescribeApp(webApp()), nil
}

func webApp() argocd.Application {
	return argocd.Application{Name: "web", Namespace: "argocd", Spec: argocd.AppSpec{
		Source: &argocd.AppSource{RepoURL: "https://github.com/acme/deploy", Path: "apps/web", TargetRevision: "main"}},
		Status: argocd.AppStatus{Sync: argocd.AppSyncStatus{Status: "Synced"}, Health: argocd.AppHealth{Status: "Healthy"}}}
}

type openAPIDoc struct {
	Paths      map[string]map[string]operation `json:"paths"`
	Components struct {
		Schemas map[string]schema `json:"schemas"`
	} `json:"components"`
}

type operation struct {
	Scope     string `json:"x-required-scope"`
	Responses map[string]struct {
		Content map[string]struct {
			Schema  schema          `json:"schema"`
			Example json.RawMessage `json:"example"`
		} `json:"content"`
	} `json:"responses"`
}

type schema struct {
	Ref        string                     `json:"$ref"`
	Type       string                     `json:"type"`
	Required   []string                   `json:"required"`
	Properties map[string]json.RawMessage `json:"properties"`
}

func loadDoc(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return doc
}

func (d openAPIDoc) resolve(s schema) schema {
	if s.Ref != "" {
		return d.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	return s
}

// conforms checks a JSON object against a documented object schema: every required
// key present, no key the document does not name.
func (d openAPIDoc) conforms(s schema, body []byte) error {
	s = d.resolve(s)
	if s.Type != "object" || s.Properties == nil {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	var problems []string
	for _, k := range s.Required {
		if _, ok := obj[k]; !ok {
			problems = append(problems, "missing required "+k)
		}
	}
	for k := range obj {
		if _, ok := s.Properties[k]; !ok {
			problems = append(problems, "undocumented "+k)
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, ", "))
	}
	return nil
}

// routesOf joins the route tables of the other packages whose routes the document
// describes.
func routesOf(tables ...map[string]store.Scope) map[string]store.Scope {
	out := map[string]store.Scope{}
	for _, t := range tables {
		maps.Copy(out, t)
	}
	return out
}

func TestOpenAPIDocumentMatchesRoutes(t *testing.T) {
	doc := loadDoc(t)
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	mounted := map[string]bool{"GET /api/v1/openapi.json": true}
	for pattern, route := range (&API{}).changeRoutes() {
		mounted[pattern] = true
		method, path, _ := strings.Cut(pattern, " ")
		op, ok := doc.Paths[path][strings.ToLower(method)]
		if ok && op.Scope != string(route.scope) {
			t.Errorf("%s needs the %s scope, openapi.json says %q", pattern, route.scope, op.Scope)
		}
		if _, documented := op.Responses["403"]; ok && !documented {
			t.Errorf("openapi.json does not document the 403 insufficient_scope of %s", pattern)
		}
	}
	for pattern, scope := range routesOf(notify.Routes, setup.Routes) {
		mounted[pattern] = true
		method, path, _ := strings.Cut(pattern, " ")
		if op, ok := doc.Paths[path][strings.ToLower(method)]; ok && op.Scope != string(scope) {
			t.Errorf("%s needs the %s scope, openapi.json says %q", pattern, scope, op.Scope)
		}
	}
	for route := range mounted {
		if !documented[route] {
			t.Errorf("route %s is not in openapi.json", route)
		}
	}
	for route := range documented {
		if !mounted[route] {
			t.Errorf("openapi.json documents %s, which is not mounted", route)
		}
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for status, resp := range op.Responses {
				for _, c := range resp.Content {
					if len(c.Example) == 0 {
						continue
					}
					if err := doc.conforms(c.Schema, c.Example); err != nil {
						t.Errorf("%s %s %s example: %v", method, path, status, err)
					}
				}
			}
		}
	}
}

func TestChangesAPIAnswersAsDocumented(t *testing.T) {
	doc := loadDoc(t)
	db := storetest.SQLite(t)
	srv, token := changesServer(t, db, stubPipeline{db})
	call := func(method, path, body string) (int, []byte) { return callAs(srv, token, method, path, body) }
	scale := `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice","idempotency_key":"k1"}`
	adhoc := strings.Replace(scale, `"name":"web"`, `"name":"adhoc"`, 1)
	adhoc = strings.Replace(adhoc, `"k1"`, `"k2"`, 1)
	patch := strings.Replace(scale, `{"replicas":{"count":4}}`, `{"patch":{"set":[{"path":"/spec/minReadySeconds","value":10}]}}`, 1)
	patch = strings.Replace(patch, `"k1"`, `"k3"`, 1)
	renaming := strings.Replace(patch, `"/spec/minReadySeconds"`, `"/metadata/name"`, 1)
	deletion := strings.Replace(scale, `{"replicas":{"count":4}}`, `{"delete_resource":{}}`, 1)
	deletion = strings.Replace(deletion, `"k1"`, `"k4"`, 1)
	deleteAndScale := strings.Replace(scale, `{"replicas":{"count":4}}`, `{"replicas":{"count":4},"delete_resource":{}}`, 1)

	tests := []struct {
		name, method, path, body, docPath string
		want                              int
		check                             func(t *testing.T, body []byte)
	}{
		{name: "create", method: "POST", path: "/api/v1/changes", body: scale, docPath: "/api/v1/changes", want: 202},
		{name: "create again with the same key", method: "POST", path: "/api/v1/changes", body: scale, docPath: "/api/v1/changes", want: 200},
		{name: "create a patch", method: "POST", path: "/api/v1/changes", body: patch, docPath: "/api/v1/changes", want: 202,
			check: func(t *testing.T, b []byte) {
				if !bytes.Contains(b, []byte(`"patch":{"set":[{"path":"/spec/minReadySeconds","value":10}]}`)) {
					t.Errorf("the change is not kept as given: %s", b)
				}
			}},
		{name: "create a patch of the name", method: "POST", path: "/api/v1/changes", body: renaming, docPath: "/api/v1/changes", want: 400,
			check: func(t *testing.T, b []byte) {
				wantCode(t, b, plan.CodeInvalidRequest)
				if !bytes.Contains(b, []byte("/metadata/name")) {
					t.Errorf("the refusal does not name the field: %s", b)
				}
			}},
		{name: "create a deletion", method: "POST", path: "/api/v1/changes", body: deletion, docPath: "/api/v1/changes", want: 202,
			check: func(t *testing.T, b []byte) {
				if !bytes.Contains(b, []byte(`"delete_resource":{}`)) || !bytes.Contains(b, []byte(`"delete1"`)) {
					t.Errorf("the deletion is not kept as given: %s", b)
				}
			}},
		{name: "create a deletion and a scale at once", method: "POST", path: "/api/v1/changes", body: deleteAndScale, docPath: "/api/v1/changes", want: 400,
			check: func(t *testing.T, b []byte) {
				wantCode(t, b, plan.CodeInvalidRequest)
				if !bytes.Contains(b, []byte("delete_resource (got 2)")) {
					t.Errorf("the refusal does not name the change types: %s", b)
				}
			}},
		{name: "create invalid", method: "POST", path: "/api/v1/changes", body: `{"cluster":"prod"}`, docPath: "/api/v1/changes", want: 400,
			check: func(t *testing.T, b []byte) { wantCode(t, b, plan.CodeInvalidRequest) }},
		{name: "create unmanaged", method: "POST", path: "/api/v1/changes", body: adhoc, docPath: "/api/v1/changes", want: 422,
			check: func(t *testing.T, b []byte) {
				wantCode(t, b, plan.CodeNotGitOpsManaged)
				if !bytes.Contains(b, []byte(`"decision"`)) {
					t.Errorf("not_gitops_managed without the decision: %s", b)
				}
			}},
		{name: "list", method: "GET", path: "/api/v1/changes?cluster=prod&status=preparing,refused", docPath: "/api/v1/changes", want: 200},
		// The refusal says what status takes (failed before: "unknown status bogus").
		{name: "list bad status", method: "GET", path: "/api/v1/changes?status=bogus", docPath: "/api/v1/changes", want: 400,
			check: func(t *testing.T, b []byte) {
				if !bytes.Contains(b, []byte(`unknown status \"bogus\"; status takes one or more, comma-separated, of deciding, `)) || !bytes.Contains(b, []byte("rolled_back")) {
					t.Errorf("the refusal does not list the statuses: %s", b)
				}
			}},
		{name: "get", method: "GET", path: "/api/v1/changes/web1", docPath: "/api/v1/changes/{code}", want: 200,
			check: func(t *testing.T, b []byte) {
				if !bytes.Contains(b, []byte(`"history"`)) {
					t.Errorf("no history: %s", b)
				}
			}},
		{name: "get missing", method: "GET", path: "/api/v1/changes/nope", docPath: "/api/v1/changes/{code}", want: 404},
		{name: "retry not failed", method: "POST", path: "/api/v1/changes/web1/retry", docPath: "/api/v1/changes/{code}/retry", want: 409},
		{name: "rollback", method: "POST", path: "/api/v1/changes/web1/rollback", body: `{"reason":"errors"}`, docPath: "/api/v1/changes/{code}/rollback", want: 202},
		{name: "cancel", method: "POST", path: "/api/v1/changes/web1/cancel", docPath: "/api/v1/changes/{code}/cancel", want: 200},
		{name: "decide", method: "POST", path: "/api/v1/decide", body: `{"cluster":"prod","target":{"apiVersion":"v1","kind":"ConfigMap","name":"x"}}`, docPath: "/api/v1/decide", want: 200},
		{name: "apps", method: "GET", path: "/api/v1/clusters/prod/argocd/apps", docPath: "/api/v1/clusters/{cluster}/argocd/apps", want: 200},
		{name: "app", method: "GET", path: "/api/v1/clusters/prod/argocd/apps/argocd/web", docPath: "/api/v1/clusters/{cluster}/argocd/apps/{namespace}/{name}", want: 200},
		{name: "repository view", method: "GET", path: "/api/v1/clusters/prod/repository?repo=https://github.com/acme/deploy&revision=main", docPath: "/api/v1/clusters/{cluster}/repository", want: 200},
		{name: "repository view of an unconnected repository", method: "GET", path: "/api/v1/clusters/prod/repository?repo=https://github.com/acme/other", docPath: "/api/v1/clusters/{cluster}/repository", want: 422},
		{name: "repository view without a repository", method: "GET", path: "/api/v1/clusters/prod/repository", docPath: "/api/v1/clusters/{cluster}/repository", want: 400},
		{name: "app missing", method: "GET", path: "/api/v1/clusters/prod/argocd/apps/gone/web", docPath: "/api/v1/clusters/{cluster}/argocd/apps/{namespace}/{name}", want: 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(tc.method, tc.path, tc.body)
			if status != tc.want {
				t.Fatalf("%s %s = %d, want %d: %s", tc.method, tc.path, status, tc.want, body)
			}
			resp, ok := doc.Paths[tc.docPath][strings.ToLower(tc.method)].Responses[fmt.Sprint(status)]
			if !ok {
				t.Fatalf("status %d of %s %s is not documented", status, tc.method, tc.docPath)
			}
			if err := doc.conforms(resp.Content["application/json"].Schema, body); err != nil {
				t.Errorf("answer does not match the document: %v\n%s", err, body)
			}
			if tc.check != nil {
				tc.check(t, body)
			}
		})
	}

	// Without a token nothing is answered; the document itself is public.
	req := httptest.NewRequest("GET", "/api/v1/changes", nil)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/openapi.json", nil))
	if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), openAPIDocument) {
		t.Fatalf("openapi.json: %d", rec.Code)
	}
}

// changesServer serves the changes API with pipeline on a server authenticating
// against db, where team shop holds the returned token and has cluster prod.
func changesServer(t *testing.T, db *store.DB, pipeline Pipeline) (*server.Server, secret.Secret) {
	t.Helper()
	return limitedChangesServer(t, db, pipeline, API{})
}

// limitedChangesServer is changesServer with the limits of limits (ChangeLimit,
// RepositoryLimit, ClusterReadLimit).
func limitedChangesServer(t *testing.T, db *store.DB, pipeline Pipeline, limits API) (*server.Server, secret.Secret) {
	t.Helper()
	token := teamWithCluster(t, db, "shop")
	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db})
	if err != nil {
		t.Fatal(err)
	}
	(&API{Store: db, Pipeline: pipeline, Apps: stubApps{}, ChangeLimit: limits.ChangeLimit,
		RepositoryLimit: limits.RepositoryLimit, ClusterReadLimit: limits.ClusterReadLimit}).Mount(srv)
	return srv, token
}

// teamWithCluster creates team name with a cluster prod, and returns a token of the
// team's.
func teamWithCluster(t *testing.T, db *store.DB, name string) secret.Secret {
	t.Helper()
	ctx := context.Background()
	team, err := db.CreateTeam(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := db.CreateAPIToken(ctx, team.ID, "chat")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateCluster(ctx, store.Cluster{TeamID: team.ID, Name: "prod", Access: store.ClusterInCluster}); err != nil {
		t.Fatal(err)
	}
	return token
}

// anotherToken is a new token of team.
func anotherToken(t *testing.T, db *store.DB, team string) secret.Secret {
	t.Helper()
	tm, err := db.TeamByName(context.Background(), team)
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := db.CreateAPIToken(context.Background(), tm.ID, "another chat")
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// callAs sends a JSON request to srv with token and returns the answer's status
// and body.
func callAs(srv *server.Server, token secret.Secret, method, path, body string) (int, []byte) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token.Reveal())
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

func wantCode(t *testing.T, body []byte, code string) {
	t.Helper()
	var e struct{ Error, Reason string }
	if err := json.Unmarshal(body, &e); err != nil || e.Error != code || e.Reason == "" {
		t.Errorf("error body %s, want code %s with a reason", body, code)
	}
}

// Reading needs the read scope and acting on changes the change scope, as the issue
// of token scopes defines them; the list is written out here rather than taken from
// the route table, so a route mounted with the wrong scope fails.
func TestChangeRoutesNeedTheirScope(t *testing.T) {
	db := storetest.SQLite(t)
	srv, _ := changesServer(t, db, stubPipeline{db})
	team, err := db.TeamByName(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[store.Scope]secret.Secret{}
	for _, sc := range store.AllScopes {
		if _, tokens[sc], err = db.CreateAPIToken(context.Background(), team.ID, string(sc), sc); err != nil {
			t.Fatal(err)
		}
	}
	routes := map[string]store.Scope{
		"POST /api/v1/changes":                             store.ScopeChange,
		"POST /api/v1/changes/web1/cancel":                 store.ScopeChange,
		"POST /api/v1/changes/web1/rollback":               store.ScopeChange,
		"POST /api/v1/changes/web1/retry":                  store.ScopeChange,
		"GET /api/v1/changes":                              store.ScopeRead,
		"GET /api/v1/changes/web1":                         store.ScopeRead,
		"POST /api/v1/decide":                              store.ScopeRead,
		"GET /api/v1/clusters/prod/argocd/apps":            store.ScopeRead,
		"GET /api/v1/clusters/prod/argocd/apps/argocd/web": store.ScopeRead,
	}
	for route, need := range routes {
		method, path, _ := strings.Cut(route, " ")
		for _, have := range store.AllScopes {
			status, body := callAs(srv, tokens[have], method, path, "{}")
			refused := status == http.StatusForbidden && bytes.Contains(body, []byte(`"insufficient_scope"`))
			if refused != (have != need) {
				t.Errorf("%s with a %s token = %d %s; the route needs %s", route, have, status, body, need)
			}
			if refused && !bytes.Contains(body, []byte("the "+string(need)+" scope")) {
				t.Errorf("%s refusal does not name the %s scope: %s", route, need, body)
			}
		}
	}
}

// The notification routes answer as the document says.
func TestNotificationRoutesAnswerAsDocumented(t *testing.T) {
	doc := loadDoc(t)
	db := storetest.SQLite(t)
	srv, token := changesServer(t, db, stubPipeline{db})
	box, err := sealed.New(bytes.Repeat([]byte{3}, sealed.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	(&notify.API{Store: db, Credentials: box}).Mount(srv)
	call := func(method, path, body string) (int, []byte) { return callAs(srv, token, method, path, body) }
	check := func(method, docPath string, status int, body []byte) {
		t.Helper()
		resp, ok := doc.Paths[docPath][strings.ToLower(method)].Responses[fmt.Sprint(status)]
		if !ok {
			t.Fatalf("status %d of %s %s is not documented: %s", status, method, docPath, body)
		}
		if c, ok := resp.Content["application/json"]; ok {
			if err := doc.conforms(c.Schema, body); err != nil {
				t.Errorf("%s %s %d does not match the document: %v\n%s", method, docPath, status, err, body)
			}
		}
	}
	const list = "/api/v1/notifications/endpoints"
	status, body := call("POST", list, `{"url":"https://chat.example.com/kukie","description":"chat"}`)
	check("POST", list, status, body)
	var created struct{ ID string }
	if status != 201 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("create = %d %s", status, body)
	}
	status, body = call("POST", list, `{"url":"http://chat.example.com"}`)
	check("POST", list, status, body)
	status, body = call("GET", list, "")
	check("GET", list, status, body)
	status, body = call("GET", list+"/"+created.ID+"/deliveries", "")
	check("GET", list+"/{id}/deliveries", status, body)
	status, body = call("POST", list+"/"+created.ID+"/resume", "")
	check("POST", list+"/{id}/resume", status, body)
	status, body = call("DELETE", list+"/"+created.ID, "")
	check("DELETE", list+"/{id}", status, body)
	status, body = call("DELETE", list+"/"+created.ID, "")
	check("DELETE", list+"/{id}", status, body)
}

// TestTeamChangesAreRateLimited: a team's changes created, retried and rolled back
// share one limit whichever of its tokens asks; past it each is answered 429
// rate_limited with Retry-After and does nothing, and another team is not held back.
func TestTeamChangesAreRateLimited(t *testing.T) {
	ctx := context.Background()
	db := storetest.SQLite(t)
	// One a minute after a burst of 2: no refill within the test.
	limit, err := ratelimit.New("changes for this team", 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	srv, first := limitedChangesServer(t, db, stubPipeline{db}, API{ChangeLimit: limit})
	second := anotherToken(t, db, "shop")
	shop, err := db.TeamByName(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	scale := `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice"}`
	if status, body := callAs(srv, first, http.MethodPost, "/api/v1/changes", scale); status != http.StatusAccepted {
		t.Fatalf("first change: %d %s", status, body)
	}
	if status, body := callAs(srv, second, http.MethodPost, "/api/v1/changes/web1/retry", ""); status == http.StatusTooManyRequests {
		t.Fatalf("second change, within the burst: %d %s", status, body)
	}
	for _, path := range []string{"/api/v1/changes", "/api/v1/changes/web1/retry", "/api/v1/changes/web1/rollback"} {
		for _, token := range []secret.Secret{first, second} {
			body := ""
			if path == "/api/v1/changes" {
				body = scale
			}
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token.Reveal())
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusTooManyRequests {
				t.Fatalf("POST %s past the team's limit: %d %s", path, rec.Code, rec.Body)
			}
			wantCode(t, rec.Body.Bytes(), server.CodeRateLimited)
			if got := rec.Header().Get("Retry-After"); got != "60" {
				t.Errorf("POST %s: Retry-After %q, want 60 (one a minute)", path, got)
			}
		}
	}
	if plans, err := db.ListPlans(ctx, store.PlanFilter{TeamID: shop.ID}); err != nil || len(plans) != 1 {
		t.Fatalf("plans of the team: %d, %v; want the first one only", len(plans), err)
	}

	billing, err := db.CreateTeam(ctx, "billing")
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := db.CreateAPIToken(ctx, billing.ID, "chat")
	if err != nil {
		t.Fatal(err)
	}
	if status, body := callAs(srv, other, http.MethodPost, "/api/v1/changes", scale); status == http.StatusTooManyRequests {
		t.Fatalf("another team's change: %d %s", status, body)
	}
}

// TestViewShowsRenames: a plan whose edit renames a generated ConfigMap shows
// from what to what, beside the cluster diff that has it removed and added.
func TestViewShowsRenames(t *testing.T) {
	r := render.Rename{App: "web", APIVersion: "v1", Kind: "ConfigMap", Namespace: "web", From: "web-settings-k89gbb87k7", To: "web-settings-c4kffct259", Generator: `configMapGenerator "web-settings" of apps/web/kustomization.yaml`}
	pay, err := json.Marshal(plan.Payload{Renamed: r.To, Renames: []render.Rename{r}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(View(store.Plan{Code: "cm1", Payload: pay}))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Renames []map[string]string `json:"renames"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"app": "web", "apiVersion": "v1", "kind": "ConfigMap", "namespace": "web", "from": r.From, "to": r.To, "generator": r.Generator}
	if len(got.Renames) != 1 || !maps.Equal(got.Renames[0], want) {
		t.Fatalf("view renames %v, want [%v]", got.Renames, want)
	}
}

// TestViewShowsTheTargetInTheKindTheClusterServes: a target whose kind was given
// in another case than the cluster serves it (kind: deployment) is shown as the
// decision read it, Deployment, as the pull request names it; it was shown as
// typed by the change API, get_change and the change's page.
func TestViewShowsTheTargetInTheKindTheClusterServes(t *testing.T) {
	pay, err := json.Marshal(plan.Payload{ArgoCD: &argocd.Payload{Resources: []argocd.PayloadResource{
		{Group: "apps", Kind: "Deployment", Namespace: "shop", Name: "web", Application: "argocd/web"}}}})
	if err != nil {
		t.Fatal(err)
	}
	target := objref.Target{APIVersion: "apps/v1", Kind: "deployment", Namespace: "shop", Name: "web"}
	if got := View(store.Plan{Code: "k1", Target: target, Payload: pay}).Target; got != (objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"}) {
		t.Errorf("view target %+v, want apps/v1 Deployment shop/web", got)
	}
}

// TestViewOfARevertSaysWhatItReverts: the view of a revert showed the change of
// the plan it reverts as its own, as if that change were asked for again; it now
// shows the plan it reverts, that plan's merge commit, and the change it undoes.
// The merge commit stays the reverted plan's once the revert is merged itself.
func TestViewOfARevertSaysWhatItReverts(t *testing.T) {
	orig, own := strings.Repeat("a", 40), strings.Repeat("b", 40)
	for name, c := range map[string]struct {
		mergeSHA string
		pay      plan.Payload
		want     string
	}{
		"open":   {pay: plan.Payload{RollbackReference: orig, Reverts: orig}, want: orig},
		"merged": {mergeSHA: own, pay: plan.Payload{RollbackReference: own, Reverts: orig}, want: orig},
		// A revert recorded before the payload kept what it reverts apart.
		"open, recorded before":   {pay: plan.Payload{RollbackReference: orig}, want: orig},
		"merged, recorded before": {mergeSHA: own, pay: plan.Payload{RollbackReference: own}, want: ""},
	} {
		pay, err := json.Marshal(c.pay)
		if err != nil {
			t.Fatal(err)
		}
		v := View(store.Plan{Code: "rb1", RollbackOf: "orig1", MergeSHA: c.mergeSHA, Change: json.RawMessage(`{"replicas":{"count":4}}`), Payload: pay})
		var got RevertChange
		if err := json.Unmarshal(v.Change, &got); err != nil {
			t.Fatalf("%s: change %s: %v", name, v.Change, err)
		}
		if got.Revert.Plan != "orig1" || got.Revert.MergeCommit != c.want || string(got.Revert.Undoes) != `{"replicas":{"count":4}}` {
			t.Errorf("%s: view change %s, want the revert of orig1 (merge commit %q) undoing its scale", name, v.Change, c.want)
		}
	}
}

// TestTeamReadsAreRateLimited: a team's repository views share one limit and its
// path decisions and Application reads another, whichever of its tokens asks; past
// each the (N+1)th request is answered 429 rate_limited with Retry-After, the other
// limit still lets its reads through, and another team is not held back.
func TestTeamReadsAreRateLimited(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		const burst = 3
		newLimit := func(what string) *ratelimit.Limiter {
			// One a minute after the burst: no refill within the test.
			l, err := ratelimit.New(what, 1, burst)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		srv, first := limitedChangesServer(t, db, stubPipeline{db},
			API{RepositoryLimit: newLimit("repository reads for this team"), ClusterReadLimit: newLimit("cluster reads for this team")})
		second := anotherToken(t, db, "shop")
		view := "/api/v1/clusters/prod/repository?repo=https://github.com/acme/deploy&revision=main"
		decide := `{"cluster":"prod","target":{"apiVersion":"v1","kind":"ConfigMap","name":"x"}}`
		type request struct{ method, path, body string }
		clusterReads := []request{
			{http.MethodPost, "/api/v1/decide", decide},
			{http.MethodGet, "/api/v1/clusters/prod/argocd/apps", ""},
			{http.MethodGet, "/api/v1/clusters/prod/argocd/apps/argocd/web", ""},
		}
		refused := func(token secret.Secret, r request, what string) {
			t.Helper()
			req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
			req.Header.Set("Authorization", "Bearer "+token.Reveal())
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code != http.StatusTooManyRequests {
				t.Fatalf("%s %s past the team's limit: %d %s", r.method, r.path, rec.Code, rec.Body)
			}
			wantCode(t, rec.Body.Bytes(), server.CodeRateLimited)
			if !strings.Contains(rec.Body.String(), what) {
				t.Errorf("%s %s: %s does not name %q", r.method, r.path, rec.Body, what)
			}
			if got := rec.Header().Get("Retry-After"); got != "60" {
				t.Errorf("%s %s: Retry-After %q, want 60 (one a minute)", r.method, r.path, got)
			}
		}

		for i := range burst {
			token := []secret.Secret{first, second}[i%2]
			if status, body := callAs(srv, token, http.MethodGet, view, ""); status != http.StatusOK {
				t.Fatalf("repository view %d, within the burst of %d: %d %s", i+1, burst, status, body)
			}
		}
		for _, token := range []secret.Secret{first, second} {
			refused(token, request{http.MethodGet, view, ""}, "too many repository reads for this team")
		}
		// The repository limit spent, the cluster reads have their own.
		for _, r := range clusterReads {
			if status, body := callAs(srv, second, r.method, r.path, r.body); status != http.StatusOK {
				t.Fatalf("%s %s, within the burst of cluster reads: %d %s", r.method, r.path, status, body)
			}
		}
		for _, r := range clusterReads {
			refused(first, r, "too many cluster reads for this team")
		}

		other := teamWithCluster(t, db, "billing")
		for _, r := range append(clusterReads, request{http.MethodGet, view, ""}) {
			if status, body := callAs(srv, other, r.method, r.path, r.body); status != http.StatusOK {
				t.Fatalf("another team's %s %s: %d %s", r.method, r.path, status, body)
			}
		}
	})
}

// TestOpenAPIDocumentsEveryRateLimit holds the document's 429 answers to the routes
// that answer one: each change API route is called twice with every limit at a
// burst of one, and documents 429 (with Retry-After, its example conforming) exactly
// when its second call is refused so; of the administrative routes exactly those of
// setup.CallOut document it.
func TestOpenAPIDocumentsEveryRateLimit(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Headers map[string]json.RawMessage `json:"headers"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	documents429 := func(pattern string) bool {
		method, path, _ := strings.Cut(pattern, " ")
		resp, ok := doc.Paths[path][strings.ToLower(method)].Responses["429"]
		if ok && resp.Headers["Retry-After"] == nil {
			t.Errorf("openapi.json documents the 429 of %s without Retry-After", pattern)
		}
		return ok
	}
	bodies := map[string]string{
		"POST /api/v1/changes": `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice"}`,
		"POST /api/v1/decide":  `{"cluster":"prod","target":{"apiVersion":"v1","kind":"ConfigMap","name":"x"}}`,
	}
	params := strings.NewReplacer("{cluster}", "prod", "{code}", "web1", "{namespace}", "argocd", "{name}", "web")
	for pattern := range (&API{}).changeRoutes() {
		t.Run(pattern, func(t *testing.T) {
			limit := func() *ratelimit.Limiter {
				l, err := ratelimit.New("calls", 1, 1)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			db := storetest.SQLite(t)
			srv, token := limitedChangesServer(t, db, stubPipeline{db}, API{ChangeLimit: limit(), RepositoryLimit: limit(), ClusterReadLimit: limit()})
			if strings.Contains(pattern, "{code}") {
				// The change exists, made in the store so that no limit is spent on
				// it: a rollback of no change is not_found before its call is counted.
				team, err := db.TeamByName(context.Background(), "shop")
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := db.CreatePlan(context.Background(), store.Plan{Code: "web1", TeamID: team.ID, Status: string(plan.StatusPROpen), Change: json.RawMessage(`{}`)}, store.PlanEvent{Actor: "test"}); err != nil {
					t.Fatal(err)
				}
			}
			method, path, _ := strings.Cut(pattern, " ")
			path = params.Replace(path)
			if path == "/api/v1/clusters/prod/repository" {
				path += "?repo=https://github.com/acme/deploy"
			}
			callAs(srv, token, method, path, bodies[pattern])
			status, body := callAs(srv, token, method, path, bodies[pattern])
			if limited := status == http.StatusTooManyRequests; limited != documents429(pattern) {
				t.Fatalf("the second call answers %d %s; openapi.json documents a 429: %v", status, body, !limited)
			}
		})
	}
	for pattern := range setup.Routes {
		if want := slices.Contains(setup.CallOut, pattern); documents429(pattern) != want {
			t.Errorf("%s is limited per team: %v; openapi.json documents a 429: %v", pattern, want, !want)
		}
	}
	for pattern := range notify.Routes {
		if documents429(pattern) {
			t.Errorf("openapi.json documents a 429 of %s, which has no limit", pattern)
		}
	}
	full := loadDoc(t)
	for path, ops := range full.Paths {
		for method, op := range ops {
			if resp, ok := op.Responses["429"]; ok {
				c := resp.Content["application/json"]
				if err := full.conforms(c.Schema, c.Example); len(c.Example) == 0 || err != nil {
					t.Errorf("%s %s: the 429 example %s does not conform: %v", method, path, c.Example, err)
				}
			}
		}
	}
}

// TestRollbackBodyMayBeLeftOutHoweverItIsSent: a rollback's body is optional, so
// none at all is no body whether it is sent with a Content-Length of 0 or chunked,
// as a client streaming its request sends it (failed before: an empty chunked body
// was refused 400 invalid_json "a JSON object is required"); a body given is still
// read strictly.
func TestRollbackBodyMayBeLeftOutHoweverItIsSent(t *testing.T) {
	// Each case on a database of its own: the stub's rollback is one plan code.
	rollback := func(t *testing.T, body io.Reader) (int, string) {
		db := storetest.SQLite(t)
		srv, token := changesServer(t, db, stubPipeline{db})
		scale := `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice"}`
		if status, body := callAs(srv, token, "POST", "/api/v1/changes", scale); status != http.StatusAccepted {
			t.Fatalf("create: %d %s", status, body)
		}
		req := httptest.NewRequest("POST", "/api/v1/changes/web1/rollback", body)
		req.Header.Set("Authorization", "Bearer "+token.Reveal())
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	for name, tc := range map[string]struct {
		body       io.Reader
		wantStatus int
	}{
		"no body":                  {nil, http.StatusAccepted},
		"an empty chunked body":    {io.NopCloser(strings.NewReader("")), http.StatusAccepted},
		"white space, chunked":     {io.NopCloser(strings.NewReader(" \n")), http.StatusAccepted},
		"a body, chunked":          {io.NopCloser(strings.NewReader(`{"reason":"errors"}`)), http.StatusAccepted},
		"an unknown field":         {strings.NewReader(`{"why":"errors"}`), http.StatusBadRequest},
		"an unknown field chunked": {io.NopCloser(strings.NewReader(`{"why":"errors"}`)), http.StatusBadRequest},
	} {
		t.Run(name, func(t *testing.T) {
			if status, body := rollback(t, tc.body); status != tc.wantStatus {
				t.Fatalf("%d %s, want %d", status, body, tc.wantStatus)
			}
		})
	}
}

// TestSecretChangeValuesAreNotShown: a change of a Secret (refused, but kept with its
// request) is shown, over HTTP and MCP alike, with its fields and paths and not one
// value, whatever case its kind is given in; other changes are shown as asked,
// but for what their diffs mask (failed before: the values asked for came back
// in every listing of the change).
func TestSecretChangeValuesAreNotShown(t *testing.T) {
	const planted = "hunter2-planted"
	for name, tc := range map[string]struct {
		kind, change string
		keep         []string
	}{
		"a merge patch": {"Secret", `{"patch":{"merge":{"stringData":{"password":"` + planted + `","port":5432,"on":true},"data":null}}}`,
			[]string{`"stringData"`, `"password":"[redacted]"`, `"port":"[redacted]"`, `"data":null`}},
		"a patch by pointer": {"secret", `{"patch":{"set":[{"path":"/data/token","value":"` + planted + `"},{"path":"/stringData","value":{"k":"` + planted + `"}}]}}`,
			[]string{`"path":"/data/token"`, `"value":"[redacted]"`, `"value":{"k":"[redacted]"}`}},
		"a new Secret": {"SECRET", `{"new_resource":{"manifest":"kind: Secret\nstringData:\n  password: ` + planted + `\n"}}`,
			[]string{`"manifest":"[redacted]"`}},
		"an env change": {"Secret", `{"env":{"container":"c","set":{"PASSWORD":"` + planted + `"},"unset":["OLD"]}}`,
			[]string{`"PASSWORD":"[redacted]"`, `"unset":["OLD"]`, `"container":"c"`}},
	} {
		t.Run(name, func(t *testing.T) {
			v := View(store.Plan{Code: "s1", Target: objref.Target{APIVersion: "v1", Kind: tc.kind, Namespace: "shop", Name: "db"}, Change: json.RawMessage(tc.change)})
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), planted) {
				t.Fatalf("the view shows the Secret's value: %s", v.Change)
			}
			for _, k := range tc.keep {
				if !strings.Contains(string(v.Change), k) {
					t.Errorf("the view's change %s lacks %s", v.Change, k)
				}
			}
		})
	}
	// A secret-looking key's value is masked as its diff masks it (see
	// TestChangeValuesAreShownMaskedAsTheDiff); the rest is shown as asked.
	asked := `{"patch":{"merge":{"data":{"mode":"` + planted + `"}}}}`
	if v := View(store.Plan{Target: objref.Target{Kind: "ConfigMap"}, Change: json.RawMessage(asked)}); string(v.Change) != asked {
		t.Errorf("a ConfigMap's change is shown as %s, want it as asked", v.Change)
	}
	// A new manifest holding a Secret beside the object its target names is
	// refused as a Secret is and shown as one (failed before: the Secret's values
	// were shown, the target being the ConfigMap).
	beside := `{"new_resource":{"manifest":"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData:\n  password: ` + planted + `\n"}}`
	if v := View(store.Plan{Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "web"}, Change: json.RawMessage(beside)}); strings.Contains(string(v.Change), planted) || !strings.Contains(string(v.Change), `"manifest":"[redacted]"`) {
		t.Errorf("a new manifest holding a Secret is shown as %s", v.Change)
	}
	manifest := `{"new_resource":{"manifest":"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata: {mode: fast}\n"}}`
	if v := View(store.Plan{Target: objref.Target{APIVersion: "v1", Kind: "ConfigMap", Name: "web"}, Change: json.RawMessage(manifest)}); string(v.Change) != manifest {
		t.Errorf("a new ConfigMap is shown as %s, want it as asked", v.Change)
	}
}

// TestActionBodyIsReadOnlyWithAccess: the body of a cancel or a rollback is read
// only once the caller is known and the change is its team's. A malformed body from
// a request without a team, or from another team, gets the answer to who is asking,
// not invalid_json (failed before: the body was read first, and its refusal told
// anyone that the route would have read it).
func TestActionBodyIsReadOnlyWithAccess(t *testing.T) {
	db := storetest.SQLite(t)
	srv, token := changesServer(t, db, stubPipeline{db})
	scale := `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice"}`
	if status, body := callAs(srv, token, "POST", "/api/v1/changes", scale); status != http.StatusAccepted {
		t.Fatalf("create: %d %s", status, body)
	}
	other := teamWithCluster(t, db, "other")
	api := &API{Store: db, Pipeline: stubPipeline{db}}
	const malformed = `{"reason":`
	for name, route := range map[string]http.HandlerFunc{"cancel": api.cancelChange, "rollback": api.rollbackChange} {
		t.Run(name, func(t *testing.T) {
			path := "/api/v1/changes/web1/" + name
			status, body := callAs(srv, other, "POST", path, malformed)
			if status != http.StatusNotFound {
				t.Errorf("another team's malformed body: %d %s, want 404", status, body)
			} else {
				wantCode(t, body, "not_found")
			}
			// Without a team, as the route answers if reached without its token check.
			req := httptest.NewRequest("POST", path, strings.NewReader(malformed))
			req.SetPathValue("code", "web1")
			rec := httptest.NewRecorder()
			route(rec, req)
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("a malformed body without a team: %d %s, want 401", rec.Code, rec.Body.Bytes())
			}
			if status, body := callAs(srv, token, "POST", path, malformed); status != http.StatusBadRequest {
				t.Errorf("the team's malformed body: %d %s, want 400", status, body)
			} else {
				wantCode(t, body, "invalid_json")
			}
		})
	}
}

// TestCancelTakesAnOptionalReason: a cancel's body may be left out, as before it
// was read at all, or give a reason, which the answer and the change's history
// hold; a body that is not JSON, holds a field a cancel does not take, or a
// reason over its bound or with a control character is refused with 400 naming
// the problem, and the change is not cancelled (failed before: every body was
// ignored and the change cancelled without its reason).
func TestCancelTakesAnOptionalReason(t *testing.T) {
	long := strings.Repeat("é", MaxReasonChars+1)
	for name, tc := range map[string]struct {
		body       io.Reader
		wantStatus int
		wantCode   string
		wantWords  string // in the answer
	}{
		"no body":                 {nil, http.StatusOK, "", ""},
		"an empty chunked body":   {io.NopCloser(strings.NewReader("")), http.StatusOK, "", ""},
		"a reason":                {strings.NewReader(`{"reason":"scaled by hand instead"}`), http.StatusOK, "", `"cancel_reason":"scaled by hand instead"`},
		"a reason, chunked":       {io.NopCloser(strings.NewReader(`{"reason":"scaled by hand instead"}`)), http.StatusOK, "", `"cancel_reason":"scaled by hand instead"`},
		"malformed JSON":          {strings.NewReader(`{"reason":`), http.StatusBadRequest, "invalid_json", "request body is not valid"},
		"not an object":           {strings.NewReader(`"scaled by hand"`), http.StatusBadRequest, "invalid_json", "request body is not valid"},
		"an unknown field":        {strings.NewReader(`{"why":"scaled by hand"}`), http.StatusBadRequest, "invalid_json", `unknown field \"why\"`},
		"a reason too long":       {strings.NewReader(`{"reason":"` + long + `"}`), http.StatusBadRequest, "invalid_request", "reason is 2001 characters long, at most 2000"},
		"a reason with a control": {strings.NewReader(`{"reason":"scaled\u001b[2Jby hand"}`), http.StatusBadRequest, "invalid_request", "reason holds the control character U+001B"},
	} {
		t.Run(name, func(t *testing.T) {
			// Each case on a database of its own: a change is cancelled once.
			db := storetest.SQLite(t)
			srv, token := changesServer(t, db, stubPipeline{db})
			scale := `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice"}`
			if status, body := callAs(srv, token, "POST", "/api/v1/changes", scale); status != http.StatusAccepted {
				t.Fatalf("create: %d %s", status, body)
			}
			req := httptest.NewRequest("POST", "/api/v1/changes/web1/cancel", tc.body)
			req.Header.Set("Authorization", "Bearer "+token.Reveal())
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			body := rec.Body.Bytes()
			if rec.Code != tc.wantStatus {
				t.Fatalf("%d %.300s, want %d", rec.Code, body, tc.wantStatus)
			}
			if tc.wantCode != "" {
				wantCode(t, body, tc.wantCode)
			}
			if tc.wantWords != "" && !bytes.Contains(body, []byte(tc.wantWords)) {
				t.Errorf("%.300s does not say %s", body, tc.wantWords)
			}
			status, got := callAs(srv, token, "GET", "/api/v1/changes/web1", "")
			if status != http.StatusOK {
				t.Fatalf("get: %d %s", status, got)
			}
			var view ChangeView
			if err := json.Unmarshal(got, &view); err != nil {
				t.Fatal(err)
			}
			cancelled := view.Status == string(plan.StatusClosed)
			if cancelled != (tc.wantStatus == http.StatusOK) {
				t.Fatalf("after a %d the change is %s", rec.Code, view.Status)
			}
			if !cancelled {
				return
			}
			var reason string
			if tc.wantWords != "" {
				reason = "scaled by hand instead"
			}
			last := view.History[len(view.History)-1]
			if view.CancelReason != reason || last.Step != "cancel" || !strings.HasSuffix(last.Message, reason) {
				t.Errorf("cancel_reason %q, last event %s %q; want the reason %q in both", view.CancelReason, last.Step, last.Message, reason)
			}
		})
	}
}

// TestChangeValuesAreShownMaskedAsTheDiff: a change of any other kind is shown as
// asked but for what its diffs mask: an env value named like a secret, a merge
// patch's or a pointer patch's value at a path a diff of the target masks (a
// ConfigMap's secret-looking key, a custom resource's secret-looking field), a
// new resource's secret values (failed before: they came back as asked in every
// listing of the change, to every token that may read the team's changes).
func TestChangeValuesAreShownMaskedAsTheDiff(t *testing.T) {
	const planted = "hunter2-planted"
	for name, tc := range map[string]struct {
		apiVersion, kind, change string
		keep                     []string
	}{
		"an env value named like a secret": {"apps/v1", "Deployment", `{"env":{"container":"web","set":{"DB_PASSWORD":"` + planted + `","LOG_LEVEL":"debug"}}}`,
			[]string{`"DB_PASSWORD":"[redacted]"`, `"LOG_LEVEL":"debug"`}},
		"a ConfigMap's secret-looking key": {"v1", "ConfigMap", `{"patch":{"merge":{"data":{"api_key":"` + planted + `","mode":"fast"}}}}`,
			[]string{`"api_key":"[redacted]"`, `"mode":"fast"`}},
		"a custom resource's field by pointer": {"example.com/v1", "Gateway", `{"patch":{"set":[{"path":"/spec/auth/token","value":"` + planted + `"},{"path":"/spec/replicas","value":3}]}}`,
			[]string{`"path":"/spec/auth/token","value":"[redacted]"`, `"path":"/spec/replicas","value":3`}},
		"an env entry by merge": {"apps/v1", "Deployment", `{"patch":{"merge":{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":"API_TOKEN","value":"` + planted + `"}]}]}}}}}}`,
			[]string{`"name":"API_TOKEN","value":"[redacted]"`}},
		"a new ConfigMap": {"v1", "ConfigMap", `{"new_resource":{"manifest":"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\ndata:\n  password: ` + planted + `\n  mode: fast\n"}}`,
			[]string{`password: [redacted]\n`, `mode: fast\n`}},
	} {
		t.Run(name, func(t *testing.T) {
			v := View(store.Plan{Code: "c1", Target: objref.Target{APIVersion: tc.apiVersion, Kind: tc.kind, Namespace: "shop", Name: "web"}, Change: json.RawMessage(tc.change)})
			if strings.Contains(string(v.Change), planted) {
				t.Fatalf("the view shows the value: %s", v.Change)
			}
			for _, k := range tc.keep {
				if !strings.Contains(string(v.Change), k) {
					t.Errorf("the view's change %s lacks %s", v.Change, k)
				}
			}
		})
	}
}
