package plan_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/policy"
	"github.com/kukie/kukie-gitops/store"
)

// recordingPolicy keeps the heads the pipeline asks it to check.
type recordingPolicy struct {
	mu    sync.Mutex
	heads []plan.PolicyHead
	err   error
}

func (r *recordingPolicy) CheckPolicy(_ context.Context, h plan.PolicyHead) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.heads = append(r.heads, h)
	return r.err
}

// The pipeline asks for kukie/policy on the head it publishes kukie/render on,
// with its dry-run's outcome, and a policy check that fails does not hold the pull
// request back (kukie/render is the plan's verdict).
func TestPipelineChecksThePolicyOnItsHead(t *testing.T) {
	t.Parallel()
	for name, perr := range map[string]error{"published": nil, "not published": errors.New("GitHub is down")} {
		t.Run(name, func(t *testing.T) {
			forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
				e := newEnv(t, db)
				e.cluster.dryRunErr = errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
				rec := &recordingPolicy{err: perr}
				e.policy = rec
				ctx := context.Background()
				p := e.startedPipeline(ctx, plan.Hooks{})
				pl := e.submitOpen(ctx, p, scale(4, "policy-"+name))

				rec.mu.Lock()
				defer rec.mu.Unlock()
				if len(rec.heads) != 1 {
					t.Fatalf("%d policy checks, want 1", len(rec.heads))
				}
				h := rec.heads[0]
				if h.Key != pl.Code || h.HeadSHA != pl.HeadSHA || h.BaseSHA != pl.BaseSHA || h.BaseBranch != "main" || h.Repo != repoName ||
					!strings.HasSuffix(h.RepoURL, "/"+repoName) || h.InstallationID != pl.InstallationID {
					t.Fatalf("policy head %+v for plan %s on %s", h, pl.Code, pl.HeadSHA)
				}
				if h.DryRun.Outcome != policy.DryRunUnreachable || !strings.Contains(h.DryRun.Note, "connection refused") {
					t.Fatalf("dry-run %+v, want unreachable with the cluster's words", h.DryRun)
				}
			})
		})
	}
}
