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

// TestNextStepOfAFailedChangeSaysHowToResumeIt: a change a step failed (GitHub's
// 503 past its retries: "open pull request ...: 503 Service Unavailable") is told
// with the route that resumes it (failed before: "the change's problem says why and
// what can be done", while the problem said only what GitHub answered).
func TestNextStepOfAFailedChangeSaysHowToResumeIt(t *testing.T) {
	v := changes.ChangeView{Code: "k7q2m9xr4a", Status: string(plan.StatusFailed)}
	if got, want := changeResultOf(v).Next, "POST /api/v1/changes/k7q2m9xr4a/retry resumes it at the step that failed"; !strings.Contains(got, want) {
		t.Errorf("next of a failed change = %q, want it to say %q", got, want)
	}
}
