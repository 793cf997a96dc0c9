package cmd

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/service"
	"github.com/kukie/kukie-gitops/store"
)

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestTeamAndTokenCommands(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "k.db")
	t.Setenv("KUKIE_DATABASE_URL", "sqlite:"+dbPath)
	ctx := context.Background()

	if code, _, errOut := runCmd(t, "team", "create", "Bad Name"); code != 2 || !strings.Contains(errOut, "invalid") {
		t.Fatalf("invalid team name: exit %d, %s", code, errOut)
	}
	if code, out, errOut := runCmd(t, "team", "create", "payments"); code != 0 || !strings.Contains(out, "created team payments") {
		t.Fatalf("team create: exit %d, %s %s", code, out, errOut)
	}
	if code, _, errOut := runCmd(t, "team", "create", "payments"); code != 1 || !strings.Contains(errOut, "already exists") {
		t.Fatalf("duplicate team: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "token", "create", "--team", "nobody"); code != 1 || !strings.Contains(errOut, "no team nobody") {
		t.Fatalf("token for unknown team: exit %d, %s", code, errOut)
	}
	code, out, errOut := runCmd(t, "token", "create", "--team", "payments", "--name", "chat")
	if code != 0 {
		t.Fatalf("token create: exit %d, %s", code, errOut)
	}
	token := strings.TrimSpace(out)
	if !strings.HasPrefix(token, store.APITokenPrefix) || strings.Contains(errOut, token) {
		t.Fatalf("token create printed %q on stdout and %q on stderr; want the token once, on stdout", out, errOut)
	}

	db, err := store.Open(ctx, "sqlite:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	team, err := db.TeamForAPIToken(ctx, secret.New(token))
	if err != nil || team.Name != "payments" {
		t.Fatalf("printed token does not authenticate: %+v, %v", team, err)
	}
	tokens, err := db.ListAPITokens(ctx, team.ID)
	if err != nil || len(tokens) != 1 {
		t.Fatalf("tokens = %+v, %v", tokens, err)
	}

	code, out, _ = runCmd(t, "token", "list", "--team", "payments")
	if code != 0 || !strings.Contains(out, tokens[0].ID) || !strings.Contains(out, "chat") || strings.Contains(out, token) {
		t.Fatalf("token list: exit %d\n%s", code, out)
	}
	if code, out, errOut := runCmd(t, "token", "revoke", tokens[0].ID); code != 0 || !strings.Contains(out, "revoked token") {
		t.Fatalf("token revoke: exit %d, %s %s", code, out, errOut)
	}
	if _, err := db.TeamForAPIToken(ctx, secret.New(token)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked token still authenticates: %v", err)
	}
	if code, _, errOut := runCmd(t, "token", "revoke", "no-such-id"); code != 1 || !strings.Contains(errOut, "no token with id") {
		t.Fatalf("revoke unknown: exit %d, %s", code, errOut)
	}

	events, err := db.ListAuditEvents(ctx, store.AuditFilter{TeamID: team.ID})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action)
	}
	if strings.Join(actions, ",") != "token.revoke,token.create,team.create" {
		t.Fatalf("audit actions = %v", actions)
	}
}

