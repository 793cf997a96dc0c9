package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/leakscan"
	"github.com/kukie/kukie-gitops/prcheck"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/web"
)

func TestCheckPageShowsTheCheckToAReader(t *testing.T) {
	e := newEnv(t)
	_, res, body := e.signInAt(t, reader, web.CheckPathPrefix+e.check)
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != web.CheckPathPrefix+e.check {
		t.Fatalf("after sign-in: %d at %s:\n%s", res.StatusCode, res.Request.URL, body)
	}
	history, err := e.db.PullChecksOf(t.Context(), repoName, "pull/7")
	if err != nil || len(history) != 2 {
		t.Fatalf("history %v, %v", history, err)
	}
	for _, want := range []string{
		`<a href="https://github.example/acme/deploy/pull/7">#7</a>`, "3333333333333333333333333333333333333333", // the pull request
		"1 Applications affected, 1 change in the cluster", "<td>argocd/api (cluster prod)</td><td>prod</td><td>self_heal</td>", // the outcome
		"argocd/jobs (cluster prod) was not checked: a Helm chart from another repository", // what was not checked
		`<a href="https://github.example/acme/deploy/blob/3333333333333333333333333333333333333333/apps/api/deployment.yaml"><code>apps/api/deployment.yaml</code></a>`,
		"https://github.example/acme/deploy/compare/1111111111111111111111111111111111111111...3333333333333333333333333333333333333333", // the git diff
		"Application <code>argocd/api (cluster prod)</code>", `<span class="add">` + checkDiffLine + `</span>`,                           // the cluster diff
		"Secret api/api-token", "stringData.token",
		`<a href="/checks/` + history[1].ID + `">`, store.PullCheckSuperseded, "A newer commit (3333333) was pushed", // the history
		"Signed in as <strong>" + reader + "</strong>",
		// the policy: each finding with its rule, level, manifest line (linked at the head) and message
		`<section id="policy">`, "1 errors, 1 warnings, 0 notices",
		`<td>dry_run</td><td><span class="status level-error">error</span></td><td><a href="https://github.example/acme/deploy/blob/3333333333333333333333333333333333333333/apps/api/deployment.yaml#L9"><code>apps/api/deployment.yaml:9</code></a></td>`,
		checkFindingMessage,
		`<td>image_digest</td><td><span class="status level-warning">warning</span></td><td><span class="none">not known</span></td>`,
		"Server-side dry-run: rejected (1 changed objects sent, 1 refused).",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the check's page lacks %q", want)
		}
	}
	if leakscan.Matches(body) {
		t.Errorf("the check's page shows a Secret value:\n%s", body)
	}
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("page headers %v", res.Header)
	}
}

// TestSupersededCheckPageSaysWhy: the older check's page has no result, only how it
// ended, and links to the newer one.
func TestSupersededCheckPageSaysWhy(t *testing.T) {
	e := newEnv(t)
	history, err := e.db.PullChecksOf(t.Context(), repoName, "pull/7")
	if err != nil || len(history) != 2 {
		t.Fatalf("history %v, %v", history, err)
	}
	_, res, body := e.signInAt(t, reader, web.CheckPathPrefix+history[1].ID)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "A newer commit (3333333) was pushed; it is checked instead.") ||
		!strings.Contains(body, `<a href="/checks/`+e.check+`">`) || strings.Contains(body, checkDiffLine) {
		t.Fatalf("superseded check's page: %d:\n%s", res.StatusCode, body)
	}
}

func TestNoReadAccessLooksLikeNoCheck(t *testing.T) {
	e := newEnv(t)
	browser, res, body := e.signInAt(t, outsider, web.CheckPathPrefix+e.check)
	if res.StatusCode != http.StatusNotFound || strings.Contains(body, checkDiffLine) || strings.Contains(body, "3333333") {
		t.Fatalf("outsider: %d:\n%s", res.StatusCode, body)
	}
	missing, missingBody := get(t, browser, e.srv.URL+web.CheckPathPrefix+"no-such-check")
	if missing.StatusCode != http.StatusNotFound || missingBody != body {
		t.Errorf("a check that does not exist answers differently from one the person cannot read:\n%s\n---\n%s", missingBody, body)
	}
	// The change page's answer is the same one.
	if res, changeBody := get(t, browser, e.srv.URL+web.ChangePathPrefix+e.code); res.StatusCode != http.StatusNotFound || changeBody != body {
		t.Errorf("the change page answers an outsider differently:\n%s", changeBody)
	}
}

