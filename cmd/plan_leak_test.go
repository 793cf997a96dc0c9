package cmd

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/internal/leakscan"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// secretsRepo plants a secret in every shape the plan output masks (see leakscan).
const secretsRepo = "../testdata/secrets-repo"

// TestPlanCommandNeverPrintsSecrets plans changes whose diffs show secret lines as
// context, in text and JSON, and requires that no planted value is printed.
func TestPlanCommandNeverPrintsSecrets(t *testing.T) {
	_, scan := leakscan.Planted(t, secretsRepo, 12)
	base := []string{"--repo", secretsRepo, "--app", "apps/web", "--type", "Kustomize"}
	for name, tc := range map[string]struct {
		change []string
		shows  string // a masked line the output must show, so it saw the secrets' context
	}{
		"image in the kustomization": {[]string{"set-image", "deployment/web", "web=ghcr.io/acme/web:2.5.0"}, "      - password=[redacted]"},
		"env in the inline patch":    {[]string{"set-env", "deployment/web", "-c", "web", "LOG_FORMAT=text"}, "                    value: [redacted]"},
		"env next to a token":        {[]string{"set-env", "deployment/web", "-c", "proxy", "UPSTREAM=http://127.0.0.1:9090"}, "              value: [redacted]"},
		"resources of the container": {[]string{"set-resources", "deployment/web", "-c", "web", "--limits", "memory=512Mi"}, "value: [redacted]"},
		"refused, naming the values": {[]string{"set-image", "deployment/web", "web=ghcr.io/acme/web:2.4.0"}, ""},
	} {
		for _, output := range []string{"text", "json"} {
			t.Run(name+"/"+output, func(t *testing.T) {
				args := append(append([]string{}, base...), "--output", output)
				_, stdout, stderr := runPlanCmd(t, append(args, tc.change...)...)
				all := stdout + stderr
				if output == "json" {
					// JSON escapes what text shows verbatim; compare what it says.
					var v any
					if err := json.Unmarshal([]byte(stdout), &v); err != nil {
						t.Fatalf("output is not JSON: %v\n%s", err, stdout)
					}
					decoded, _ := json.Marshal(v)
					all = strings.ReplaceAll(string(decoded), `\n`, "\n") + stderr
				}
				if tc.shows != "" && !strings.Contains(all, tc.shows) {
					t.Errorf("output lacks %q; the secrets are not in its context:\n%s", tc.shows, all)
				}
				scan.Check(t, "plan output", all)
			})
		}
	}
}

// TestOpenStoreSealsPlanEdits: with an encryption key, the service's database keeps
// the edited files of a plan sealed, and reads them back in clear.
func TestOpenStoreSealsPlanEdits(t *testing.T) {
	ctx := context.Background()
	vars := map[string]string{
		"KUKIE_DATABASE_URL":   "sqlite:" + filepath.Join(t.TempDir(), "kukie.db"),
		"KUKIE_ENCRYPTION_KEY": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{3}, config.EncryptionKeyBytes)),
	}
	cfg, err := config.Load("", func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	db, err := openStore(ctx, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	team, err := db.CreateTeam(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(plan.Payload{Edits: []plan.StoredEdit{{Path: "a.yaml", New: []byte("password=kkSealedValue1")}}})
	if err != nil {
		t.Fatal(err)
	}
	p := store.Plan{Code: "seal1", TeamID: team.ID, Cluster: "prod", Status: "preparing", Payload: payload}
	if _, _, err := db.CreatePlan(ctx, p, store.PlanEvent{Actor: "test"}); err != nil {
		t.Fatal(err)
	}
	var column string
	if err := db.GetContext(ctx, &column, `SELECT payload FROM plans WHERE code = 'seal1'`); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(column, base64.StdEncoding.EncodeToString([]byte("password=kkSealedValue1"))) || !strings.Contains(column, "sealed_edits") {
		t.Fatalf("stored payload keeps the edit in clear: %s", column)
	}
	got, err := db.PlanByCode(ctx, "seal1")
	if err != nil {
		t.Fatal(err)
	}
	pay, err := plan.PayloadOf(got)
	if err != nil || len(pay.Edits) != 1 || string(pay.Edits[0].New) != "password=kkSealedValue1" {
		t.Fatalf("read back %+v (%v)", pay.Edits, err)
	}
}
