package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func insertDelivery(t *testing.T, db *store.DB, id, payload string) {
	t.Helper()
	if err := db.InsertWebhookDelivery(context.Background(), store.WebhookDelivery{DeliveryID: id, Event: "push", Payload: []byte(payload)}); err != nil {
		t.Fatal(err)
	}
}

func delivery(t *testing.T, db *store.DB, id string) store.WebhookDelivery {
	t.Helper()
	d, err := db.WebhookDeliveryByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRedeliveryOfAFailedDeliveryRequeuesIt: GitHub's "Redeliver" reuses the delivery
// id. A failed delivery is taken again with a fresh budget; a pending, processing or
// done one is a duplicate and stays as it is.
func TestRedeliveryOfAFailedDeliveryRequeuesIt(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		redeliver := func(id, payload string) bool {
			t.Helper()
			ok, err := db.RequeueFailedWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: id, Event: "push", Action: "again", InstallationID: 7, Payload: []byte(payload)})
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}

		insertDelivery(t, db, "d1", `{"n":1}`)
		if redeliver("d1", `{"n":1}`) {
			t.Fatal("a pending delivery was requeued")
		}
		c := claimOne(t, db, "d1", time.Minute)
		if redeliver("d1", `{"n":1}`) {
			t.Fatal("a processing delivery was requeued")
		}
		if err := db.FailWebhookDelivery(ctx, c.Claim(), "gave up"); err != nil {
			t.Fatal(err)
		}
		if ok, err := db.RequeueFailedWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: "d1", Event: "pull_request", Payload: []byte(`{"n":1}`)}); err != nil || ok {
			t.Fatalf("a redelivery naming another event was requeued (%v, %v)", ok, err)
		}
		// The delivery id is not signed: another signed body under it is another
		// delivery, and the failed one stays as it was received.
		if redeliver("d1", `{"n":2}`) {
			t.Fatal("a redelivery with another body was requeued")
		}
		if got := delivery(t, db, "d1"); got.State != store.DeliveryFailed || string(got.Payload) != `{"n":1}` || got.LastError != "gave up" {
			t.Fatalf("failed delivery changed by a redelivery with another body: %+v", got)
		}
		if !redeliver("d1", `{"n":1}`) {
			t.Fatal("a failed delivery was not requeued")
		}
		d := delivery(t, db, "d1")
		if d.State != store.DeliveryPending || d.LastError != "" || d.Attempts != 1 || d.FreeAttempts != 1 ||
			string(d.Payload) != `{"n":1}` || !d.FinishedAt.IsZero() {
			t.Fatalf("requeued delivery = %+v, want pending with a fresh budget and its body", d)
		}
		c = claimOne(t, db, "d1", time.Minute)
		if c.Attempts-c.FreeAttempts != 1 {
			t.Fatalf("claim after requeue counts %d attempts, want 1", c.Attempts-c.FreeAttempts)
		}
		if err := db.CompleteWebhookDelivery(ctx, c.Claim()); err != nil {
			t.Fatal(err)
		}
		if redeliver("d1", `{"n":1}`) {
			t.Fatal("a done delivery was requeued")
		}
		if got := delivery(t, db, "d1"); got.State != store.DeliveryDone || string(got.Payload) != `{"n":1}` {
			t.Fatalf("done delivery changed by a redelivery: %+v", got)
		}
		if redeliver("missing", `{}`) {
			t.Fatal("a delivery never stored was requeued")
		}
	})
}

// TestDeferredAttemptsAreFreeAndWait: a rate-limited attempt waits until the given
// time and does not count toward giving up.
func TestDeferredAttemptsAreFreeAndWait(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		insertDelivery(t, db, "d1", `{}`)
		c := claimOne(t, db, "d1", time.Minute)
		if err := db.DeferWebhookDeliveryUntil(ctx, c.Claim(), "rate limited", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		d := delivery(t, db, "d1")
		if d.State != store.DeliveryPending || d.FreeAttempts != 1 || d.Attempts != 1 || d.LastError != "rate limited" {
			t.Fatalf("deferred = %+v", d)
		}
		if got := claimAll(t, db); len(got) != 0 {
			t.Fatalf("a deferred delivery was claimed before its time: %+v", got)
		}
		if err := db.DeferWebhookDeliveryUntil(ctx, c.Claim(), "again", time.Now()); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("defer without a claim: %v, want ErrLeaseLost", err)
		}

		insertDelivery(t, db, "d2", `{}`)
		c2 := claimOne(t, db, "d2", time.Minute)
		if err := db.DeferWebhookDeliveryUntil(ctx, c2.Claim(), "rate limited", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		again := claimOne(t, db, "d2", time.Minute)
		if again.Attempts != 2 || again.FreeAttempts != 1 {
			t.Fatalf("claim after a deferral: attempts %d free %d, want 2 and 1", again.Attempts, again.FreeAttempts)
		}
	})
}

