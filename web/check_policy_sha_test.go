package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/web"
)

// TestCheckPageSaysWhichCommitItsPolicyWasReadFrom: a check that kept the commit
// of the default branch it read its policy from says, in its policy section, that
// it was judged by the rules of .kukie.yml there as of that commit (linked) or a
// later one; a check that did not keep it says nothing of a commit.
func TestCheckPageSaysWhichCommitItsPolicyWasReadFrom(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	res := prcheck.Result{Title: "1 Applications affected, 1 change in the cluster", Conclusion: "success",
		Policy: &prcheck.ResultPolicy{Title: "1 Applications meet the policy", Conclusion: "success", DefaultBranch: "trunk", Configured: true}}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	const read = "5555555555555555555555555555555555555555"
	c, err := e.db.BeginPullCheck(ctx, store.PullCheck{InstallationID: 1, Repo: repoName, RepoURL: "https://github.example/" + repoName, Key: "pull/21",
		BaseBranch: "release", BaseSHA: "1111111111111111111111111111111111111111", HeadSHA: "2222222222222222222222222222222222222222", PolicySHA: read})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.FinishPullCheck(ctx, c.ID, store.PullCheckCompleted, res.Conclusion, "", raw); err != nil {
		t.Fatal(err)
	}
	_, resp, body := e.signInAt(t, reader, web.CheckPathPrefix+c.ID)
	_, pol, found := strings.Cut(body, `<section id="policy">`)
	if resp.StatusCode != http.StatusOK || !found {
		t.Fatalf("the check's page has no policy section: %d:\n%s", resp.StatusCode, body)
	}
	want := "Judged by the rules of <code>.kukie.yml</code> on <code>trunk</code> as it was at " +
		`<a href="https://github.example/` + repoName + "/commit/" + read + `"><code>5555555</code></a> or a later commit`
	if !strings.Contains(pol, want) {
		t.Errorf("the policy section lacks %q:\n%s", want, pol)
	}

	other := e.completedCheck(t, "pull/22", "3333333333333333333333333333333333333333", res)
	_, _, body = e.signInAt(t, reader, web.CheckPathPrefix+other)
	if strings.Contains(body, "Judged by the rules of") {
		t.Errorf("the page of a check that kept no policy commit names one:\n%s", body)
	}
}
