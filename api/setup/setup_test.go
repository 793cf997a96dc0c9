package setup_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestSetupBindsInstallationToTheStatesTeam(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", map[string]string{"README.md": "hi"}, "main")
		e.gh.CreateRepo(t, "acme", "infra", map[string]string{"README.md": "hi"}, "main")
		id := e.install(e.tokenA, "acme", "deploy", "infra")
		e.gh.ResetRequestCounts()

		status, page := e.bind(e.tokenA, id)
		if status != http.StatusOK || !strings.Contains(page, "The app is installed") || !strings.Contains(page, "acme") {
			t.Fatalf("callback = %d\n%s", status, page)
		}
		for _, endpoint := range []string{
			"POST /login/oauth/access_token", "GET /user/installations", "GET /app/installations/{installation_id}",
		} {
			if n := e.gh.RequestCount(endpoint); n != 1 {
				t.Errorf("%s called %d times, want once", endpoint, n)
			}
		}
		inst, err := db.InstallationByGitHubID(context.Background(), id)
		if err != nil || inst.TeamID != e.teamA.ID || inst.Status != store.InstallationActive || inst.AccountLogin != "acme" {
			t.Fatalf("binding = %+v, %v; want active for team-a on acme", inst, err)
		}
		repos, err := db.InstallationRepos(context.Background(), id)
		if err != nil || len(repos) != 2 || repos[0].Repo != e.repoURL("acme/deploy") {
			t.Errorf("installation repos = %+v, %v; want deploy and infra", repos, err)
		}
		// The installation's own "created" webhook, processed later, agrees.
		e.drain()
		inst, _ = db.InstallationByGitHubID(context.Background(), id)
		if inst.Status != store.InstallationActive {
			t.Errorf("after the created webhook: %s, want active", inst.Status)
		}
	})
}

func TestSetupForgedCallbacksBindNothingAndCallGitHubNever(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		e.gh.CreateRepo(t, "other", "deploy", nil, "main")
		idA := e.install(e.tokenA, "acme", "deploy")
		idB := e.install(e.tokenB, "other", "deploy")

		// team-b owns idB through a legitimate flow; its used state is reused below.
		usedState := e.state(e.tokenB)
		if status, page := e.callback("installation_id=" + itoa(idB) + "&setup_action=install&state=" + usedState + "&code=" + e.code(e.tokenB, idB)); status != http.StatusOK {
			t.Fatalf("legitimate bind: %d %s", status, page)
		}
		expired, _, err := db.CreateInstallState(ctx, e.teamA.ID, -time.Second)
		if err != nil {
			t.Fatal(err)
		}

		cases := map[string]struct {
			query      func() string
			wantStatus int
			wantText   string
		}{
			"no state": {
				query:      func() string { return "installation_id=" + itoa(idA) + "&setup_action=install" },
				wantStatus: http.StatusBadRequest, wantText: "has no state",
			},
			"wrong state": {
				query:      func() string { return "installation_id=" + itoa(idA) + "&setup_action=install&state=forged" },
				wantStatus: http.StatusBadRequest, wantText: "expired or was already used",
			},
			"expired state": {
				query: func() string {
					return "installation_id=" + itoa(idA) + "&setup_action=install&state=" + expired.Reveal()
				},
				wantStatus: http.StatusBadRequest, wantText: "expired or was already used",
			},
			"reused state": {
				query:      func() string { return "installation_id=" + itoa(idA) + "&setup_action=install&state=" + usedState },
				wantStatus: http.StatusBadRequest, wantText: "expired or was already used",
			},
			"team-a state, installation of team-b": {
				query: func() string {
					return "installation_id=" + itoa(idB) + "&setup_action=install&state=" + e.state(e.tokenA)
				},
				wantStatus: http.StatusConflict, wantText: "InstallationTaken",
			},
			// GitHub's own redirect after an update on GitHub carries no state: it is
			// answered that nothing more is needed, and changes nothing.
			"update without state": {
				query:      func() string { return "installation_id=" + itoa(idA) + "&setup_action=update" },
				wantStatus: http.StatusOK, wantText: "Nothing more is needed",
			},
			"update with a forged state": {
				query:      func() string { return "installation_id=" + itoa(idB) + "&setup_action=update&state=forged" },
				wantStatus: http.StatusBadRequest, wantText: "expired or was already used",
			},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				// The forger holds a valid authorization code of their own; it must not
				// make the server call GitHub either.
				query := tc.query() + "&code=" + e.gh.AuthorizationCode(t, e.installer(e.tokenA))
				e.gh.ResetRequestCounts()
				status, page := e.callback(query)
				if status != tc.wantStatus || !strings.Contains(page, tc.wantText) {
					t.Errorf("callback = %d, want %d with %q\n%s", status, tc.wantStatus, tc.wantText, page)
				}
				if n := e.gh.TotalRequests(); n != 0 {
					t.Errorf("the forged callback made %d requests to GitHub (%v), want 0", n, e.gh.RequestCounts())
				}
				if _, err := db.InstallationByGitHubID(ctx, idA); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("installation %d got bound: %v", idA, err)
				}
				inst, err := db.InstallationByGitHubID(ctx, idB)
				if err != nil || inst.TeamID != e.teamB.ID {
					t.Errorf("installation %d = %+v, %v; want still team-b's", idB, inst, err)
				}
			})
		}
	})
}

