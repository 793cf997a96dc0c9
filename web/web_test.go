package web_test

import (
	"context"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/internal/leakscan"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/web"
)

// signIn opens the change's page in a new browser (a cookie jar) and signs in on the
// fake GitHub as login, returning the browser and the last answer.
func (e *env) signIn(t *testing.T, login string) (*http.Client, *http.Response, string) {
	t.Helper()
	return e.signInAt(t, login, web.ChangePathPrefix+e.code)
}

// signInAt is signIn starting at the page path.
func (e *env) signInAt(t *testing.T, login, path string) (*http.Client, *http.Response, string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The test server's client trusts its certificate when it serves https.
	browser := &http.Client{Jar: jar, Transport: e.srv.Client().Transport}
	res, body := get(t, browser, e.srv.URL+path)
	// The page sent the browser to GitHub's authorize page.
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Request.URL.String(), e.gh.URL()+"/login/oauth/authorize") {
		t.Fatalf("opening the page without a session ended at %d %s:\n%s", res.StatusCode, res.Request.URL, body)
	}
	q := res.Request.URL.Query()
	if q.Get("client_id") != e.gh.ClientID() || q.Get("redirect_uri") != e.srv.URL+web.CallbackPath || q.Get("state") == "" {
		t.Fatalf("authorize request %s", res.Request.URL)
	}
	res, err = browser.PostForm(e.gh.URL()+"/login/oauth/authorize", url.Values{"client_id": {q.Get("client_id")},
		"redirect_uri": {q.Get("redirect_uri")}, "state": {q.Get("state")}, "login": {login}})
	if err != nil {
		t.Fatal(err)
	}
	return browser, res, readBody(t, res)
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	return res, readBody(t, res)
}

func readBody(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	// html/template writes some characters of the diffs ("+") as entities.
	return html.UnescapeString(string(b))
}

func cookieNamed(res *http.Response, name string) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestSignInShowsTheChangeToAReader(t *testing.T) {
	e := newEnv(t)
	browser, res, body := e.signIn(t, reader)
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != web.ChangePathPrefix+e.code {
		t.Fatalf("after sign-in: %d at %s:\n%s", res.StatusCode, res.Request.URL, body)
	}
	for _, want := range []string{
		"Change <code>" + e.code + "</code>", "release 1.4.2", "chat:bob", // the request
		"Path <strong>git</strong>",                         // the decision
		"the image tag is not pinned by digest",             // warnings
		`<span class="add">` + gitDiffLine + `</span>`,      // the git diff
		"Application <code>web</code>", "image: web:v1.4.2", // the cluster diff
		"<strong>synced</strong>", "abc123", // deployment
		"requested", // history
		"Signed in as <strong>" + reader + "</strong>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "ghu_") {
		t.Error("the page shows the user's token")
	}
	// The session lives in the browser: the page opens again without GitHub.
	before := e.gh.RequestCount("POST /login/oauth/access_token")
	again, body := get(t, browser, e.srv.URL+web.ChangePathPrefix+e.code)
	if again.StatusCode != http.StatusOK || !strings.Contains(body, gitDiffLine) || e.gh.RequestCount("POST /login/oauth/access_token") != before {
		t.Errorf("second visit: %d, %d token exchanges", again.StatusCode, e.gh.RequestCount("POST /login/oauth/access_token")-before)
	}
	if res.Header.Get("Cache-Control") != "no-store" || !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("page headers %v", res.Header)
	}
}

