package e2e_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// A team's second cluster that runs the same Application from the same repository
// and branch would change too: the change is refused naming it. A registered
// cluster that cannot be read does not block the pull request, but the change,
// the pull request and the check run name it as not checked.
func TestChangeIsVerifiedInEveryClusterOfTheTeam(t *testing.T) {
	t.Run("the same app in another cluster", func(t *testing.T) {
		storetest.ForEach(t, func(t *testing.T, db *store.DB) {
			s := newService(t, db)
			s.deployWeb("main")
			// The same API server under a second name: its Argo CD runs the same
			// Application.
			s.mustJSON("POST", "/api/v1/clusters", map[string]any{"name": "staging", "kubeconfig": string(s.kubeconfig)}, http.StatusCreated, nil)
			var c change
			s.mustJSON("POST", "/api/v1/changes", s.scale(4, ""), http.StatusAccepted, &c)
			c = s.waitStatus(c.Code, "refused")
			if c.Problem == nil || !strings.Contains(c.Problem.Reason, "(cluster staging)") {
				t.Fatalf("refused with %+v, want the reason to name the app in cluster staging", c.Problem)
			}
			if n := len(s.gh.PullRequests(t, s.repo)); n != 0 {
				t.Fatalf("%d pull requests for a refused change", n)
			}
		})
	})
	t.Run("a cluster that cannot be read", func(t *testing.T) {
		storetest.ForEach(t, func(t *testing.T, db *store.DB) {
			s := newService(t, db)
			s.deployWeb("main")
			// Nothing listens on port 1.
			unreachable := regexp.MustCompile(`server: \S+`).ReplaceAllString(string(s.kubeconfig), "server: https://127.0.0.1:1")
			s.mustJSON("POST", "/api/v1/clusters", map[string]any{"name": "edge", "kubeconfig": unreachable}, http.StatusCreated, nil)
			var c change
			s.mustJSON("POST", "/api/v1/changes", s.scale(4, ""), http.StatusAccepted, &c)
			c = s.waitStatus(c.Code, "pr_open")
			var view struct {
				NotChecked []string `json:"not_checked"`
			}
			s.mustJSON("GET", "/api/v1/changes/"+c.Code, nil, http.StatusOK, &view)
			if len(view.NotChecked) != 1 || !strings.HasPrefix(view.NotChecked[0], "cluster edge (") {
				t.Fatalf("not_checked %q, want cluster edge", view.NotChecked)
			}
			if c.CheckRun == nil || c.CheckRun.Conclusion != "action_required" {
				t.Fatalf("check run %+v, want action_required", c.CheckRun)
			}
			prs := s.gh.PullRequests(t, s.repo)
			if len(prs) != 1 {
				t.Fatalf("%d pull requests, want 1", len(prs))
			}
			for where, text := range map[string]string{"check run": s.checkRunSummary(c), "pull request": prs[0].GetBody()} {
				if !strings.Contains(text, view.NotChecked[0]) || strings.Contains(text, "127.0.0.1:1") {
					t.Errorf("%s does not name %q as not checked, or shows its address:\n%s", where, view.NotChecked[0], text)
				}
			}
		})
	})
}
