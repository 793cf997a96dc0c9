package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

const apiYAML = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n  namespace: shop\nspec:\n  replicas: 1\n"

// kustomizeApp is an Application of repoURL at main with kustomize options render
// does not apply.
func kustomizeApp(name, path string) argocd.Application {
	return argocd.Application{Name: name, Namespace: "argocd", Spec: argocd.AppSpec{
		Source: &argocd.AppSource{RepoURL: repoURL, Path: path, TargetRevision: "main",
			Kustomize: &argocd.AppSourceKustomize{Unsupported: []string{"patches"}}},
		Destination: argocd.AppDestination{Namespace: "shop"},
	}, Status: argocd.AppStatus{SourceType: "Kustomize"}}
}

// An Application with options render cannot apply blocks only the changes that
// reach it: a change to another app of the same repository is verified and opened,
// and a change whose edit it reads is refused naming its option.
func TestPipelineRefusesOnlyChangesThatReachAnUnsupportedApp(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		t.Run("unreached", func(t *testing.T) {
			e := newEnv(t, db)
			e.engine = cache.RenderEngine{}
			e.gh.PushCommit(t, repoName, "main", map[string]string{
				"apps/api/kustomization.yaml": "resources:\n  - deploy.yaml\n", "apps/api/deploy.yaml": apiYAML,
			}, githubtest.Author{Name: "dev", Email: "dev@example.com"})
			e.cluster.others = []argocd.Application{kustomizeApp("api", "apps/api")}
			p := e.startedPipeline(ctx, plan.Hooks{})
			pl := e.submitOpen(ctx, p, scale(4, "unreached"))
			pay, err := plan.PayloadOf(pl)
			if err != nil {
				t.Fatal(err)
			}
			if pay.Verification == nil || len(pay.Verification.Apps) != 1 || pay.Verification.Apps[0].App != "argocd/web" {
				t.Fatalf("verification %+v, want argocd/web alone", pay.Verification)
			}
		})
		t.Run("reached", func(t *testing.T) {
			e := newEnv(t, db)
			e.engine = cache.RenderEngine{}
			e.gh.PushCommit(t, repoName, "main", map[string]string{
				"kustomization.yaml": "resources:\n  - apps/web/deploy.yaml\n",
			}, githubtest.Author{Name: "dev", Email: "dev@example.com"})
			e.cluster.others = []argocd.Application{kustomizeApp("everything", ".")}
			p := e.pipeline(plan.Hooks{})
			pl, _, err := p.Submit(ctx, e.team.ID, "team:x", scale(4, "reached"))
			if err != nil {
				t.Fatal(err)
			}
			pl = e.waitFor(pl.Code, "refused", func(p store.Plan) bool { return p.Status == string(plan.StatusRefused) })
			if pl.ErrorCode != plan.CodeRefused || !strings.Contains(pl.StatusReason, "argocd/everything") || !strings.Contains(pl.StatusReason, "(patches)") {
				t.Fatalf("refused with %q (%s), want a refusal naming argocd/everything and its option", pl.ErrorCode, pl.StatusReason)
			}
		})
	})
}