func TestMigrateCommand(t *testing.T) {
	t.Setenv("KUKIE_DATABASE_URL", "sqlite:"+filepath.Join(t.TempDir(), "k.db"))
	code, out, errOut := runCmd(t, "migrate", "--status")
	if code != 0 || !strings.Contains(out, "0001_foundation\tpending") {
		t.Fatalf("status before: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "migrate")
	if code != 0 || strings.Contains(out, "\tpending") || !strings.Contains(out, "0001_foundation\tapplied") {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	for _, arg := range []string{"status", "up"} {
		if code, _, errOut := runCmd(t, "migrate", arg); code != 2 || !strings.Contains(errOut, "unexpected arguments ["+arg+"]: migrate takes flags only") ||
			!strings.Contains(errOut, "--status lists them") {
			t.Fatalf("migrate %s: exit %d %s, want 2 pointing at --status", arg, code, errOut)
		}
	}
}

func TestEveryCommandExplainsItself(t *testing.T) {
	cases := map[string]struct {
		args  []string
		wants []string
	}{
		"serve":        {[]string{"serve", "--help"}, []string{"Runs the HTTP service", "-addr", "-config", "-profile", "-log-format"}},
		"migrate":      {[]string{"migrate", "--help"}, []string{"Applies the database migrations", "-status", "-config"}},
		"version":      {[]string{"version", "--help"}, []string{"Prints the version"}},
		"team":         {[]string{"team", "--help"}, []string{"team create NAME", "team list"}},
		"team create":  {[]string{"team", "create", "--help"}, []string{"Creates a team", "-config"}},
		"token":        {[]string{"token", "--help"}, []string{"token create --team NAME", "token revoke ID"}},
		"token create": {[]string{"token", "create", "--help"}, []string{"prints it once", "-team", "-name"}},
		"token revoke": {[]string{"token", "revoke", "--help"}, []string{"Revokes a token"}},
		"token list":   {[]string{"token", "list", "--help"}, []string{"Lists a team's tokens", "-team"}},
		"team list":    {[]string{"team", "list", "--help"}, []string{"Lists all teams", "-config"}},
		"plan":         {[]string{"plan", "--help"}, []string{"Finds where a change belongs", "-repo", "-write"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d", code)
			}
			help := out + errOut
			for _, w := range tc.wants {
				if !strings.Contains(help, w) {
					t.Errorf("help does not mention %q:\n%s", w, help)
				}
			}
			if n := strings.Count(help, "Usage:"); n != 1 {
				t.Errorf("help printed %d times, want once:\n%s", n, help)
			}
			if strings.HasSuffix(strings.TrimSpace(help), "Flags:") {
				t.Errorf("help ends in an empty flag list:\n%s", help)
			}
		})
	}
	code, out, _ := runCmd(t, "--help")
	for _, name := range []string{"serve", "migrate", "version", "team", "token"} {
		if code != 0 || !strings.Contains(out, "  "+name) {
			t.Errorf("top-level help does not list %s:\n%s", name, out)
		}
	}
	if code, _, _ := runCmd(t, "nonsense"); code != 2 {
		t.Errorf("unknown command exit %d, want 2", code)
	}
	if code, out, errOut := runCmd(t); code != 2 || out != "" || !strings.Contains(errOut, "Commands:") {
		t.Errorf("no command: exit %d, stdout %q; want 2 and the usage on stderr", code, out)
	}
	if code, out, _ := runCmd(t, "version"); code != 0 || !strings.Contains(out, "kukie-gitops "+service.Version) {
		t.Errorf("version: exit %d %s", code, out)
	}
}

func TestTokenCreateScopes(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "k.db")
	t.Setenv("KUKIE_DATABASE_URL", "sqlite:"+dbPath)
	ctx := context.Background()
	if code, _, errOut := runCmd(t, "team", "create", "payments"); code != 0 {
		t.Fatalf("team create: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "token", "create", "--team", "payments", "--scope", "read,write"); code != 2 || !strings.Contains(errOut, `unknown scope "write"`) {
		t.Fatalf("unknown scope: exit %d, %s; want 2 naming the scope", code, errOut)
	}
	code, out, errOut := runCmd(t, "token", "create", "--team", "payments", "--name", "chat", "--scope", "change,read")
	if code != 0 || !strings.Contains(errOut, "with scopes read,change") {
		t.Fatalf("token create --scope: exit %d, %s", code, errOut)
	}
	scoped := secret.New(strings.TrimSpace(out))
	code, out, errOut = runCmd(t, "token", "create", "--team", "payments", "--name", "ops")
	if code != 0 {
		t.Fatalf("token create: exit %d, %s", code, errOut)
	}
	unscoped := secret.New(strings.TrimSpace(out))

	db, err := store.Open(ctx, "sqlite:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for tok, want := range map[secret.Secret]string{scoped: "read,change", unscoped: "read,change,admin"} {
		auth, err := db.AuthenticateAPIToken(ctx, tok)
		if err != nil || auth.Scopes.String() != want {
			t.Fatalf("token scopes = %v, %v; want %s", auth.Scopes, err, want)
		}
	}
	if code, out, _ := runCmd(t, "token", "list", "--team", "payments"); code != 0 || !strings.Contains(out, "SCOPES") || !strings.Contains(out, " read,change ") {
		t.Fatalf("token list does not show scopes: exit %d\n%s", code, out)
	}
}
