package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/leakscan"
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
