package cmd

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
)

// commandDB opens a migrated SQLite database that the commands run by runCmd use.
func commandDB(t *testing.T) *store.DB {
	t.Helper()
	dbPath := filepath.Join(t.TempDir(), "k.db")
	t.Setenv("KUKIE_DATABASE_URL", "sqlite:"+dbPath)
	db, err := store.Open(context.Background(), "sqlite:"+dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestWebhooksListAndReplay: an operator lists the failed deliveries and replays one;
// it is pending again with a fresh budget, audited, and a pending one is refused.
func TestWebhooksListAndReplay(t *testing.T) {
	ctx := context.Background()
	db := commandDB(t)
	for _, id := range []string{"gave-up", "waiting"} {
		if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: id, Event: "push", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := db.ClaimWebhookDeliveries(ctx, 1, time.Minute)
	if err != nil || len(claimed) != 1 || claimed[0].DeliveryID != "gave-up" {
		t.Fatalf("claim = %+v, %v", claimed, err)
	}
	if err := db.FailWebhookDelivery(ctx, claimed[0].Claim(), "github said 502\nafter 8 attempts"); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCmd(t, "webhooks", "list", "--state", "failed")
	if code != 0 || !strings.Contains(out, "gave-up") || strings.Contains(out, "waiting") || !strings.Contains(out, "github said 502 after 8 attempts") {
		t.Fatalf("webhooks list --state failed: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCmd(t, "webhooks", "list", "--state", "broken"); code != 2 || !strings.Contains(errOut, "want pending") {
		t.Fatalf("bad state: exit %d, %s", code, errOut)
	}
	if code, out, errOut := runCmd(t, "webhooks", "replay", "gave-up"); code != 0 || !strings.Contains(out, "queued delivery gave-up") {
		t.Fatalf("replay: exit %d, %s %s", code, out, errOut)
	}
	d, err := db.WebhookDeliveryByID(ctx, "gave-up")
	if err != nil || d.State != store.DeliveryPending || d.Attempts-d.FreeAttempts != 0 || d.LastError != "" {
		t.Fatalf("after replay: %+v, %v; want pending with a fresh budget", d, err)
	}
	if code, _, errOut := runCmd(t, "webhooks", "replay", "waiting"); code != 1 || !strings.Contains(errOut, "is pending") {
		t.Fatalf("replay of a pending delivery: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCmd(t, "webhooks", "replay", "nope"); code != 1 || !strings.Contains(errOut, "no delivery nope") {
		t.Fatalf("replay of a missing delivery: exit %d, %s", code, errOut)
	}
	if code, _, _ := runCmd(t, "webhooks", "replay"); code != 2 {
		t.Fatalf("replay without an id: exit %d, want 2", code)
	}
	events, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "webhook_delivery", SubjectID: "gave-up"})
	if err != nil || len(events) != 1 || events[0].Action != "webhook.replay" || events[0].Actor != store.OperatorActor {
		t.Fatalf("audit = %+v, %v; want one webhook.replay by the cli", events, err)
	}
}

// TestWebhooksListShowsWhyADeliveryWasSkipped: a delivery finished without being
// acted on lists the reason its handler gave.
func TestWebhooksListShowsWhyADeliveryWasSkipped(t *testing.T) {
	ctx := context.Background()
	db := commandDB(t)
	if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: "no-issue", Event: "issue_comment", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	claimed, err := db.ClaimWebhookDeliveries(ctx, 1, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %+v, %v", claimed, err)
	}
	if err := db.SkipWebhookDelivery(ctx, claimed[0].Claim(), "issue_comment event payload has no issue object"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "webhooks", "list", "--state", "done")
	if code != 0 || !strings.Contains(out, "no-issue") || !strings.Contains(out, "skipped: issue_comment event payload has no issue object") {
		t.Fatalf("webhooks list --state done: exit %d\n%s%s", code, out, errOut)
	}
}
