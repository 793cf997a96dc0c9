package e2e_test

import (
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// runsNamed are the check runs of name on sha, newest first.
func (s *service) runsNamed(sha, name string) []*gh.CheckRun {
	s.t.Helper()
	var out []*gh.CheckRun
	for _, r := range s.gh.CheckRuns(s.t, s.repo, sha) {
		if r.GetName() == name {
			out = append(out, r)
		}
	}
	return out
}

// A pull request the service opens gets kukie/policy beside kukie/render: the
// rules of the .kukie.yml on the default branch checked on the head's render, a
// finding annotated at the manifest line, and the plan's server-side dry-run
// against the cluster reported by the dry_run rule.
func TestPlanHeadGetsThePolicyCheck(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.gh.PushCommit(t, s.repo, "main", map[string]string{
			".kukie.yml": "version: 1\nrules:\n  image_digest:\n    level: error\n  dry_run:\n    level: error\n",
		}, githubtest.DefaultAuthor)
		s.deployAPI()

		c := s.submit("Deployment", "api", map[string]any{"resources": map[string]any{"container": "api", "requests": map[string]any{"cpu": "500m"}}})
		c = s.waitStatus(c.Code, "pr_open")
		if c.CheckRun == nil || c.CheckRun.Conclusion != "success" || c.ClusterCheck != "passed" {
			t.Fatalf("check run %+v, cluster check %q", c.CheckRun, c.ClusterCheck)
		}
		runs := s.runsNamed(c.HeadSHA, github.PolicyCheckRunName)
		if len(runs) != 1 {
			t.Fatalf("%d kukie/policy runs on the plan's head, want 1", len(runs))
		}
		run := runs[0]
		sum := run.GetOutput().GetSummary()
		if run.GetConclusion() != github.ConclusionFailure || run.GetExternalID() != c.Code ||
			!strings.Contains(sum, "| image_digest | error | 1 |") || !strings.Contains(sum, "Server-side dry-run: passed") {
			t.Fatalf("kukie/policy %s %q:\n%s", run.GetConclusion(), run.GetExternalID(), sum)
		}
		anns := s.gh.CheckRunAnnotations(t, s.repo, run.GetID())
		if len(anns) != 1 || anns[0].GetPath() != "apps/api/base/deployment.yaml" || anns[0].GetStartLine() != 19 || anns[0].GetAnnotationLevel() != "failure" {
			t.Fatalf("annotations %+v, want one failure on the base's image line", anns)
		}
	})
}
