package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestPlanCountsByStatus(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if got, err := db.PlanCountsByStatus(ctx); err != nil || len(got) != 0 {
			t.Fatalf("empty store: %v, %v; want no counts", got, err)
		}
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		for i, status := range []string{"deciding", "pr_open", "pr_open", "deployed"} {
			p := newPlan(team.ID, fmt.Sprintf("p%d", i), fmt.Sprintf("k%d", i))
			p.Status = status
			if _, _, err := db.CreatePlan(ctx, p, store.PlanEvent{ToStatus: status}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := db.PlanCountsByStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int64{"deciding": 1, "pr_open": 2, "deployed": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("counts = %v, want %v", got, want)
		}
	})
}

func TestWebhookInboxStats(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		st, err := db.WebhookInboxStats(ctx)
		if err != nil || len(st.ByState) != 0 || !st.OldestPending.IsZero() {
			t.Fatalf("empty inbox: %+v, %v; want nothing and no oldest", st, err)
		}
		base := time.Now().Add(-time.Hour).Truncate(time.Millisecond).UTC()
		for i, id := range []string{"d0", "d1", "d2"} {
			if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: id, Event: "push", Payload: []byte(`{}`),
				ReceivedAt: base.Add(time.Duration(i) * time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
		// The oldest is claimed and finished: the oldest still waiting is the next.
		claimed, err := db.ClaimWebhookDeliveries(ctx, 1, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].DeliveryID != "d0" {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		if err := db.CompleteWebhookDelivery(ctx, claimed[0].Claim()); err != nil {
			t.Fatal(err)
		}
		if claimed, err = db.ClaimWebhookDeliveries(ctx, 1, time.Minute); err != nil || len(claimed) != 1 {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		st, err = db.WebhookInboxStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[store.DeliveryState]int64{store.DeliveryDone: 1, store.DeliveryProcessing: 1, store.DeliveryPending: 1}
		if fmt.Sprint(st.ByState) != fmt.Sprint(want) {
			t.Fatalf("by state = %v, want %v", st.ByState, want)
		}
		if want := base.Add(2 * time.Minute); !st.OldestPending.Equal(want) {
			t.Fatalf("oldest pending = %s, want %s (d2)", st.OldestPending, want)
		}
	})
}