func TestSessionCookieIsHttpOnlyLaxAndSealed(t *testing.T) {
	e := newEnv(t)
	jar, _ := cookiejar.New(nil)
	c := noRedirects(jar)
	res, _ := get(t, c, e.srv.URL+web.ChangePathPrefix+e.code)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("without a session: %d", res.StatusCode)
	}
	started := res
	auth, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	state := cookieNamed(res, "kukie_oauth_state")
	if state == nil || !state.HttpOnly || state.SameSite != http.SameSiteLaxMode || strings.Contains(state.Value, auth.Query().Get("state")) {
		t.Fatalf("state cookie %+v", state)
	}
	code := e.gh.AuthorizationCode(t, reader)
	res, _ = get(t, c, e.srv.URL+web.CallbackPath+"?"+url.Values{"code": {code}, "state": {auth.Query().Get("state")}}.Encode())
	session := cookieNamed(res, "kukie_session")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != web.ChangePathPrefix+e.code || session == nil {
		t.Fatalf("callback: %d to %q, session %+v", res.StatusCode, res.Header.Get("Location"), session)
	}
	// The answers that set the state and the session (the token, sealed) are not
	// stored by any cache on the way (failed before: no Cache-Control).
	if got := res.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("the callback's answer setting the session has Cache-Control %q, want no-store", got)
	}
	if got := started.Header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("the answer starting a sign-in has Cache-Control %q, want no-store", got)
	}
	if !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Secure ||
		!session.Expires.After(time.Now().Add(web.SessionLifetime-time.Minute)) {
		t.Errorf("session cookie %+v", session)
	}
	if strings.Contains(session.Value, "ghu_") || strings.Contains(session.Value, reader) {
		t.Errorf("session cookie shows its content: %q", session.Value)
	}
	// The state is spent.
	if s := cookieNamed(res, "kukie_oauth_state"); s == nil || s.MaxAge >= 0 {
		t.Errorf("state cookie not cleared: %+v", s)
	}
	// An altered session is no session.
	jar2, _ := cookiejar.New(nil)
	u, _ := url.Parse(e.srv.URL)
	jar2.SetCookies(u, []*http.Cookie{{Name: "kukie_session", Value: session.Value[:len(session.Value)-2] + "AA"}})
	if res, _ := get(t, noRedirects(jar2), e.srv.URL+web.ChangePathPrefix+e.code); res.StatusCode != http.StatusSeeOther {
		t.Errorf("altered session: %d, want a new sign-in", res.StatusCode)
	}
}

func TestCookiesAreSecureOverHTTPS(t *testing.T) {
	e := newEnv(t)
	key, err := web.SessionKey(e.gh.ClientSecret())
	if err != nil {
		t.Fatal(err)
	}
	pages, err := web.New(web.Deps{Plans: e.db, SignIn: stubSignIn{}, PublicURL: "https://kukie.example.com", SessionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	pages.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, web.ChangePathPrefix+e.code, nil))
	res := rec.Result()
	state := cookieNamed(res, "__Host-kukie_oauth_state")
	if res.StatusCode != http.StatusSeeOther || state == nil || !state.Secure || state.Path != "/" || state.Domain != "" {
		t.Fatalf("%d, state cookie %+v", res.StatusCode, state)
	}
	if loc := res.Header.Get("Location"); !strings.Contains(loc, url.QueryEscape("https://kukie.example.com"+web.CallbackPath)) {
		t.Errorf("authorize URL %q lacks the callback URL", loc)
	}
}

func TestCallbackRefusesAStateThisBrowserWasNotSent(t *testing.T) {
	e := newEnv(t)
	// The victim starts a sign-in; the attacker starts one of their own and hands
	// the victim the callback link GitHub gave them (login CSRF).
	victimJar, _ := cookiejar.New(nil)
	victim := noRedirects(victimJar)
	if res, _ := get(t, victim, e.srv.URL+web.ChangePathPrefix+e.code); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("victim's start: %d", res.StatusCode)
	}
	attackerJar, _ := cookiejar.New(nil)
	res, _ := get(t, noRedirects(attackerJar), e.srv.URL+web.ChangePathPrefix+e.code)
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	attackerState := loc.Query().Get("state")
	cases := map[string]url.Values{
		"another browser's state": {"code": {e.gh.AuthorizationCode(t, outsider)}, "state": {attackerState}},
		"no state":                {"code": {e.gh.AuthorizationCode(t, outsider)}},
	}
	for name, q := range cases {
		t.Run(name, func(t *testing.T) {
			before := e.gh.RequestCount("POST /login/oauth/access_token")
			res, body := get(t, victim, e.srv.URL+web.CallbackPath+"?"+q.Encode())
			if res.StatusCode != http.StatusBadRequest || cookieNamed(res, "kukie_session") != nil && cookieNamed(res, "kukie_session").Value != "" {
				t.Errorf("callback: %d, cookies %v:\n%s", res.StatusCode, res.Cookies(), body)
			}
			if n := e.gh.RequestCount("POST /login/oauth/access_token") - before; n != 0 {
				t.Errorf("the code was exchanged %d times", n)
			}
		})
	}
	// A state cookie without a sign-in of its own is refused as well.
	fresh, _ := cookiejar.New(nil)
	if res, _ := get(t, noRedirects(fresh), e.srv.URL+web.CallbackPath+"?state="+attackerState+"&code=x"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("callback without a state cookie: %d", res.StatusCode)
	}
}

