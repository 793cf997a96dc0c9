package plan_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// A cluster that cannot be asked does not block the pull request: the edit is
// verified in Git, and the check run says, as action_required, that it was not
// checked against the cluster. An API server that rejects the objects refuses the
// plan instead (covered end to end in internal/e2e).
func TestPipelineOpensThePRWhenTheClusterCannotBeChecked(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.cluster.dryRunErr = errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
		ctx := context.Background()
		p := e.startedPipeline(ctx, plan.Hooks{})
		pl := e.submitOpen(ctx, p, scale(4, "unreachable"))

		runs := e.gh.CheckRuns(t, repoName, pl.HeadSHA)
		if len(runs) != 1 {
			t.Fatalf("%d check runs on the head, want 1", len(runs))
		}
		run := runs[0]
		if run.GetConclusion() != "action_required" {
			t.Errorf("conclusion %q, want action_required", run.GetConclusion())
		}
		summary := run.GetOutput().GetSummary()
		for _, want := range []string{"not checked against the cluster", "connection refused"} {
			if !strings.Contains(summary, want) {
				t.Errorf("check run summary lacks %q:\n%s", want, summary)
			}
		}
		pay, err := plan.PayloadOf(pl)
		if err != nil {
			t.Fatal(err)
		}
		if pay.ClusterCheck != plan.ClusterCheckUnreachable {
			t.Errorf("cluster check %q, want %q", pay.ClusterCheck, plan.ClusterCheckUnreachable)
		}
	})
}
