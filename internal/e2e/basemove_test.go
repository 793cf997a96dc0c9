package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// A pull request someone opened is checked; then another change to the same
// Application lands on main. GitHub's signed push delivery reaches the service's
// webhook route, and the pull request's kukie/render run says its base moved, with
// its verdict kept.
func TestBaseMoveMarksAPullRequestsCheckStale(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")

		head := s.gh.PushCommit(t, s.repo, "more-web", s.webDeployment(replicas("3")), githubtest.DefaultAuthor)
		s.gh.OpenPullRequest(t, s.repo, "more-web", "main", "More web replicas", githubtest.DefaultAuthor)
		run := s.completedRun(head)
		if run.GetConclusion() != github.ConclusionSuccess || strings.HasPrefix(run.GetOutput().GetTitle(), "Base branch moved") {
			t.Fatalf("run %s %q", run.GetConclusion(), run.GetOutput().GetTitle())
		}

		moved := s.gh.PushCommit(t, s.repo, "main", s.webDeployment(func(y string) string {
			return strings.Replace(y, "nginx:1.27.0", "nginx:1.27.1", 1)
		}), githubtest.DefaultAuthor)
		deadline := time.Now().Add(eventually)
		for {
			r := s.completedRun(head)
			if strings.HasPrefix(r.GetOutput().GetTitle(), "Base branch moved: ") {
				if r.GetID() != run.GetID() || r.GetConclusion() != github.ConclusionSuccess ||
					// The push landed after the run was published; the check reads
					// where main is once it published, and a move it finds so is
					// told as since it started, one its delivery told first as after it.
					!(strings.Contains(r.GetOutput().GetSummary(), "**main moved to "+moved[:7]+" after this check**, changing files that") ||
						strings.Contains(r.GetOutput().GetSummary(), "**main moved to "+moved[:7]+" since this check started**, changing files that")) ||
					!strings.Contains(r.GetOutput().GetSummary(), "(`apps/web/deployment.yaml`)") {
					t.Fatalf("marked run %d %s %q\n%s", r.GetID(), r.GetConclusion(), r.GetOutput().GetTitle(), r.GetOutput().GetSummary())
				}
				break
			}
			if time.Now().After(deadline) {
				logs := s.logs.String()
				t.Fatalf("the run was not marked stale after main moved: %q\nlast log lines:\n%s", r.GetOutput().GetTitle(), logs[max(0, len(logs)-4000):])
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