func TestExpiredSessionSignsInAgain(t *testing.T) {
	e := newEnv(t)
	browser, res, _ := e.signIn(t, reader)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d", res.StatusCode)
	}
	e.clock.Advance(web.SessionLifetime + time.Second)
	c := noRedirects(browser.Jar)
	res, _ = get(t, c, e.srv.URL+web.ChangePathPrefix+e.code)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), e.gh.URL()+"/login/oauth/authorize") {
		t.Errorf("expired session: %d to %q, want GitHub's authorize page", res.StatusCode, res.Header.Get("Location"))
	}
}

func TestStateExpires(t *testing.T) {
	e := newEnv(t)
	jar, _ := cookiejar.New(nil)
	c := noRedirects(jar)
	res, _ := get(t, c, e.srv.URL+web.ChangePathPrefix+e.code)
	loc, _ := url.Parse(res.Header.Get("Location"))
	e.clock.Advance(11 * time.Minute)
	q := url.Values{"code": {e.gh.AuthorizationCode(t, reader)}, "state": {loc.Query().Get("state")}}
	if res, _ := get(t, c, e.srv.URL+web.CallbackPath+"?"+q.Encode()); res.StatusCode != http.StatusBadRequest {
		t.Errorf("a sign-in older than ten minutes: %d", res.StatusCode)
	}
}

func TestNoReadAccessLooksLikeNoChange(t *testing.T) {
	e := newEnv(t)
	browser, res, body := e.signIn(t, outsider)
	if res.StatusCode != http.StatusNotFound || strings.Contains(body, gitDiffLine) || strings.Contains(body, e.code) {
		t.Fatalf("outsider: %d:\n%s", res.StatusCode, body)
	}
	missing, missingBody := get(t, browser, e.srv.URL+web.ChangePathPrefix+"NOSUCH")
	if missing.StatusCode != http.StatusNotFound || missingBody != body {
		t.Errorf("a change that does not exist answers differently from one the person cannot read:\n%s\n---\n%s", missingBody, body)
	}
	if e.gh.RequestCount("GET /repos/{owner}/{repo}") == 0 {
		t.Error("GitHub was not asked about read access")
	}
	// Losing access takes effect at the next page view.
	readerBrowser, res, _ := e.signIn(t, reader)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("reader: %d", res.StatusCode)
	}
	e.gh.SetPermission(t, repoName, reader, githubtest.RoleNone)
	if res, body := get(t, readerBrowser, e.srv.URL+web.ChangePathPrefix+e.code); res.StatusCode != http.StatusNotFound || strings.Contains(body, gitDiffLine) {
		t.Errorf("after losing access: %d", res.StatusCode)
	}
}

func TestSecretValuesNeverShow(t *testing.T) {
	e := newEnv(t)
	_, res, body := e.signIn(t, reader)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d", res.StatusCode)
	}
	if !strings.Contains(body, "Secret web/web-db") || !strings.Contains(body, "stringData.password") {
		t.Errorf("the page does not say the Secret changes:\n%s", body)
	}
	if leakscan.Matches(body) {
		t.Errorf("the page shows a Secret value:\n%s", body)
	}
}