// TestCheckPageShowsAnInvalidPolicyAtItsLine: a .kukie.yml that cannot be used is
// shown with the parser's words and a link to its line on the default branch.
func TestCheckPageShowsAnInvalidPolicyAtItsLine(t *testing.T) {
	e := newEnv(t)
	id := e.completedCheck(t, "pull/8", "4444444444444444444444444444444444444444", prcheck.Result{Title: "No Application reads the changed files", Conclusion: "neutral",
		Policy: &prcheck.ResultPolicy{Title: ".kukie.yml is not valid", Conclusion: "failure", DefaultBranch: "release/2",
			ConfigError: "did not find expected key", ConfigLine: 7}})
	_, res, body := e.signInAt(t, reader, web.CheckPathPrefix+id)
	want := `<code>.kukie.yml</code> on <code>release/2</code> at <a href="https://github.example/acme/deploy/blob/release/2/.kukie.yml#L7">line 7</a>: did not find expected key`
	if res.StatusCode != http.StatusOK || !strings.Contains(body, want) || !strings.Contains(body, ".kukie.yml is not valid") {
		t.Fatalf("check page %d lacks %q:\n%s", res.StatusCode, want, body)
	}
}

// TestCheckPageShowsTheCapabilitiesWarning: a Helm app the check rendered with
// Helm's default capabilities, because its cluster could not be asked, is named
// with the reason on the page as in the check run; one that was not checked at
// all says only that.
func TestCheckPageShowsTheCapabilitiesWarning(t *testing.T) {
	e := newEnv(t)
	const warning = "rendered with Helm's default Kubernetes version and API versions (.Capabilities): the cluster could not be asked for them (unreachable)"
	id := e.completedCheck(t, "pull/9", "5555555555555555555555555555555555555555", prcheck.Result{Title: "1 Applications affected, 1 change in the cluster", Conclusion: "success",
		Apps: []prcheck.ResultApp{
			{Name: "argocd/web (cluster prod)", Cluster: "prod", SyncPolicy: "auto", Changed: 1, Warning: warning},
			{Name: "argocd/other (cluster prod)", Cluster: "prod", SyncPolicy: "auto", NotChecked: "a Helm chart from another repository", Warning: warning},
		}})
	_, res, body := e.signInAt(t, reader, web.CheckPathPrefix+id)
	_, warnings, _ := strings.Cut(body, `<section id="warnings">`)
	warnings, _, _ = strings.Cut(warnings, "</section>")
	want := "<li>argocd/web (cluster prod): rendered with Helm's default Kubernetes version and API versions (.Capabilities): the cluster could not be asked for them (unreachable)</li>"
	if res.StatusCode != http.StatusOK || !strings.Contains(warnings, want) {
		t.Fatalf("check page %d lacks %q in its warnings:\n%s", res.StatusCode, want, warnings)
	}
	if strings.Count(warnings, "<li>") != 2 || !strings.Contains(warnings, "<li>argocd/other (cluster prod) was not checked: a Helm chart from another repository</li>") {
		t.Errorf("the app that was not checked is not said to be that alone:\n%s", warnings)
	}
}

