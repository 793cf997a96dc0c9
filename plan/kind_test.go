package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestTargetIsShownInTheKindTheClusterServes: a target's kind given in another
// case than the cluster serves it (kind: deployment, as kubectl takes it) is read
// as the served kind since f8f1925, but the pull request's title and body, the
// commit message and the deployment's messages kept it as typed, "kukie: scale
// deployment/web", "deployment/web is rolling out"; they now name the served
// kind, Deployment, as the cluster and the diff do.
func TestTargetIsShownInTheKindTheClusterServes(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		req := scale(4, "lower-case-kind")
		req.Target.Kind = "deployment"
		pl := e.submitOpen(ctx, p, req)

		prs := e.gh.PullRequests(t, repoName)
		if len(prs) != 1 {
			t.Fatalf("%d pull requests, want 1", len(prs))
		}
		if want := "kukie: scale Deployment/web (" + pl.Code + ")"; prs[0].GetTitle() != want {
			t.Errorf("title %q, want %q", prs[0].GetTitle(), want)
		}
		if want := "Scale Deployment/web in namespace `shop`"; !strings.Contains(prs[0].GetBody(), want) {
			t.Errorf("body lacks %q:\n%s", want, prs[0].GetBody())
		}
		ci, err := e.repos.GetCommit(ctx, e.conns.inst, repoName, pl.HeadSHA)
		if err != nil {
			t.Fatal(err)
		}
		if want := "kukie: scale Deployment/web (" + pl.Code + ")\n"; !strings.HasPrefix(ci.Message, want) {
			t.Errorf("commit message %q, want it to start %q", ci.Message, want)
		}
		pay, err := plan.PayloadOf(pl)
		if err != nil {
			t.Fatal(err)
		}
		if got := plan.ShownTarget(pl, pay); got.Kind != "Deployment" || got.Name != "web" || got.Namespace != "shop" || got.APIVersion != "apps/v1" {
			t.Errorf("the target shown is %+v, want apps/v1 Deployment shop/web", got)
		}
		if pl.Target.Kind != "deployment" {
			t.Errorf("the stored target's kind is %q, want it as requested (deployment), which a retry of the request sends again", pl.Target.Kind)
		}

		mergeSHA := e.gh.Merge(t, repoName, int(pl.PRNumber), githubtest.MergeCommit)
		e.cluster.setTargetStatus(rolloutStatus(2, 4, 1, 3))
		e.cluster.sync(mergeSHA, argocd.PhaseSucceeded)
		e.pullMerged(ctx, p, pl, mergeSHA)
		want := "Deployment/web is rolling out: Updated: 1/4"
		cur := e.waitFor(pl.Code, "rolling out", func(cur store.Plan) bool {
			pay, err := plan.PayloadOf(cur)
			return cur.Status != string(plan.StatusMerged) && err == nil && pay.Deployment != nil && strings.Contains(pay.Deployment.Message, "rolling out")
		})
		if pay, _ := plan.PayloadOf(cur); pay.Deployment.Message != want {
			t.Errorf("deployment message %q, want %q", pay.Deployment.Message, want)
		}
	})
}