func TestWithoutSignInSetUpThePageSaysWhy(t *testing.T) {
	e := newEnv(t)
	pages, err := web.New(web.Deps{Plans: e.db, PublicURL: "https://kukie.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	pages.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, web.ChangePathPrefix+e.code, nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "client secret") {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}

// stubSignIn is an OAuth client for a page that never gets past the redirect to
// GitHub.
type stubSignIn struct{}

func (stubSignIn) AuthCodeURL(state, redirectURI string) string {
	return "https://github.example/login/oauth/authorize?" + url.Values{"state": {state}, "redirect_uri": {redirectURI}}.Encode()
}

func (stubSignIn) ExchangeCode(context.Context, secret.Secret) (secret.Secret, error) {
	return "", errors.New("not reached")
}

func (stubSignIn) UserLogin(context.Context, secret.Secret) (string, error) {
	return "", errors.New("not reached")
}

func (stubSignIn) CanReadRepository(context.Context, secret.Secret, string) (bool, error) {
	return false, errors.New("not reached")
}

func (stubSignIn) RevokeToken(context.Context, secret.Secret) error { return errors.New("not reached") }

// TestSignOutRefusesACrossSitePost: a page of another site must not sign a person out
// (its form posting here would clear the session); the service's own sign-out
// button, a same-origin post, does.
func TestSignOutRefusesACrossSitePost(t *testing.T) {
	e := newEnv(t)
	browser, res, body := e.signIn(t, reader)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d\n%s", res.StatusCode, body)
	}
	signOut := func(fetchSite, origin string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/auth/signout", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Sec-Fetch-Site", fetchSite)
		req.Header.Set("Origin", origin)
		res, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, res)
		return res
	}
	res = signOut("cross-site", "https://attacker.example")
	if res.StatusCode != http.StatusForbidden || cookieNamed(res, "kukie_session") != nil {
		t.Fatalf("cross-site sign-out: %d, cookies %v; want 403 and the session kept", res.StatusCode, res.Cookies())
	}
	if again, body := get(t, browser, e.srv.URL+web.ChangePathPrefix+e.code); again.StatusCode != http.StatusOK || !strings.Contains(body, gitDiffLine) {
		t.Fatalf("after a cross-site sign-out the page is %d at %s", again.StatusCode, again.Request.URL)
	}
	res = signOut("same-origin", e.srv.URL)
	if s := cookieNamed(res, "kukie_session"); res.StatusCode != http.StatusOK || s == nil || s.MaxAge >= 0 {
		t.Fatalf("same-origin sign-out: %d, session cookie %+v; want 200 and the session cleared", res.StatusCode, s)
	}
}

