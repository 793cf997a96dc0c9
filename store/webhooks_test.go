package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestLateOutcomeOfAnExpiredClaimIsRefused: a worker that overran its lease must not
// overwrite the state of the attempt of the worker that claimed the delivery after it.
func TestLateOutcomeOfAnExpiredClaimIsRefused(t *testing.T) {
	lateOutcomes := map[string]func(context.Context, *store.DB, store.DeliveryClaim) error{
		"complete": func(ctx context.Context, db *store.DB, c store.DeliveryClaim) error {
			return db.CompleteWebhookDelivery(ctx, c)
		},
		"fail": func(ctx context.Context, db *store.DB, c store.DeliveryClaim) error {
			return db.FailWebhookDelivery(ctx, c, "first attempt gave up")
		},
		"retry": func(ctx context.Context, db *store.DB, c store.DeliveryClaim) error {
			return db.RetryWebhookDeliveryAt(ctx, c, "first attempt failed", time.Now().Add(-time.Second))
		},
		"skip": func(ctx context.Context, db *store.DB, c store.DeliveryClaim) error {
			return db.SkipWebhookDelivery(ctx, c, "first attempt found nothing to act on")
		},
	}
	// What the second claimer does before the first one comes back, and the state
	// that must survive.
	secondOutcomes := map[string]struct {
		record func(context.Context, *store.DB, store.DeliveryClaim) error
		want   store.DeliveryState
		reason string
	}{
		"second attempt still running": {
			record: func(context.Context, *store.DB, store.DeliveryClaim) error { return nil },
			want:   store.DeliveryProcessing,
		},
		"second attempt backing off": {
			record: func(ctx context.Context, db *store.DB, c store.DeliveryClaim) error {
				return db.RetryWebhookDeliveryAt(ctx, c, "second attempt failed", time.Now().Add(time.Hour))
			},
			want:   store.DeliveryPending,
			reason: "second attempt failed",
		},
		"second attempt done": {
			record: func(ctx context.Context, db *store.DB, c store.DeliveryClaim) error {
				return db.CompleteWebhookDelivery(ctx, c)
			},
			want: store.DeliveryDone,
		},
		"second attempt failed": {
			record: func(ctx context.Context, db *store.DB, c store.DeliveryClaim) error {
				return db.FailWebhookDelivery(ctx, c, "second attempt gave up")
			},
			want:   store.DeliveryFailed,
			reason: "second attempt gave up",
		},
	}
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		for lateName, late := range lateOutcomes {
			for secondName, second := range secondOutcomes {
				t.Run(lateName+" after "+secondName, func(t *testing.T) {
					ctx := context.Background()
					id := "d-" + lateName + "-" + secondName
					if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: id, Event: "push", Payload: []byte(`{}`)}); err != nil {
						t.Fatal(err)
					}
					// A lease already in the past: the first worker overran it.
					first := claimOne(t, db, id, -time.Second)
					again := claimOne(t, db, id, time.Minute)
					if first.Attempts != 1 || again.Attempts != 2 {
						t.Fatalf("attempts %d then %d, want 1 then 2", first.Attempts, again.Attempts)
					}
					if err := second.record(ctx, db, again.Claim()); err != nil {
						t.Fatal(err)
					}
					before, err := db.WebhookDeliveryByID(ctx, id)
					if err != nil {
						t.Fatal(err)
					}

					if err := late(ctx, db, first.Claim()); !errors.Is(err, store.ErrLeaseLost) {
						t.Fatalf("late %s of attempt 1: got %v, want ErrLeaseLost", lateName, err)
					}

					after, err := db.WebhookDeliveryByID(ctx, id)
					if err != nil {
						t.Fatal(err)
					}
					if after.State != second.want || after.Attempts != 2 || after.LastError != second.reason || after.SkipReason != "" {
						t.Errorf("after the late %s: %+v, want %s on attempt 2 with error %q", lateName, after, second.want, second.reason)
					}
					if !after.LeaseExpiresAt.Equal(before.LeaseExpiresAt) || !after.FinishedAt.Equal(before.FinishedAt) {
						t.Errorf("late %s changed the lease or finish time: before %+v, after %+v", lateName, before, after)
					}
					if second.want == store.DeliveryPending {
						// The second attempt's backoff still holds.
						if slices.ContainsFunc(claimAll(t, db), func(d store.WebhookDelivery) bool { return d.DeliveryID == id }) {
							t.Errorf("delivery %s claimable during the second attempt's backoff", id)
						}
					}
				})
			}
		}
	})
}

func claimOne(t *testing.T, db *store.DB, id string, lease time.Duration) store.WebhookDelivery {
	t.Helper()
	got, err := db.ClaimWebhookDeliveries(context.Background(), 1, lease)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].DeliveryID != id {
		t.Fatalf("claim = %+v, want %s", got, id)
	}
	return got[0]
}

func claimAll(t *testing.T, db *store.DB) []store.WebhookDelivery {
	t.Helper()
	got, err := db.ClaimWebhookDeliveries(context.Background(), 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