func TestSetupConcurrentBindsByTwoTeamsBindOnce(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		id := e.install(e.tokenA, "acme", "deploy")
		type attempt struct {
			team        store.Team
			state, code string
		}
		// The installer administers both teams and binds with either's state: only
		// the unique binding decides.
		attempts := make([]attempt, 20)
		for i := range attempts {
			if i%2 == 0 {
				attempts[i] = attempt{e.teamA, e.state(e.tokenA), e.code(e.tokenA, id)}
			} else {
				attempts[i] = attempt{e.teamB, e.state(e.tokenB), e.code(e.tokenA, id)}
			}
		}
		statuses := make([]int, len(attempts))
		pages := make([]string, len(attempts))
		var wg sync.WaitGroup
		for i, a := range attempts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i], pages[i] = e.callback("installation_id=" + itoa(id) + "&setup_action=install&state=" + a.state + "&code=" + a.code)
			}()
		}
		wg.Wait()

		inst, err := db.InstallationByGitHubID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		var bindings int
		for _, team := range []store.Team{e.teamA, e.teamB} {
			list, err := db.ListInstallations(context.Background(), team.ID)
			if err != nil {
				t.Fatal(err)
			}
			bindings += len(list)
		}
		if bindings != 1 {
			t.Fatalf("%d bindings, want exactly 1", bindings)
		}
		for i, a := range attempts {
			switch {
			case a.team.ID == inst.TeamID && statuses[i] != http.StatusOK:
				t.Errorf("attempt %d by the winning team: %d, want 200 (the same binding)\n%s", i, statuses[i], pages[i])
			case a.team.ID != inst.TeamID && (statuses[i] != http.StatusConflict || !strings.Contains(pages[i], "InstallationTaken")):
				t.Errorf("attempt %d by the other team: %d, want 409 InstallationTaken\n%s", i, statuses[i], pages[i])
			}
		}
	})
}

