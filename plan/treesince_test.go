package plan_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// A plan on a new commit of the branch derives its reach index from the commit
// planned before, through GitHub's comparison of the two: an Application that the
// new commit makes read the edited file is verified (here refused, as the edit
// would change it too), not judged by its reach at the earlier commit. When the
// comparison fails the index is built in full, with the same outcome.
func TestPipelineDerivesReachIndexFromLastPlannedCommit(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		for _, compareFails := range []bool{false, true} {
			name := map[bool]string{false: "compared", true: "compare fails"}[compareFails]
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				e := newEnv(t, db)
				e.engine = cache.RenderEngine{}
				author := githubtest.Author{Name: "dev", Email: "dev@example.com"}
				first := e.gh.PushCommit(t, repoName, "main", map[string]string{
					"apps/api/kustomization.yaml": "resources:\n  - deploy.yaml\n", "apps/api/deploy.yaml": apiYAML,
				}, author)
				api := kustomizeApp("api", "apps/api")
				api.Spec.Source.Kustomize = nil
				e.cluster.others = []argocd.Application{api}
				e.gh.RecordRequests()
				p := e.startedPipeline(ctx, plan.Hooks{})

				pl := e.submitOpen(ctx, p, scale(4, name+"-first"))
				pay, err := plan.PayloadOf(pl)
				if err != nil {
					t.Fatal(err)
				}
				if pay.Verification == nil || len(pay.Verification.Apps) != 1 || pay.Verification.Apps[0].App != "argocd/web" {
					t.Fatalf("verification at %s: %+v, want argocd/web alone", first, pay.Verification)
				}
				if _, err := p.Cancel(ctx, e.team.ID, pl.Code, ""); err != nil {
					t.Fatal(err)
				}
				e.waitFor(pl.Code, "closed", func(p store.Plan) bool { return plan.Status(p.Status).Terminal() })

				second := e.gh.PushCommit(t, repoName, "main", map[string]string{
					"apps/api/kustomization.yaml": "resources:\n  - deploy.yaml\n  - ../web/deploy.yaml\n",
				}, author)
				compare := "/repos/acme/deploy/compare/**"
				if compareFails {
					defer e.gh.InjectFault(githubtest.Fault{Status: 502}.On("GET", compare))()
				}
				refused, _, err := p.Submit(ctx, e.team.ID, "team:shop", scale(5, name+"-second"))
				if err != nil {
					t.Fatal(err)
				}
				refused = e.waitFor(refused.Code, "refused", func(p store.Plan) bool { return p.Status == string(plan.StatusRefused) })
				if !strings.Contains(refused.StatusReason, "argocd/api") {
					t.Errorf("plan at %s refused with %q, want a reason naming argocd/api, which now reads the edited file", second, refused.StatusReason)
				}

				compared := slices.ContainsFunc(e.gh.Requests(), func(r githubtest.RecordedRequest) bool {
					return r.Method == "GET" && strings.HasSuffix(r.Path, "/repos/acme/deploy/compare/"+first+"..."+second)
				})
				if !compared {
					t.Errorf("no comparison of %s...%s was asked of GitHub", first, second)
				}
				if compareFails && e.gh.FaultHits("GET", compare) == 0 {
					t.Error("the failing comparison was not asked")
				}
			})
		}
	})
}
