package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestRetargetedPullRequestFailsItsCheck: a person who changes an open change's pull
// request to merge into another branch than the one its Application tracks (the
// pull_request "edited" webhook with changes.base) sees the head's kukie/render run
// fail saying which branch the pull request now targets and which the Application
// tracks, and the move in the change's history; changing the base back publishes the
// verdict again.
func TestRetargetedPullRequestFailsItsCheck(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployWeb("main")
		var c change
		s.mustJSON("POST", "/api/v1/changes", s.scale(3, "retarget-1"), http.StatusAccepted, &c)
		c = s.waitStatus(c.Code, "pr_open")
		if c.CheckRun == nil || c.CheckRun.Conclusion != "success" {
			t.Fatalf("check run %+v before the retarget, want success", c.CheckRun)
		}
		number := int(c.PullRequest.Number)
		s.gh.CreateBranch(t, s.repo, "release", "main")

		s.gh.RetargetPullRequest(t, s.repo, number, "release")
		s.waitFor(c.Code, "its check failed", func(c change) bool { return c.CheckRun != nil && c.CheckRun.Conclusion == "failure" })
		runs := renderRuns(s, t, c.HeadSHA)
		if len(runs) != 1 {
			t.Fatalf("%d check runs on the head, want its one kukie/render run updated", len(runs))
		}
		summary := runs[0].GetOutput().GetSummary()
		if runs[0].GetConclusion() != "failure" || !strings.Contains(summary, "now targets release while Application") ||
			!strings.Contains(summary, "/web tracks main") {
			t.Fatalf("run after the retarget: %s %q", runs[0].GetConclusion(), summary)
		}
		var view struct {
			Status  string `json:"status"`
			History []struct {
				Step    string `json:"step"`
				Message string `json:"message"`
			} `json:"history"`
		}
		s.mustJSON("GET", "/api/v1/changes/"+c.Code, nil, http.StatusOK, &view)
		recorded := false
		for _, e := range view.History {
			recorded = recorded || e.Step == "pull_retargeted" && strings.Contains(e.Message, "retargeted from main to release")
		}
		if !recorded || view.Status != "pr_open" {
			t.Fatalf("status %s, history %+v: the retarget is not recorded", view.Status, view.History)
		}

		s.gh.RetargetPullRequest(t, s.repo, number, "main")
		s.waitFor(c.Code, "its check restored", func(c change) bool { return c.CheckRun != nil && c.CheckRun.Conclusion == "success" })
		runs = renderRuns(s, t, c.HeadSHA)
		if len(runs) != 1 || runs[0].GetConclusion() != "success" {
			t.Fatalf("%d runs on the head after targeting main again, want the one run, success", len(runs))
		}
	})
}

// renderRuns are the kukie/render runs on sha (kukie/policy has its own).
func renderRuns(s *service, t *testing.T, sha string) []*gh.CheckRun {
	var out []*gh.CheckRun
	for _, r := range s.gh.CheckRuns(t, s.repo, sha) {
		if r.GetName() == "kukie/render" {
			out = append(out, r)
		}
	}
	return out
}
