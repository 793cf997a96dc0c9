package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kukie/kukie-gitops/metrics"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestStoreCollectorReportsPlansAndInbox(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		for i, status := range []string{"pr_open", "pr_open", "deploying", "from_a_newer_version"} {
			p := store.Plan{Code: "p" + string(rune('a'+i)), TeamID: team.ID, IdempotencyKey: "k" + string(rune('a'+i)), Cluster: "prod",
				Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "api"},
				Change: []byte(`{}`), RequestedBy: "alice", Status: status}
			if _, _, err := db.CreatePlan(ctx, p, store.PlanEvent{ToStatus: status}); err != nil {
				t.Fatal(err)
			}
		}
		received := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: "d1", Event: "push", Payload: []byte(`{}`), ReceivedAt: received}); err != nil {
			t.Fatal(err)
		}
		c := metrics.StoreCollector{Store: db, Now: func() time.Time { return received.Add(90 * time.Second) }}
		want := `
# HELP kukie_plans Plans by state (every state is reported, zero included).
# TYPE kukie_plans gauge
kukie_plans{state="closed"} 0
kukie_plans{state="committing"} 0
kukie_plans{state="deciding"} 0
kukie_plans{state="deploy_failed"} 0
kukie_plans{state="deployed"} 0
kukie_plans{state="deploying"} 1
kukie_plans{state="failed"} 0
kukie_plans{state="from_a_newer_version"} 1
kukie_plans{state="merged"} 0
kukie_plans{state="pr_open"} 2
kukie_plans{state="preparing"} 0
kukie_plans{state="refused"} 0
kukie_plans{state="rolled_back"} 0
kukie_plans{state="waiting"} 0
# HELP kukie_webhook_inbox_deliveries Webhook deliveries in the inbox by state (pending, processing, done, failed).
# TYPE kukie_webhook_inbox_deliveries gauge
kukie_webhook_inbox_deliveries{state="done"} 0
kukie_webhook_inbox_deliveries{state="failed"} 0
kukie_webhook_inbox_deliveries{state="pending"} 1
kukie_webhook_inbox_deliveries{state="processing"} 0
# HELP kukie_webhook_inbox_oldest_pending_age_seconds Age of the oldest webhook delivery waiting for a worker; 0 when none waits.
# TYPE kukie_webhook_inbox_oldest_pending_age_seconds gauge
kukie_webhook_inbox_oldest_pending_age_seconds 90
`
		if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
			t.Fatal(err)
		}
	})
}

type failingStore struct{ err error }

func (f failingStore) PlanCountsByStatus(context.Context) (map[string]int64, error) {
	return nil, f.err
}
func (f failingStore) WebhookInboxStats(context.Context) (store.InboxStats, error) {
	return store.InboxStats{}, f.err
}

func TestStoreCollectorFailsTheScrapeInsteadOfReportingZeros(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.StoreCollector{Store: failingStore{errors.New("database is down")}})
	got, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "database is down") {
		t.Fatalf("gather error = %v, want the store's error", err)
	}
	for _, mf := range got {
		if strings.HasPrefix(mf.GetName(), "kukie_") {
			t.Errorf("reported %s despite the failed query", mf.GetName())
		}
	}
}
