package plan_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestPipelineStepsWhoseAnswerIsLost: GitHub does the work of each write of the
// way to an open pull request (the blob, tree and commit made, the branch created,
// the pull request opened, the check run created) and its answer is lost, as a
// 502 from a proxy in front of it or a timeout. The step is taken again, and what
// the lost answer made is adopted, not made twice: the plan ends with one commit on
// its branch, one pull request and one successful check run on its head.
func TestPipelineStepsWhoseAnswerIsLost(t *testing.T) {
	t.Parallel()
	steps := []struct{ name, method, path string }{
		{"blobs", http.MethodPost, "/repos/*/*/git/blobs"},
		{"tree", http.MethodPost, "/repos/*/*/git/trees"},
		{"commit", http.MethodPost, "/repos/*/*/git/commits"},
		{"ref", http.MethodPost, "/repos/*/*/git/refs"},
		{"pull request", http.MethodPost, "/repos/*/*/pulls"},
		{"check run", http.MethodPost, "/repos/*/*/check-runs"},
	}
	faults := map[string]githubtest.Fault{
		"502":     githubtest.ServerError(http.StatusBadGateway),
		"timeout": {Hang: true},
	}
	for _, step := range steps {
		for faultName, fault := range faults {
			lost := fault.On(step.method, step.path)
			lost.Served, lost.Times = true, 1
			t.Run(step.name+"/"+faultName, func(t *testing.T) {
				t.Parallel() // each case has its own GitHub and databases; most of it is waiting
				forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
					e := newFaultEnv(t, db)
					e.gh.InjectFault(lost)
					ctx := context.Background()
					pl := e.submitOpen(ctx, e.startedPipeline(ctx, plan.Hooks{}), scale(4, ""))
					if hits := e.gh.FaultHits(step.method, step.path); hits != 1 {
						t.Fatalf("the fault lost %d answers, want 1", hits)
					}
					wantOneOfEach(t, e, pl, "success")
				})
			})
		}
	}
}