// completedCheck stores a completed check of the pull request key at head with
// res as its result, and returns its id.
func (e *env) completedCheck(t *testing.T, key, head string, res prcheck.Result) string {
	t.Helper()
	ctx := t.Context()
	c, err := e.db.BeginPullCheck(ctx, store.PullCheck{InstallationID: 1, Repo: repoName, RepoURL: "https://github.example/" + repoName, Key: key,
		BaseBranch: "main", BaseSHA: "1111111111111111111111111111111111111111", HeadSHA: head})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.db.FinishPullCheck(ctx, c.ID, store.PullCheckCompleted, res.Conclusion, "", raw); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// TestCheckPageSaysTheBaseMoved: a check whose base branch moved after it says,
// before its outcome, the base commit it ran against, the commit the branch moved
// to for its render and for its policy, each linked on GitHub, and what to do; a
// check running when the branch moved says it is judged when it completes; a
// check whose base did not move says nothing of it.
func TestCheckPageSaysTheBaseMoved(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	const (
		base      = "1111111111111111111111111111111111111111"
		rendered  = "6666666666666666666666666666666666666666"
		policyNow = "7777777777777777777777777777777777777777"
		repoURL   = "https://github.example/acme/deploy"
	)
	id := e.completedCheck(t, "pull/10", "8888888888888888888888888888888888888888", prcheck.Result{Title: "1 Applications affected, 1 change in the cluster", Conclusion: "success",
		Policy: &prcheck.ResultPolicy{Title: "1 Applications meet the policy", Conclusion: "success", DefaultBranch: "main", Configured: true}})
	_, res, body := e.signInAt(t, reader, web.CheckPathPrefix+id)
	if res.StatusCode != http.StatusOK || strings.Contains(body, `<section id="stale">`) {
		t.Fatalf("the page of a check whose base did not move: %d:\n%s", res.StatusCode, body)
	}

	if ok, err := e.db.MarkPullCheckBaseMoved(ctx, id, rendered); err != nil || !ok {
		t.Fatalf("mark: %v %v", ok, err)
	}
	if ok, err := e.db.MarkPullCheckPolicyMoved(ctx, id, policyNow); err != nil || !ok {
		t.Fatalf("mark the policy: %v %v", ok, err)
	}
	browser, res, body := e.signInAt(t, reader, web.CheckPathPrefix+id)
	stale, _, _ := strings.Cut(body, `<section id="decision">`)
	_, stale, found := strings.Cut(stale, `<section id="stale">`)
	if res.StatusCode != http.StatusOK || !found {
		t.Fatalf("the page of a check whose base moved has no stale section before its outcome: %d:\n%s", res.StatusCode, body)
	}
	for _, want := range []string{
		`rendered the pull request against <code>main</code> at <a href="` + repoURL + `/commit/` + base + `"><code>1111111</code></a>`,
		`has since moved to <a href="` + repoURL + `/commit/` + rendered + `"><code>6666666</code></a>`,
		"Update the branch (merge or rebase <code>main</code>)",
		`before it moved to <a href="` + repoURL + `/commit/` + policyNow + `"><code>7777777</code></a>, which changed <code>.kukie.yml</code>`,
		"Re-run the check",
	} {
		if !strings.Contains(stale, want) {
			t.Errorf("the stale section lacks %q:\n%s", want, stale)
		}
	}

	running, err := e.db.BeginPullCheck(ctx, store.PullCheck{InstallationID: 1, Repo: repoName, RepoURL: repoURL, Key: "pull/11",
		BaseBranch: "main", BaseSHA: base, HeadSHA: "9999999999999999999999999999999999999999"})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.db.MarkPullCheckMovedWhileRunning(ctx, running.ID, rendered); err != nil || !ok {
		t.Fatalf("mark the running check: %v %v", ok, err)
	}
	res, body = get(t, browser, e.srv.URL+web.CheckPathPrefix+running.ID)
	want := `<code>main</code> moved to <a href="` + repoURL + `/commit/` + rendered + `"><code>6666666</code></a> while this check runs against <a href="` + repoURL + `/commit/` + base + `"><code>1111111</code></a>`
	if res.StatusCode != http.StatusOK || !strings.Contains(body, want) || strings.Contains(body, "Update the branch") {
		t.Fatalf("the running check's page %d lacks %q or says more:\n%s", res.StatusCode, want, body)
	}
}

// TestCheckPageSaysWhatItCouldNotJudge: a check that could not judge, as it
// completed, whether its base moved under it says so and what tells it, before its
// outcome; the policy run of a check into main whose policy is another branch's
// says that branch moved.
func TestCheckPageSaysWhatItCouldNotJudge(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	id := e.completedCheck(t, "pull/12", "8888888888888888888888888888888888888888", prcheck.Result{Title: "1 Applications affected, 1 change in the cluster", Conclusion: "success",
		Policy: &prcheck.ResultPolicy{Title: "1 Applications meet the policy", Conclusion: "success", DefaultBranch: "trunk", Configured: true}})
	if err := e.db.SetPullCheckMovesPending(ctx, id, true); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.db.MarkPullCheckPolicyMoved(ctx, id, "7777777777777777777777777777777777777777"); err != nil || !ok {
		t.Fatalf("mark the policy: %v %v", ok, err)
	}
	_, res, body := e.signInAt(t, reader, web.CheckPathPrefix+id)
	stale, _, _ := strings.Cut(body, `<section id="decision">`)
	_, stale, found := strings.Cut(stale, `<section id="stale">`)
	if res.StatusCode != http.StatusOK || !found {
		t.Fatalf("the page of a check whose base moves are owed has no stale section before its outcome: %d:\n%s", res.StatusCode, body)
	}
	for _, want := range []string{
		"Whether <code>main</code> moved under this check could not be told when it completed",
		"the next push to <code>main</code> tells whether the branch has since moved",
		"The policy was read from <code>trunk</code> before it moved",
	} {
		if !strings.Contains(stale, want) {
			t.Errorf("the stale section lacks %q:\n%s", want, stale)
		}
	}
}