// TestCookiesOverHTTPSAreHostOnly: over https the pages' cookies carry the __Host-
// prefix, so a page on a sibling subdomain, which can set a cookie for the whole
// domain but not one of those, cannot plant its own sign-in's state in a victim's
// browser and have the victim finish it (signed in as the attacker).
func TestCookiesOverHTTPSAreHostOnly(t *testing.T) {
	e := newEnvOver(t, true)
	browser, res, body := e.signIn(t, reader)
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != web.ChangePathPrefix+e.code {
		t.Fatalf("sign-in over https: %d at %s:\n%s", res.StatusCode, res.Request.URL, body)
	}
	u, err := url.Parse(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range browser.Jar.Cookies(u) {
		names = append(names, c.Name)
	}
	if !slices.Contains(names, "__Host-kukie_session") || slices.Contains(names, "kukie_session") {
		t.Errorf("cookies over https %v, want the session as __Host-kukie_session", names)
	}

	// The attacker starts a sign-in of their own and keeps the state and its cookie.
	attackerJar, _ := cookiejar.New(nil)
	attacker := noRedirects(attackerJar)
	attacker.Transport = e.srv.Client().Transport
	res, _ = get(t, attacker, e.srv.URL+web.ChangePathPrefix+e.code)
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil || len(res.Cookies()) == 0 {
		t.Fatalf("attacker's start: %d %q, cookies %v", res.StatusCode, res.Header.Get("Location"), res.Cookies())
	}
	var sealedState string
	for _, c := range res.Cookies() {
		if strings.HasSuffix(c.Name, "kukie_oauth_state") {
			sealedState = c.Value
		}
	}
	// A sibling subdomain plants it in the victim's browser under the one name it can
	// set, and sends the victim the callback link with the attacker's code.
	victimJar, _ := cookiejar.New(nil)
	victimJar.SetCookies(u, []*http.Cookie{{Name: "kukie_oauth_state", Value: sealedState, Path: "/"}})
	victim := noRedirects(victimJar)
	victim.Transport = e.srv.Client().Transport
	link := e.srv.URL + web.CallbackPath + "?" + url.Values{"code": {e.gh.AuthorizationCode(t, outsider)}, "state": {loc.Query().Get("state")}}.Encode()
	res, body = get(t, victim, link)
	if res.StatusCode != http.StatusBadRequest || cookieNamed(res, "__Host-kukie_session") != nil || cookieNamed(res, "kukie_session") != nil {
		t.Errorf("callback with a planted state cookie: %d, cookies %v, want 400 and no session:\n%s", res.StatusCode, res.Cookies(), body)
	}
}

// TestSignOutEndsACopiedSession: the session is a sealed cookie the service keeps no
// record of, so signing out must also end a copy of it (one stolen from the
// browser): GitHub revokes its token, and the copy opens no page any more.
func TestSignOutEndsACopiedSession(t *testing.T) {
	e := newEnv(t)
	browser, res, body := e.signIn(t, reader)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %d\n%s", res.StatusCode, body)
	}
	u, err := url.Parse(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	copied, _ := cookiejar.New(nil)
	copied.SetCookies(u, browser.Jar.Cookies(u))
	thief := noRedirects(copied)
	if res, _ := get(t, thief, e.srv.URL+web.ChangePathPrefix+e.code); res.StatusCode != http.StatusOK {
		t.Fatalf("the copied session before sign-out: %d, want the page", res.StatusCode)
	}
	res, err = browser.PostForm(e.srv.URL+"/auth/signout", nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := readBody(t, res); res.StatusCode != http.StatusOK {
		t.Fatalf("sign-out: %d\n%s", res.StatusCode, body)
	}
	if res, body := get(t, thief, e.srv.URL+web.ChangePathPrefix+e.code); res.StatusCode != http.StatusSeeOther || strings.Contains(body, gitDiffLine) {
		t.Errorf("the copied session after sign-out: %d, want a new sign-in\n%s", res.StatusCode, body)
	}
}

// TestDeniedSignInShowsOnlyGitHubsErrorCode: GitHub sends the browser back with
// error=access_denied when the person declines; the page names that code. The
// parameter is in the address bar, so text that is no OAuth error code (a
// sentence planted in a link, kilobytes of it) is not shown at all.
func TestDeniedSignInShowsOnlyGitHubsErrorCode(t *testing.T) {
	e := newEnv(t)
	planted := "Your account is locked, call +1 555 0100 " + strings.Repeat("x", 10000)
	cases := []struct {
		name, error, shown, hidden string
	}{
		{"GitHub's code", "access_denied", "GitHub did not sign you in (access_denied).", ""},
		{"a planted sentence", planted, "GitHub did not sign you in.", "locked"},
		{"markup", "<b>x</b>", "GitHub did not sign you in.", "&lt;b&gt;"},
		{"too long a code", strings.Repeat("a", 65), "GitHub did not sign you in.", "aaaa"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jar, _ := cookiejar.New(nil)
			c := noRedirects(jar)
			res, _ := get(t, c, e.srv.URL+web.ChangePathPrefix+e.code)
			loc, err := url.Parse(res.Header.Get("Location"))
			if err != nil {
				t.Fatal(err)
			}
			q := url.Values{"error": {tc.error}, "state": {loc.Query().Get("state")}}
			res, body := get(t, c, e.srv.URL+web.CallbackPath+"?"+q.Encode())
			if res.StatusCode != http.StatusForbidden || !strings.Contains(body, tc.shown) {
				t.Errorf("callback: %d, want 403 saying %q:\n%.2000s", res.StatusCode, tc.shown, body)
			}
			if tc.hidden != "" && strings.Contains(body, tc.hidden) {
				t.Errorf("the page shows the parameter's text %q:\n%.2000s", tc.hidden, body)
			}
			if len(body) > 8000 {
				t.Errorf("the page is %d bytes long", len(body))
			}
		})
	}
}
