package setup_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// The redelivery tests run the whole installation flow: the setup callback binds,
// the fake GitHub delivers to the webhook route, the inbox runs the deliveries.

func TestWebhookRedeliveryIsRefusedAndAuditedWithOneEffect(t *testing.T) {
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
		e.gh.AddInstallationRepos(t, id, "infra")
		e.gh.WaitForDeliveries()
		added := e.gh.DeliveriesOf("installation_repositories", "added")
		if len(added) != 1 || added[0].StatusCode != http.StatusAccepted {
			t.Fatalf("added deliveries = %+v, want one accepted", added)
		}
		again := e.gh.Redeliver(t, added[0].ID)
		if again.StatusCode != http.StatusConflict || !strings.Contains(again.ResponseBody, "duplicate_delivery") {
			t.Fatalf("redelivery = %d %s, want 409 duplicate_delivery", again.StatusCode, again.ResponseBody)
		}
		e.drain()
		events, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "webhook_delivery", SubjectID: added[0].ID})
		if err != nil || len(events) != 1 || events[0].Action != "webhook.redelivery" {
			t.Errorf("audit of the redelivery = %+v, %v; want one webhook.redelivery", events, err)
		}
		d, err := db.WebhookDeliveryByID(ctx, added[0].ID)
		if err != nil || d.State != store.DeliveryDone || d.Attempts != 1 {
			t.Errorf("delivery = %+v, %v; want done after one attempt", d, err)
		}
		repos, err := db.InstallationRepos(ctx, id)
		if err != nil || len(repos) != 2 {
			t.Errorf("installation repos = %+v, %v; want deploy and infra", repos, err)
		}
	})
}

// TestWebhookRedeliveryOfAFailedDeliveryIsQueuedAgain: GitHub's "Redeliver" of a
// delivery the inbox gave up on (same delivery id) is accepted, audited, and runs.
func TestWebhookRedeliveryOfAFailedDeliveryIsQueuedAgain(t *testing.T) {
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
		e.gh.AddInstallationRepos(t, id, "infra")
		e.gh.WaitForDeliveries()
		added := e.gh.DeliveriesOf("installation_repositories", "added")
		if len(added) != 1 || added[0].StatusCode != http.StatusAccepted {
			t.Fatalf("added deliveries = %+v, want one accepted", added)
		}
		// The inbox gives up on it (as after its last attempt during an outage).
		claimed, err := db.ClaimWebhookDeliveries(ctx, 10, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].DeliveryID != added[0].ID {
			t.Fatalf("claim = %+v, %v", claimed, err)
		}
		if err := db.FailWebhookDelivery(ctx, claimed[0].Claim(), "github said 502"); err != nil {
			t.Fatal(err)
		}

		again := e.gh.Redeliver(t, added[0].ID)
		if again.StatusCode != http.StatusAccepted || !strings.Contains(again.ResponseBody, "requeued") {
			t.Fatalf("redelivery of a failed delivery = %d %s, want 202 requeued", again.StatusCode, again.ResponseBody)
		}
		events, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "webhook_delivery", SubjectID: added[0].ID})
		if err != nil || len(events) != 1 || events[0].Action != "webhook.redelivery_requeued" {
			t.Errorf("audit of the redelivery = %+v, %v; want one webhook.redelivery_requeued", events, err)
		}
		e.drain()
		d, err := db.WebhookDeliveryByID(ctx, added[0].ID)
		if err != nil || d.State != store.DeliveryDone || d.LastError != "" {
			t.Errorf("delivery = %+v, %v; want done after the redelivery", d, err)
		}
		repos, err := db.InstallationRepos(ctx, id)
		if err != nil || len(repos) != 2 {
			t.Errorf("installation repos = %+v, %v; want deploy and infra", repos, err)
		}
		// Once done, a further redelivery is a duplicate again.
		if third := e.gh.Redeliver(t, added[0].ID); third.StatusCode != http.StatusConflict {
			t.Errorf("redelivery of a done delivery = %d %s, want 409", third.StatusCode, third.ResponseBody)
		}
	})
}
