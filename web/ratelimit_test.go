package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
	"github.com/kukie/kukie-gitops/web"
)

// TestPagesAreLimitedPerPerson: a signed-in person's change and check pages share
// one limit; past it the (N+1)th page is answered 429 with Retry-After and a page
// saying when to come back, before GitHub is asked anything, while another person
// still sees the pages and a browser without a session is still sent to sign in.
func TestPagesAreLimitedPerPerson(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		const burst = 3
		// One a minute after the burst: no refill within the test.
		limit, err := ratelimit.New("pages for this person", 1, burst)
		if err != nil {
			t.Fatal(err)
		}
		e := newEnvOn(t, db, false, limit)
		const colleague = "carol"
		e.gh.AddUser(colleague)
		e.gh.SetPermission(t, repoName, colleague, githubtest.RoleRead)
		change, check := e.srv.URL+web.ChangePathPrefix+e.code, e.srv.URL+web.CheckPathPrefix+e.check

		// The sign-in ends on the change's page: the first of the burst.
		browser, res, body := e.signIn(t, reader)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, gitDiffLine) {
			t.Fatalf("after sign-in: %d\n%s", res.StatusCode, body)
		}
		for i, u := range []string{check, change}[:burst-1] {
			if res, body := get(t, browser, u); res.StatusCode != http.StatusOK {
				t.Fatalf("page %d, within the burst of %d: %d\n%s", i+2, burst, res.StatusCode, body)
			}
		}
		asked := e.gh.RequestCount("GET /repos/{owner}/{repo}")
		for _, u := range []string{change, check} {
			res, body := get(t, browser, u)
			if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "60" {
				t.Errorf("%s past the person's limit: %d, Retry-After %q; want 429 and 60 (one a minute)", u, res.StatusCode, res.Header.Get("Retry-After"))
			}
			if !strings.Contains(body, "Open this page again in 60 s") || strings.Contains(body, gitDiffLine) {
				t.Errorf("%s past the limit shows:\n%s", u, body)
			}
		}
		if n := e.gh.RequestCount("GET /repos/{owner}/{repo}") - asked; n != 0 {
			t.Errorf("GitHub was asked %d times for the refused pages", n)
		}

		other, res, body := e.signIn(t, colleague)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, gitDiffLine) {
			t.Fatalf("another person after sign-in: %d\n%s", res.StatusCode, body)
		}
		if res, body := get(t, other, check); res.StatusCode != http.StatusOK {
			t.Fatalf("another person's check page: %d\n%s", res.StatusCode, body)
		}
		// A new browser of no one: sent to GitHub to sign in, which signIn checks.
		e.signIn(t, reader)
	})
}
