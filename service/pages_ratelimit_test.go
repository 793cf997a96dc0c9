package service

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
	"github.com/kukie/kukie-gitops/web"
)

// TestServicePagesAreLimitedPerSignedInPerson: the service New builds limits each
// signed-in person's pages by rate_limits.user_pages_*: a person signed in through
// the service's own sign-in (the fake GitHub's authorize page, the callback, the
// sealed session cookie it sets) is answered 429 with Retry-After and the page
// saying when to come back once the burst is spent, without GitHub being asked,
// while a colleague signed in the same way still sees the change.
func TestServicePagesAreLimitedPerSignedInPerson(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		gh := githubtest.New(t)
		const repo, reader, colleague = "acme/deploy", "rita", "carol"
		gh.CreateRepo(t, "acme", "deploy", map[string]string{"apps/web/kustomization.yaml": "resources: [deploy.yaml]\n"}, "main")
		gh.CreateInstallation(t, "acme", "deploy")
		for _, login := range []string{reader, colleague} {
			gh.AddUser(login)
			gh.SetPermission(t, repo, login, githubtest.RoleRead)
		}

		// The pages need the address they are served on (the public URL, the
		// callback's base) before New, so the handler is swapped in once built.
		var handler atomic.Pointer[http.Handler]
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
		t.Cleanup(srv.Close)
		gh.AddCallbackURL(srv.URL + web.CallbackPath)

		cfg := config.Default()
		cfg.Server.PublicURL = srv.URL
		cfg.GitHub.AppID, cfg.GitHub.PrivateKey = gh.AppID(), gh.PrivateKeyPEM()
		cfg.GitHub.APIURL, cfg.GitHub.WebURL = gh.APIURL(), gh.URL()
		cfg.GitHub.ClientID, cfg.GitHub.ClientSecret = gh.ClientID(), gh.ClientSecret()
		cfg.Pipeline.CacheDir = t.TempDir()
		// One a minute after the burst: no refill within the test.
		cfg.RateLimits.UserPagesPerMinute, cfg.RateLimits.UserPagesBurst = 1, 3
		svc, err := New(ctx, cfg, db, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		h := svc.Handler()
		handler.Store(&h)

		team, err := db.CreateTeam(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		const code = "K7PX2M"
		if _, _, err := db.CreatePlan(ctx, store.Plan{Code: code, TeamID: team.ID, Cluster: "prod", Status: "pr_open", Path: "git",
			Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "web"},
			Change: json.RawMessage(`{"type":"replicas","replicas":3}`), Reason: "more traffic",
			RequestedBy: "chat:bob", Repo: repo, BaseBranch: "main", Branch: "kukie/" + code},
			store.PlanEvent{Actor: "chat:bob", Message: "requested"}); err != nil {
			t.Fatal(err)
		}
		page := srv.URL + web.ChangePathPrefix + code

		// signIn opens the page in a new browser, which the service sends to GitHub,
		// authorizes the App there as login, and follows GitHub's redirect back
		// through the service's callback to the page.
		signIn := func(login string) (*http.Client, *http.Response, string) {
			t.Helper()
			jar, err := cookiejar.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			browser := &http.Client{Jar: jar}
			res, body := fetchPage(t, browser, page)
			if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Request.URL.String(), gh.URL()+"/login/oauth/authorize") {
				t.Fatalf("the page without a session ended at %d %s:\n%s", res.StatusCode, res.Request.URL, body)
			}
			q := res.Request.URL.Query()
			res, err = browser.PostForm(gh.URL()+"/login/oauth/authorize", url.Values{"client_id": {q.Get("client_id")},
				"redirect_uri": {q.Get("redirect_uri")}, "state": {q.Get("state")}, "login": {login}})
			if err != nil {
				t.Fatal(err)
			}
			body = readAll(t, res)
			if res.Request.URL.String() != page {
				t.Fatalf("the sign-in of %s ended at %d %s:\n%s", login, res.StatusCode, res.Request.URL, body)
			}
			return browser, res, body
		}
		shows := func(body string) bool { return strings.Contains(body, code) && strings.Contains(body, "more traffic") }

		// The page the sign-in comes back to is the first of the burst.
		browser, res, body := signIn(reader)
		if res.StatusCode != http.StatusOK || !shows(body) {
			t.Fatalf("after sign-in: %d\n%s", res.StatusCode, body)
		}
		if cookies := browser.Jar.Cookies(res.Request.URL); len(cookies) != 1 || cookies[0].Name != "kukie_session" {
			t.Fatalf("the browser holds %v after sign-in, want the session cookie alone", cookies)
		}
		for i := 2; i <= int(cfg.RateLimits.UserPagesBurst); i++ {
			if res, body := fetchPage(t, browser, page); res.StatusCode != http.StatusOK || !shows(body) {
				t.Fatalf("page %d, within the burst of %d: %d\n%s", i, cfg.RateLimits.UserPagesBurst, res.StatusCode, body)
			}
		}
		asked := gh.RequestCount("GET /repos/{owner}/{repo}")
		res, body = fetchPage(t, browser, page)
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "60" {
			t.Errorf("past the person's burst: %d, Retry-After %q; want 429 and 60 (one a minute)\n%s", res.StatusCode, res.Header.Get("Retry-After"), body)
		}
		if want := "(3 at once, 1 a minute). Open this page again in 60 s."; !strings.Contains(body, "Too many pages") || !strings.Contains(body, want) || shows(body) {
			t.Errorf("past the limit the page shows, want %q and not the change:\n%s", want, body)
		}
		if n := gh.RequestCount("GET /repos/{owner}/{repo}") - asked; n != 0 {
			t.Errorf("GitHub was asked %d times for the refused page", n)
		}

		other, res, body := signIn(colleague)
		if res.StatusCode != http.StatusOK || !shows(body) {
			t.Fatalf("a colleague after sign-in: %d\n%s", res.StatusCode, body)
		}
		if res, body := fetchPage(t, other, page); res.StatusCode != http.StatusOK || !shows(body) {
			t.Errorf("the colleague's second page: %d\n%s", res.StatusCode, body)
		}
	})
}

// fetchPage gets u with the browser c, following redirects, and reads the answer.
func fetchPage(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	return res, readAll(t, res)
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
