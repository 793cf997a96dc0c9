package plan_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/cache"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// webElsewhere is the web Application as another cluster runs it, from repo at
// revision.
func webElsewhere(repo, revision string) argocd.Application {
	a := newFakeCluster().app
	src := *a.Spec.Source
	src.RepoURL, src.TargetRevision = repo, revision
	a.Spec.Source = &src
	return a
}

// "Nothing else changes" holds across the team's clusters: an Application in
// another cluster that deploys the edited files from the same repository and
// branch is verified too, and a cluster that cannot be read is named in the check
// run and the pull request as not checked.
func TestPipelineVerifiesTheTeamsOtherClusters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Each case on its own database: an opened pull request keeps its file locked.
	run := func(name string, fn func(t *testing.T, db *store.DB)) {
		t.Run(name, func(t *testing.T) { storetest.ForEach(t, fn) })
	}
	run("an app there reading the edited file", func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.engine = cache.RenderEngine{}
		e.cluster.elsewhere = map[string][]argocd.Application{"staging": {webElsewhere(repoURL, "main")}}
		p := e.pipeline(plan.Hooks{})
		pl, _, err := p.Submit(ctx, e.team.ID, "team:x", scale(4, "staging"))
		if err != nil {
			t.Fatal(err)
		}
		pl = e.waitFor(pl.Code, "refused", func(p store.Plan) bool { return p.Status == string(plan.StatusRefused) })
		if !strings.Contains(pl.StatusReason, "argocd/web (cluster staging)") {
			t.Fatalf("refused with %q (%s), want the reason to name the app in cluster staging", pl.ErrorCode, pl.StatusReason)
		}
	})
	run("apps there of another branch or repository", func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.engine = cache.RenderEngine{}
		e.cluster.elsewhere = map[string][]argocd.Application{
			"staging": {webElsewhere(repoURL, "release")},
			"dev":     {webElsewhere("https://github.com/acme/other.git", "main")},
		}
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "elsewhere"))
		pay, err := plan.PayloadOf(pl)
		if err != nil {
			t.Fatal(err)
		}
		if pay.Verification == nil || len(pay.Verification.Apps) != 1 || len(pay.NotChecked) != 0 {
			t.Fatalf("verification %+v, not checked %v: want argocd/web alone, every cluster read", pay.Verification, pay.NotChecked)
		}
		if runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA); len(runs) != 1 || runs[0].GetConclusion() != "success" {
			t.Fatalf("check runs %v, want one success", runs)
		}
	})
	run("a cluster that cannot be read", func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.engine = cache.RenderEngine{}
		e.cluster.elsewhere = map[string][]argocd.Application{"staging": {webElsewhere(repoURL, "release")}}
		e.cluster.unreadable = map[string]error{"edge": errors.New("dial tcp 10.9.8.7:6443: connect: connection refused")}
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "edge"))
		runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA)
		if len(runs) != 1 || runs[0].GetConclusion() != "action_required" {
			t.Fatalf("check runs %v, want one action_required", runs)
		}
		prs := e.gh.PullRequests(t, repoName)
		if len(prs) != 1 {
			t.Fatalf("%d pull requests, want 1", len(prs))
		}
		for where, text := range map[string]string{"check run": runs[0].GetOutput().GetSummary(), "pull request": prs[0].GetBody()} {
			if !strings.Contains(text, "not checked**: cluster edge (unreachable)") || strings.Contains(text, "staging") {
				t.Errorf("%s does not name cluster edge alone as not checked:\n%s", where, text)
			}
			if strings.Contains(text, "10.9.8.7") {
				t.Errorf("%s shows the cluster's address:\n%s", where, text)
			}
		}
	})
}