func TestReplayWebhookDelivery(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		insertDelivery(t, db, "failed", `{"f":1}`)
		c := claimOne(t, db, "failed", time.Minute)
		if err := db.FailWebhookDelivery(ctx, c.Claim(), "gave up"); err != nil {
			t.Fatal(err)
		}
		insertDelivery(t, db, "done", `{}`)
		c = claimOne(t, db, "done", time.Minute)
		if err := db.CompleteWebhookDelivery(ctx, c.Claim()); err != nil {
			t.Fatal(err)
		}
		insertDelivery(t, db, "pending", `{}`)

		for _, id := range []string{"failed", "done"} {
			d, err := db.ReplayWebhookDelivery(ctx, id)
			if err != nil {
				t.Fatalf("replay %s: %v", id, err)
			}
			if d.State != store.DeliveryPending || d.FreeAttempts != d.Attempts || d.LastError != "" || !d.FinishedAt.IsZero() {
				t.Errorf("replayed %s = %+v, want pending with a fresh budget", id, d)
			}
		}
		if got := delivery(t, db, "failed"); string(got.Payload) != `{"f":1}` {
			t.Errorf("replay changed the payload: %s", got.Payload)
		}
		if _, err := db.ReplayWebhookDelivery(ctx, "pending"); !errors.Is(err, store.ErrConflict) {
			t.Errorf("replay of a pending delivery: %v, want ErrConflict", err)
		}
		if _, err := db.ReplayWebhookDelivery(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("replay of a missing delivery: %v, want ErrNotFound", err)
		}
	})
}

func TestListAndPruneWebhookDeliveries(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		for _, id := range []string{"a", "b", "c", "d"} {
			insertDelivery(t, db, id, `{"big":"payload"}`)
		}
		finish := func(id string, fail bool) {
			c := claimOne(t, db, id, time.Minute)
			var err error
			if fail {
				err = db.FailWebhookDelivery(ctx, c.Claim(), "gave up")
			} else {
				err = db.CompleteWebhookDelivery(ctx, c.Claim())
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		finish("a", false)
		finish("b", true)
		finish("c", false)

		failed, err := db.ListWebhookDeliveries(ctx, store.WebhookFilter{State: store.DeliveryFailed})
		if err != nil {
			t.Fatal(err)
		}
		if len(failed) != 1 || failed[0].DeliveryID != "b" || failed[0].LastError != "gave up" || len(failed[0].Payload) != 0 {
			t.Fatalf("failed deliveries = %+v, want b without its payload", failed)
		}
		all, err := db.ListWebhookDeliveries(ctx, store.WebhookFilter{})
		if err != nil || len(all) != 4 {
			t.Fatalf("all deliveries = %d, %v", len(all), err)
		}

		// Nothing finished before an hour ago.
		if n, err := db.PruneWebhookDeliveries(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
			t.Fatalf("prune of old ones = %d, %v; want 0", n, err)
		}
		n, err := db.PruneWebhookDeliveries(ctx, time.Now().Add(time.Second))
		if err != nil || n != 2 {
			t.Fatalf("prune = %d, %v; want the 2 done deliveries", n, err)
		}
		left, err := db.ListWebhookDeliveries(ctx, store.WebhookFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range left {
			ids = append(ids, d.DeliveryID)
		}
		if len(ids) != 2 || ids[0] != "d" && ids[1] != "d" {
			t.Fatalf("left after prune = %v, want the failed b and the pending d", ids)
		}
		if _, err := db.WebhookDeliveryByID(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("pruned delivery still readable: %v", err)
		}
	})
}
