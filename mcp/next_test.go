package mcp

import (
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/api/changes"
	"github.com/kukie/kukie-gitops/github"
	"github.com/kukie/kukie-gitops/plan"
)

// TestNextStepOfAnOpenPullRequestSaysItsCheck: an open pull request whose
// kukie/render run did not pass (a person pushed a commit that is not the verified
// edit; a cluster was not checked) is not told as one waiting to be merged (failed
// before: "the pull request waits for a person to review and merge it" whatever the
// check concluded, so an assistant told its user the change was ready).
func TestNextStepOfAnOpenPullRequestSaysItsCheck(t *testing.T) {
	for conclusion, want := range map[string]string{
		"":                              "the pull request waits for a person to review and merge it",
		github.ConclusionSuccess:        "the pull request waits for a person to review and merge it",
		github.ConclusionFailure:        "its kukie/render check failed: do not merge it as it is; change.verification_result and the check run say why",
		github.ConclusionActionRequired: "its kukie/render check asks for action before it is merged; change.verification_result and the check run say what",
	} {
		v := changes.ChangeView{Status: string(plan.StatusPROpen)}
		if conclusion != "" {
			v.CheckRun = &changes.CheckRunView{ID: 1, Conclusion: conclusion}
		}
		if got := changeResultOf(v).Next; !strings.Contains(got, want) {
			t.Errorf("next with the check concluded %q = %q, want it to say %q", conclusion, got, want)
		}
	}
}
