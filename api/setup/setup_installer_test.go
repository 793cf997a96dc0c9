package setup_test

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// wantNotBound fails the test when the installation is bound to any team.
func wantNotBound(t *testing.T, db *store.DB, installationID int64) {
	t.Helper()
	if inst, err := db.InstallationByGitHubID(context.Background(), installationID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("installation %d got bound: %+v, %v", installationID, inst, err)
	}
}

// wantStateSpent fails the test unless state was consumed: a second use, with a
// valid code of a person who can access the installation, is refused as used.
func wantStateSpent(t *testing.T, e *env, state string, installationID int64) {
	t.Helper()
	status, page := e.callback("installation_id=" + itoa(installationID) + "&setup_action=install&state=" + state +
		"&code=" + e.code(e.tokenA, installationID))
	if status != http.StatusBadRequest || !strings.Contains(page, "expired or was already used") {
		t.Errorf("second use of the state = %d, want 400 already used\n%s", status, page)
	}
}

func TestSetupRefusesAnInstallerWhoCannotAccessTheInstallation(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "victim", "deploy", nil, "main")
		id := e.install(e.tokenA, "victim", "deploy")
		// alice installed it, and has since left victim.
		e.gh.RevokeInstallationAccess(t, e.installer(e.tokenA), id)
		state := e.state(e.tokenA)
		e.gh.ResetRequestCounts()

		status, page := e.callback("installation_id=" + itoa(id) + "&setup_action=install&state=" + state +
			"&code=" + e.gh.AuthorizationCode(t, e.installer(e.tokenA)))
		if status != http.StatusForbidden || !strings.Contains(page, "Your GitHub account cannot access this installation") {
			t.Fatalf("callback = %d, want 403\n%s", status, page)
		}
		wantNotBound(t, db, id)
		if n := e.gh.RequestCount("GET /app/installations/{installation_id}"); n != 0 {
			t.Errorf("the installation was confirmed with the App's JWT %d times after the installer check failed, want 0", n)
		}
		if n := e.gh.RequestCount("GET /user/installations"); n != 1 {
			t.Errorf("the installer's installations were listed %d times, want once", n)
		}
		list, err := db.ListInstallations(context.Background(), e.teamA.ID)
		if err != nil || len(list) != 0 {
			t.Errorf("team-a's installations = %+v, %v; want none", list, err)
		}
		wantStateSpent(t, e, state, id)
	})
}

func TestSetupWithoutCodeIsRefusedBeforeAskingGitHub(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		id := e.install(e.tokenA, "acme", "deploy")

		for _, action := range []string{"install", "update"} {
			t.Run(action, func(t *testing.T) {
				state := e.state(e.tokenA)
				e.gh.ResetRequestCounts()
				status, page := e.callback("installation_id=" + itoa(id) + "&setup_action=" + action + "&state=" + state)
				if status != http.StatusBadRequest || !strings.Contains(page, "authorization_code_missing") {
					t.Fatalf("callback without code = %d, want 400 authorization_code_missing\n%s", status, page)
				}
				if n := e.gh.TotalRequests(); n != 0 {
					t.Errorf("a callback without code made %d requests to GitHub (%v), want 0", n, e.gh.RequestCounts())
				}
				wantNotBound(t, db, id)
				wantStateSpent(t, e, state, id)
			})
		}
	})
}

func TestSetupRefusesCodesGitHubWouldRefuse(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		e.gh.CreateRepo(t, "acme", "infra", nil, "main")
		first := e.install(e.tokenA, "acme", "deploy")
		id := e.install(e.tokenA, "acme", "infra")

		used := e.code(e.tokenA, first)
		if status, page := e.callback("installation_id=" + itoa(first) + "&setup_action=install&state=" + e.state(e.tokenA) + "&code=" + used); status != http.StatusOK {
			t.Fatalf("first bind: %d\n%s", status, page)
		}

		cases := map[string]func() string{
			"reused code": func() string { return used },
			"forged code": func() string { return "0123456789abcdef0123" },
			"expired code": func() string {
				code := e.code(e.tokenA, id)
				e.gh.Clock().Advance(11 * time.Minute)
				return code
			},
		}
		for name, code := range cases {
			t.Run(name, func(t *testing.T) {
				e.gh.GrantInstallationAccess(t, e.installer(e.tokenA), id)
				state := e.state(e.tokenA)
				status, page := e.callback("installation_id=" + itoa(id) + "&setup_action=install&state=" + state + "&code=" + code())
				if status != http.StatusBadRequest || !strings.Contains(page, "GitHub did not accept the authorization code") {
					t.Fatalf("callback = %d, want 400 code refused\n%s", status, page)
				}
				wantNotBound(t, db, id)
			})
		}
	})
}

