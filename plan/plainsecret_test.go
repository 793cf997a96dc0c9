package plan_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// webWithEnv is webYAML with a pod template whose container has an env.
const webWithEnv = webYAML + `  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: ghcr.io/acme/web:1.0.0
          env:
            - name: LOG_LEVEL
              value: info
`

// TestEnvChangeWritingAPlainSecretIsRefused: an env change giving DB_PASSWORD a
// plain value would have opened a pull request whose branch held the value in
// clear, though every view of it masked it. The change is refused before any
// commit, saying where the value belongs, and nothing shown quotes the value;
// a flag of a secret-looking name (REDIS_AUTH=true) still opens its pull
// request.
func TestEnvChangeWritingAPlainSecretIsRefused(t *testing.T) {
	t.Parallel()
	const value = "hunter2-Lq93"
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.engine = cache.RenderEngine{}
		e.gh.PushCommit(t, repoName, "main", map[string]string{webFile: webWithEnv}, githubtest.DefaultAuthor)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		req := scale(0, "password")
		req.Change = render.Change{Env: &render.Env{Container: "web", Set: map[string]string{"DB_PASSWORD": value}}}
		pl, _, err := p.Submit(ctx, e.team.ID, "team:shop", req)
		if err != nil {
			t.Fatal(err)
		}
		pl = e.waitFor(pl.Code, "refused", func(p store.Plan) bool {
			return p.Status != string(plan.StatusDeciding) && p.Status != string(plan.StatusPreparing)
		})
		if pl.Status != string(plan.StatusRefused) || pl.ErrorCode != plan.CodeRefused {
			t.Fatalf("plan %s (%s): %s; want refused", pl.Status, pl.ErrorCode, pl.StatusReason)
		}
		for _, w := range []string{"env DB_PASSWORD of container web of apps/v1 Deployment shop/web looks like a secret", "valueFrom.secretKeyRef"} {
			if !strings.Contains(pl.StatusReason, w) {
				t.Errorf("reason lacks %q: %s", w, pl.StatusReason)
			}
		}
		view := changes.View(pl)
		answer, err := json.Marshal(view)
		if err != nil {
			t.Fatal(err)
		}
		var shownProblem struct {
			Problem struct {
				Details struct {
					Code string `json:"error"`
				} `json:"details"`
			} `json:"problem"`
		}
		if err := json.Unmarshal(answer, &shownProblem); err != nil || shownProblem.Problem.Details.Code != render.CodeSecret {
			t.Errorf("problem %+v (%v), want the render refusal %s", view.Problem, err, render.CodeSecret)
		}
		events, err := db.PlanEvents(ctx, pl.Code)
		if err != nil {
			t.Fatal(err)
		}
		shown := []string{pl.StatusReason, string(answer)}
		for _, ev := range events {
			shown = append(shown, ev.Message)
		}
		for _, s := range shown {
			if strings.Contains(s, value) {
				t.Errorf("the value is shown: %s", s)
			}
		}
		if n := len(e.gh.PullRequests(t, repoName)); n != 0 {
			t.Fatalf("refused plan opened %d pull requests", n)
		}
		if pl.Branch != "" && e.gh.Head(t, repoName, pl.Branch) != "" {
			t.Errorf("refused plan pushed branch %s", pl.Branch)
		}

		flag := scale(0, "flag")
		flag.Change = render.Change{Env: &render.Env{Container: "web", Set: map[string]string{"REDIS_AUTH": "true"}}}
		opened := e.submitOpen(ctx, p, flag)
		if got, _ := e.gh.FileAt(t, repoName, opened.Branch, webFile); !strings.Contains(got, "- name: REDIS_AUTH\n              value: \"true\"\n") {
			t.Errorf("branch file lacks the flag:\n%s", got)
		}
	})
}
