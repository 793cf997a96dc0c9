package setup_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// wantBoundTo fails the test unless the installation is bound to team.
func wantBoundTo(t *testing.T, db *store.DB, installationID int64, team store.Team) {
	t.Helper()
	inst, err := db.InstallationByGitHubID(context.Background(), installationID)
	if err != nil || inst.TeamID != team.ID {
		t.Errorf("installation %d bound to %+v, %v; want team %s", installationID, inst, err, team.Name)
	}
}

// query is the setup callback's query GitHub sends back the team's installer with
// after the setup step action: a fresh state of the team and their authorization code.
func (e *env) query(token secret.Secret, installationID int64, action string) string {
	e.t.Helper()
	return "installation_id=" + itoa(installationID) + "&setup_action=" + action + "&state=" + e.state(token) +
		"&code=" + e.gh.AuthorizationCode(e.t, e.installer(token))
}

// wantBinds fails the test unless the whole setup flow as token's team binds the
// installation to team.
func (e *env) wantBinds(token secret.Secret, installationID int64, team store.Team) {
	e.t.Helper()
	if status, page := e.bind(token, installationID); status != http.StatusOK {
		e.t.Fatalf("bind = %d, want 200\n%s", status, page)
	}
	wantBoundTo(e.t, e.db, installationID, team)
}

// wantBindRefusedAudit fails the test unless a refused bind of the installation was
// audited with code.
func wantBindRefusedAudit(t *testing.T, db *store.DB, installationID int64, code string) {
	t.Helper()
	events, err := db.ListAuditEvents(context.Background(), store.AuditFilter{SubjectType: "installation", SubjectID: itoa(installationID)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Action == "installation.bind_refused" && strings.Contains(string(ev.Detail), code) {
			return
		}
	}
	t.Errorf("no installation.bind_refused audit event with %s among %+v", code, events)
}

// installUnhandled has the team's installer install the App on acme/deploy; the
// service stores GitHub's installation webhook but has not handled it yet.
func (e *env) installUnhandled(token secret.Secret) int64 {
	e.t.Helper()
	e.gh.CreateRepo(e.t, "acme", "deploy", nil, "main")
	id := e.gh.CreateInstallationBy(e.t, e.installer(token), "acme", "deploy")
	e.gh.WaitForDeliveries()
	return id
}

// A member of an organization who can access one of its repositories can access its
// installation (GET /user/installations lists it), but did not install it: with their
// own team's valid state and their own authorization code, they cannot bind it.
func TestSetupRefusesAnOrganizationMemberWhoDidNotInstall(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		id := e.install(e.tokenA, "acme", "deploy") // alice installs it
		state := e.state(e.tokenB)
		code := e.code(e.tokenB, id) // bob can access it, as a member of acme
		e.gh.ResetRequestCounts()

		query := "installation_id=" + itoa(id) + "&setup_action=install&state=" + state + "&code=" + code
		status, page := e.callback(query)
		if status != http.StatusForbidden || !strings.Contains(page, "NotTheInstaller") ||
			!strings.Contains(page, "Only the person who installed the app can connect it") {
			t.Fatalf("callback = %d, want 403 NotTheInstaller\n%s", status, page)
		}
		wantNotBound(t, db, id)
		wantBindRefusedAudit(t, db, id, "NotTheInstaller")
		if n := e.gh.RequestCount("GET /app/installations/{installation_id}"); n != 0 {
			t.Errorf("the installation was confirmed %d times after the installer check failed, want 0", n)
		}
		// Replayed as it was, the callback's state is spent.
		if status, page := e.callback(query); status != http.StatusBadRequest || !strings.Contains(page, "expired or was already used") {
			t.Errorf("replayed callback = %d, want 400 already used\n%s", status, page)
		}
		wantNotBound(t, db, id)

		// The installer binds it.
		e.wantBinds(e.tokenA, id, e.teamA)
	})
}

// When a member asks to install the App and an organization owner approves, GitHub's
// "created" webhook names the owner as sender and the member as requester: the
// member, who asked on behalf of their team, binds it.
func TestSetupBindsForTheMemberWhoseRequestAnOwnerApproved(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		id := e.gh.ApproveInstallationRequest(t, "acme-owner", e.installer(e.tokenB), "acme", "deploy")
		e.drain()
		if status, page := e.callback(e.query(e.tokenB, id, "update")); status != http.StatusOK {
			t.Fatalf("the requester's bind = %d\n%s", status, page)
		}
		wantBoundTo(t, db, id, e.teamB)
	})
}

// GitHub sends the browser back and the installation webhook at about the same time:
// a callback that comes first waits for the webhook, and binds once it is handled.
func TestSetupWaitsForTheInstallationWebhook(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		// Far longer than the test takes: the webhook is handled while it waits.
		e.api.InstallerWait = 2 * time.Minute
		id := e.installUnhandled(e.tokenA)
		query := e.query(e.tokenA, id, "install")
		e.gh.ResetRequestCounts()

		var (
			status int
			page   string
		)
		done := make(chan struct{})
		go func() {
			defer close(done)
			status, page = e.callback(query)
		}()
		// Once the callback has asked who the person is, it is at the installer step.
	waiting:
		for e.gh.RequestCount("GET /user") == 0 {
			select {
			case <-done:
				break waiting
			case <-time.After(5 * time.Millisecond):
			}
		}
		e.drain()
		<-done
		if status != http.StatusOK {
			t.Fatalf("callback = %d, want 200 once the webhook is handled\n%s", status, page)
		}
		wantBoundTo(t, db, id, e.teamA)
	})
}

// Without the installation webhook (not handled in time, or the App was installed
// before the service received its webhooks) nobody is known to have installed it:
// the callback binds nothing and says why; a fresh link after it arrives binds.
func TestSetupBeforeTheInstallationWebhookRefusesSayingWhy(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		id := e.installUnhandled(e.tokenA)

		status, page := e.bind(e.tokenA, id)
		if status != http.StatusConflict || !strings.Contains(page, "InstallerUnknown") ||
			!strings.Contains(page, "GitHub has not said who installed the app yet") {
			t.Fatalf("callback = %d, want 409 InstallerUnknown\n%s", status, page)
		}
		wantNotBound(t, db, id)
		wantBindRefusedAudit(t, db, id, "InstallerUnknown")

		e.drain()
		e.wantBinds(e.tokenA, id, e.teamA)
	})
}

// An installation webhook whose signature is not GitHub's names nobody: a member who
// forges one naming themselves as the installer still cannot bind.
func TestSetupIgnoresAForgedInstallationWebhook(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		id := e.installUnhandled(e.tokenA)

		forged, err := json.Marshal(map[string]any{
			"action":       "created",
			"installation": map[string]any{"id": id, "account": map[string]any{"login": "acme"}},
			"sender":       map[string]any{"id": 424242, "login": e.installer(e.tokenB)},
			"requester":    map[string]any{"id": 424242, "login": e.installer(e.tokenB)},
		})
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, e.http.URL+webhook.Path, strings.NewReader(string(forged)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "installation")
		req.Header.Set("X-GitHub-Delivery", "forged-1")
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("forged webhook = %d, want 401", res.StatusCode)
		}
		e.drain()

		status, page := e.callback("installation_id=" + itoa(id) + "&setup_action=install&state=" + e.state(e.tokenB) +
			"&code=" + e.code(e.tokenB, id))
		if status != http.StatusForbidden || !strings.Contains(page, "NotTheInstaller") {
			t.Fatalf("callback = %d, want 403 NotTheInstaller\n%s", status, page)
		}
		wantNotBound(t, db, id)
	})
}