func TestSetupWithAWrongClientSecretSaysTheServiceIsMisconfigured(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		wrong := secret.New("not-the-apps-client-secret")
		e.api.Installer = e.installerCheck(wrong)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		id := e.install(e.tokenA, "acme", "deploy")
		state := e.state(e.tokenA)
		e.gh.ResetRequestCounts()

		status, page := e.callback("installation_id=" + itoa(id) + "&setup_action=install&state=" + state + "&code=" + e.code(e.tokenA, id))
		if status != http.StatusInternalServerError || !strings.Contains(page, "This service is misconfigured") ||
			!strings.Contains(page, "client secret") {
			t.Fatalf("callback = %d, want 500 naming the client secret\n%s", status, page)
		}
		wantNotBound(t, db, id)
		if n := e.gh.RequestCount("GET /user/installations") + e.gh.RequestCount("GET /app/installations/{installation_id}"); n != 0 {
			t.Errorf("%d further GitHub calls after the exchange failed (%v), want 0", n, e.gh.RequestCounts())
		}
		logs := e.logs.String()
		if !strings.Contains(logs, "incorrect_client_credentials") {
			t.Errorf("the log does not say why GitHub refused:\n%s", logs)
		}
		if strings.Contains(logs, wrong.Reveal()) {
			t.Error("the log contains the client secret")
		}
	})
}

func TestSetupNeverLogsTheUserTokenOrTheCode(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		id := e.install(e.tokenA, "acme", "deploy")
		code := e.code(e.tokenA, id)
		if status, page := e.callback("installation_id=" + itoa(id) + "&setup_action=install&state=" + e.state(e.tokenA) + "&code=" + code); status != http.StatusOK {
			t.Fatalf("callback = %d\n%s", status, page)
		}
		// A refused one too: its errors are logged.
		if status, _ := e.callback("installation_id=" + itoa(id) + "&setup_action=install&state=" + e.state(e.tokenA) + "&code=" + code); status != http.StatusBadRequest {
			t.Fatalf("reused code = %d, want 400", status)
		}
		logs := e.logs.String()
		if !strings.Contains(logs, "Installation bound to team") {
			t.Fatalf("the logs were not captured:\n%s", logs)
		}
		if regexp.MustCompile(`ghu_[A-Za-z0-9]+`).MatchString(logs) {
			t.Errorf("the logs contain a user access token:\n%s", logs)
		}
		for name, value := range map[string]string{"authorization code": code, "client secret": e.gh.ClientSecret().Reveal()} {
			if strings.Contains(logs, value) {
				t.Errorf("the logs contain the %s", name)
			}
		}
	})
}

func TestSetupWithoutInstallerCheckBindsAndWarnsEachTime(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, withoutInstallerCheck())
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		id := e.install(e.tokenA, "acme", "deploy")
		e.gh.ResetRequestCounts()

		status, page := e.callback("installation_id=" + itoa(id) + "&setup_action=install&state=" + e.state(e.tokenA))
		if status != http.StatusOK {
			t.Fatalf("callback = %d\n%s", status, page)
		}
		if n := e.gh.RequestCount("POST /login/oauth/access_token") + e.gh.RequestCount("GET /user/installations"); n != 0 {
			t.Errorf("%d installer-check calls without client credentials, want 0", n)
		}
		warning := regexp.MustCompile(`"level":"warn"[^\n]*INSECURE: binding without checking that the installer can access the installation`)
		if !warning.MatchString(e.logs.String()) {
			t.Errorf("no INSECURE warning logged with the bind:\n%s", e.logs.String())
		}
	})
}