// TestSetupHoldsNoTransactionWhileAskingGitHub looks at the database while the fake
// GitHub is answering the setup callback's calls: no connection of the service's pool
// may be in use (a transaction held across the call would be), and on PostgreSQL no
// session may sit "idle in transaction".
func TestSetupHoldsNoTransactionWhileAskingGitHub(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		id := e.install(e.tokenA, "acme", "deploy")
		e.gh.WaitForDeliveries()
		state := e.state(e.tokenA)
		code := e.code(e.tokenA, id)

		var mu sync.Mutex
		var observed []string
		observe := func(call string) func() {
			return func() {
				inUse := db.Stats().InUse
				idleInTx := 0
				if db.Dialect() == store.Postgres {
					err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM pg_stat_activity
						WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`).Scan(&idleInTx)
					if err != nil {
						t.Errorf("read pg_stat_activity: %v", err)
					}
				}
				mu.Lock()
				defer mu.Unlock()
				observed = append(observed, call)
				if inUse != 0 || idleInTx != 0 {
					t.Errorf("during %s: %d connections in use, %d sessions idle in transaction; want none", call, inUse, idleInTx)
				}
			}
		}
		for _, endpoint := range []string{
			"POST /login/oauth/access_token",
			"GET /user/installations",
			"GET /app/installations/{installation_id}",
			"POST /app/installations/{installation_id}/access_tokens",
			"GET /installation/repositories",
		} {
			e.gh.OnRequest(endpoint, observe(endpoint))
		}

		if status, page := e.callback("installation_id=" + itoa(id) + "&setup_action=install&state=" + state + "&code=" + code); status != http.StatusOK {
			t.Fatalf("callback = %d\n%s", status, page)
		}
		mu.Lock()
		defer mu.Unlock()
		want := []string{"POST /login/oauth/access_token", "GET /user/installations", "GET /app/installations/{installation_id}"}
		if len(observed) < len(want)+1 || strings.Join(observed[:len(want)], ",") != strings.Join(want, ",") {
			t.Errorf("observed GitHub calls %v; want the installer checked (%v), then the installation confirmed, then its repositories read", observed, want)
		}
	})
}

func TestSetupRequestRecordsPendingApproval(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		e.gh.ResetRequestCounts()
		status, page := e.callback("setup_action=request&state=" + e.state(e.tokenA))
		if status != http.StatusAccepted || !strings.Contains(page, "Waiting for approval") {
			t.Fatalf("callback = %d\n%s", status, page)
		}
		if n := e.gh.TotalRequests(); n != 0 {
			t.Errorf("a request callback made %d requests to GitHub, want 0", n)
		}
		list, err := db.ListInstallations(context.Background(), e.teamA.ID)
		if err != nil || len(list) != 1 || list[0].Status != store.InstallationPendingApproval {
			t.Fatalf("installations = %+v, %v; want one pending approval", list, err)
		}
		status, body := e.do("GET", "/api/v1/installations", e.tokenA, nil)
		if status != http.StatusOK || !strings.Contains(string(body), `"status":"pending_approval"`) {
			t.Errorf("GET /api/v1/installations = %d %s", status, body)
		}
	})
}

func TestSetupPagesEscapeWhatTheyEcho(t *testing.T) {
	db := storetest.SQLite(t)
	e := newEnv(t, db)
	status, page := e.callback("installation_id=%3Cscript%3Ealert(1)%3C%2Fscript%3E&setup_action=install&state=" + e.state(e.tokenA))
	if status != http.StatusBadRequest {
		t.Fatalf("status = %d, want 400", status)
	}
	if strings.Contains(page, "<script>") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the page does not escape the echoed id:\n%s", page)
	}
	status, page = e.callback("installation_id=1&setup_action=%3Cb%3Ebold&state=" + e.state(e.tokenA))
	if status != http.StatusBadRequest || strings.Contains(page, "<b>bold") {
		t.Errorf("unknown action page = %d, unescaped:\n%s", status, page)
	}
}

// TestSetupClipsAttackerSizedParameters: the callback's parameters reach its log
// lines and pages shortened, with their length, whatever size the caller sent.
func TestSetupClipsAttackerSizedParameters(t *testing.T) {
	db := storetest.SQLite(t)
	e := newEnv(t, db)
	huge := strings.Repeat("A", 100_000)
	tooLong := strings.Repeat("A", 65)
	for name, query := range map[string]func() string{
		"without state":  func() string { return "installation_id=" + huge + "&setup_action=" + huge },
		"unknown step":   func() string { return "installation_id=1&setup_action=" + huge + "&state=" + e.state(e.tokenA) },
		"id not numeric": func() string { return "installation_id=" + huge + "&setup_action=install&state=" + e.state(e.tokenA) },
	} {
		t.Run(name, func(t *testing.T) {
			q := query()
			before := len(e.logs.String())
			status, page := e.callback(q)
			if status != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400", status)
			}
			if strings.Contains(page, tooLong) {
				t.Errorf("the page echoes the whole parameter (%d bytes)", len(page))
			}
			logs := e.logs.String()[before:]
			if strings.Contains(logs, tooLong) {
				t.Errorf("the log holds the whole parameter (%d bytes of log)", len(logs))
			}
			if name == "without state" && !strings.Contains(logs, "(100000 bytes)") {
				t.Errorf("the log does not say how long the parameter was:\n%s", logs)
			}
		})
	}
}

func TestSetupUnknownInstallationBindsNothing(t *testing.T) {
	cases := map[string]struct {
		opts       []envOption
		wantStatus int
		wantText   string
	}{
		// No installation webhook names anyone as the installer of an installation
		// that does not exist.
		"installer checked":  {wantStatus: http.StatusConflict, wantText: "InstallerUnknown"},
		"no installer check": {opts: []envOption{withoutInstallerCheck()}, wantStatus: http.StatusNotFound, wantText: "GitHub does not know this installation"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			db := storetest.SQLite(t)
			e := newEnv(t, db, tc.opts...)
			status, page := e.callback("installation_id=987654&setup_action=install&state=" + e.state(e.tokenA) +
				"&code=" + e.gh.AuthorizationCode(t, e.installer(e.tokenA)))
			if status != tc.wantStatus || !strings.Contains(page, tc.wantText) {
				t.Fatalf("callback = %d, want %d with %q\n%s", status, tc.wantStatus, tc.wantText, page)
			}
			if _, err := db.InstallationByGitHubID(context.Background(), 987654); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("unknown installation got bound: %v", err)
			}
		})
	}
}

// TestSetupAfterAnUpdateOnGitHubSaysNothingMoreIsNeeded: the App redirects to the
// setup URL after an installation's settings are saved on GitHub (setup_on_update),
// as when an owner gives it one more repository, without a state. The owner is told
// that GitHub saved it and the service learns of it from GitHub, not that the link
// cannot be used and a fresh install link is needed; nothing changes here and
// GitHub is not asked anything, for the redirect is anyone's to forge.
func TestSetupAfterAnUpdateOnGitHubSaysNothingMoreIsNeeded(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		e.gh.CreateRepo(t, "acme", "infra", nil, "main")
		id := e.install(e.tokenA, "acme", "deploy")
		if status, page := e.bind(e.tokenA, id); status != http.StatusOK {
			t.Fatalf("bind: %d %s", status, page)
		}
		e.drain()

		// The owner adds infra to the installation on GitHub, which notifies the
		// service and sends the browser to the setup URL.
		e.gh.AddInstallationRepos(t, id, "infra")
		e.drain()
		e.gh.ResetRequestCounts()
		status, page := e.callback("installation_id=" + itoa(id) + "&setup_action=update")
		if status != http.StatusOK || !strings.Contains(page, "saved on GitHub") || !strings.Contains(page, "Nothing more is needed") {
			t.Errorf("callback after an update = %d, want 200 saying the settings are saved and nothing more is needed\n%s", status, page)
		}
		for _, wrong := range []string{"cannot be used", "has no state"} {
			if strings.Contains(page, wrong) {
				t.Errorf("the page after an update says %q\n%s", wrong, page)
			}
		}
		if n := e.gh.TotalRequests(); n != 0 {
			t.Errorf("the callback made %d requests to GitHub (%v), want 0", n, e.gh.RequestCounts())
		}
		inst, err := db.InstallationByGitHubID(ctx, id)
		if err != nil || inst.TeamID != e.teamA.ID || inst.Status != store.InstallationActive {
			t.Errorf("binding = %+v, %v; want still team-a's, active", inst, err)
		}
		repos, err := db.InstallationRepos(ctx, id)
		if err != nil || len(repos) != 2 {
			t.Errorf("installation repos = %+v, %v; want deploy and infra, as GitHub's notice said", repos, err)
		}
	})
}
