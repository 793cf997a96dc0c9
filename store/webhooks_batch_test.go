package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// insertAt stores pending deliveries received one millisecond apart from base, in
// the order given.
func insertAt(t *testing.T, db *store.DB, base time.Time, ids ...string) {
	t.Helper()
	for i, id := range ids {
		if err := db.InsertWebhookDelivery(context.Background(), store.WebhookDelivery{
			DeliveryID: id, Event: "push", Payload: []byte(`{"id":"` + id + `"}`),
			ReceivedAt: base.Add(time.Duration(i) * time.Millisecond),
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func ids(ds []store.WebhookDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.DeliveryID
	}
	return out
}

func completions(ds []store.WebhookDelivery) []store.DeliveryCompletion {
	out := make([]store.DeliveryCompletion, len(ds))
	for i, d := range ds {
		out[i] = store.DeliveryCompletion{Claim: d.Claim()}
	}
	return out
}

// claimN claims a batch of n deliveries, which must be there to claim.
func claimN(t *testing.T, db *store.DB, n int, lease time.Duration) []store.WebhookDelivery {
	t.Helper()
	got, err := db.ClaimWebhookDeliveries(context.Background(), n, lease)
	if err != nil || len(got) != n {
		t.Fatalf("claim = %v, %v; want %d deliveries", ids(got), err, n)
	}
	return got
}

// takeOver lets the lease on a claimed delivery run out and claims it again, as
// another worker does once the first one stalled; the new claim holds it for an hour.
func takeOver(t *testing.T, db *store.DB, id string) store.WebhookDelivery {
	t.Helper()
	storetest.ExpireWebhookLease(t, db, id)
	again := claimN(t, db, 1, time.Hour)
	if again[0].DeliveryID != id {
		t.Fatalf("re-claimed %s, want %s", again[0].DeliveryID, id)
	}
	return again[0]
}

func claims(ds []store.WebhookDelivery) []store.DeliveryClaim {
	out := make([]store.DeliveryClaim, len(ds))
	for i, d := range ds {
		out[i] = d.Claim()
	}
	return out
}

// TestClaimTakesTheOldestDueDeliveriesInBatches: a claim leases up to its limit of
// the oldest due deliveries, each once, with their payload and a lease; one waiting
// out a backoff is left until it is due.
func TestClaimTakesTheOldestDueDeliveriesInBatches(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		base := time.Now().Add(-time.Hour)
		// Inserted out of order: the claim goes by received time, then id.
		insertAt(t, db, base.Add(5*time.Millisecond), "f", "g", "h")
		insertAt(t, db, base, "a", "b", "c", "d", "e")
		if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: "b2", Event: "push",
			Payload: []byte(`{}`), ReceivedAt: base.Add(time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		// a failed once and backs off for an hour.
		retry, err := db.ClaimWebhookDeliveries(ctx, 1, -time.Second)
		if err != nil || len(retry) != 1 || retry[0].DeliveryID != "a" {
			t.Fatalf("claim = %v, %v; want a", ids(retry), err)
		}
		if err := db.RetryWebhookDeliveryAt(ctx, retry[0].Claim(), "GitHub answered 502", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}

		before := time.Now()
		first, err := db.ClaimWebhookDeliveries(ctx, 4, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"b", "b2", "c", "d"}; !slices.Equal(ids(first), want) {
			t.Fatalf("first batch %v, want %v (a backs off)", ids(first), want)
		}
		for _, d := range first {
			if d.State != store.DeliveryProcessing || d.Attempts != 1 || d.LeaseExpiresAt.Before(before.Add(time.Minute-time.Second)) {
				t.Errorf("claimed %+v, want processing on attempt 1 with a minute's lease", d)
			}
			if d.DeliveryID != "b2" && string(d.Payload) != `{"id":"`+d.DeliveryID+`"}` {
				t.Errorf("%s claimed with payload %q", d.DeliveryID, d.Payload)
			}
		}
		second, err := db.ClaimWebhookDeliveries(ctx, 4, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"e", "f", "g", "h"}; !slices.Equal(ids(second), want) {
			t.Fatalf("second batch %v, want %v", ids(second), want)
		}
		if rest, err := db.ClaimWebhookDeliveries(ctx, 4, time.Minute); err != nil || len(rest) != 0 {
			t.Fatalf("third claim = %v, %v; want nothing while a backs off and the rest are leased", ids(rest), err)
		}
	})
}

// TestClaimTakesBackExpiredLeases: deliveries whose lease ran out (their worker
// died) are claimed again, in received order among the pending ones, on their next
// attempt; a lease that still holds is not.
func TestClaimTakesBackExpiredLeases(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		base := time.Now().Add(-time.Hour)
		insertAt(t, db, base, "old1", "held", "old2", "new1", "new2")
		leased := claimN(t, db, 3, time.Hour)
		// old1 and old2 were a dead worker's; held's worker still lives.
		storetest.ExpireWebhookLease(t, db, "old1")
		storetest.ExpireWebhookLease(t, db, "old2")
		dead := leased[:1]

		got, err := db.ClaimWebhookDeliveries(ctx, 3, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"old1", "old2", "new1"}; !slices.Equal(ids(got), want) {
			t.Fatalf("claimed %v, want %v", ids(got), want)
		}
		for _, d := range got {
			want := 1
			if d.DeliveryID != "new1" {
				want = 2
			}
			if d.Attempts != want || d.State != store.DeliveryProcessing {
				t.Errorf("%s claimed as %s on attempt %d, want processing on attempt %d", d.DeliveryID, d.State, d.Attempts, want)
			}
		}
		// The dead worker's outcome no longer counts.
		if err := db.CompleteWebhookDelivery(ctx, dead[0].Claim()); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("completing the expired claim: %v, want ErrLeaseLost", err)
		}
		if d := delivery(t, db, "held"); d.State != store.DeliveryProcessing || d.Attempts != 1 {
			t.Errorf("held = %+v, want still leased on attempt 1", d)
		}
	})
}

// TestCompleteWebhookDeliveriesRecordsABatch: one call records a batch's done and
// skipped deliveries; a claim that no longer holds its delivery, and one of a
// delivery that does not exist, change nothing and are refused by name.
func TestCompleteWebhookDeliveriesRecordsABatch(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		insertAt(t, db, time.Now().Add(-time.Hour), "done1", "done2", "skipped", "overrun", "untouched")
		batch := claimN(t, db, 4, time.Minute)
		// overrun's lease ran out and another worker took it, which is still working.
		takeOver(t, db, "overrun")

		ghost := store.DeliveryClaim{DeliveryID: "never-stored", Attempt: 1}
		// done2's attempt ended before the batch was recorded.
		endedEarlier := time.Now().Add(-10 * time.Second).Truncate(time.Millisecond)
		before := time.Now().Add(-time.Second)
		refused, err := db.CompleteWebhookDeliveries(ctx, []store.DeliveryCompletion{
			{Claim: batch[0].Claim()},
			{Claim: batch[1].Claim(), FinishedAt: endedEarlier},
			{Claim: batch[2].Claim(), SkipReason: "the push is to a branch no plan watches"},
			{Claim: batch[3].Claim()},
			{Claim: ghost},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(refused) != 2 || !errors.Is(refused[batch[3].Claim()], store.ErrLeaseLost) || !errors.Is(refused[ghost], store.ErrNotFound) {
			t.Fatalf("refused %v, want overrun's lost lease and never-stored not found", refused)
		}
		for id, skip := range map[string]string{"done1": "", "done2": "", "skipped": "the push is to a branch no plan watches"} {
			d := delivery(t, db, id)
			finished := !d.FinishedAt.Before(before)
			if id == "done2" {
				finished = d.FinishedAt.Equal(endedEarlier)
			}
			if d.State != store.DeliveryDone || d.SkipReason != skip || d.LastError != "" ||
				!d.LeaseExpiresAt.IsZero() || !finished || d.Attempts != 1 {
				t.Errorf("%s = %+v, want done on attempt 1, skip reason %q, no lease, finished when its attempt ended", id, d, skip)
			}
		}
		if d := delivery(t, db, "overrun"); d.State != store.DeliveryProcessing || d.Attempts != 2 || d.LeaseExpiresAt.IsZero() {
			t.Errorf("overrun = %+v, want the second claim's attempt untouched", d)
		}
		if d := delivery(t, db, "untouched"); d.State != store.DeliveryPending || d.Attempts != 0 {
			t.Errorf("untouched = %+v, want pending", d)
		}
		// Completing the same batch again is refused for each: it is finished.
		refused, err = db.CompleteWebhookDeliveries(ctx, []store.DeliveryCompletion{{Claim: batch[0].Claim()}})
		if err != nil || !errors.Is(refused[batch[0].Claim()], store.ErrLeaseLost) {
			t.Errorf("second completion of done1: %v, %v; want ErrLeaseLost", refused, err)
		}
		if refused, err := db.CompleteWebhookDeliveries(ctx, nil); err != nil || len(refused) != 0 {
			t.Errorf("completing nothing: %v, %v", refused, err)
		}
	})
}

// TestCompleteWebhookDeliveriesBeyondOneStatement: a batch larger than one
// statement takes is recorded whole.
func TestCompleteWebhookDeliveriesBeyondOneStatement(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const n = 600 // more than one statement's 500
		all := make([]string, n)
		for i := range all {
			all[i] = fmt.Sprintf("d%04d", i)
		}
		insertAt(t, db, time.Now().Add(-time.Hour), all...)
		batch := claimN(t, db, n, time.Minute)
		if refused, err := db.CompleteWebhookDeliveries(ctx, completions(batch)); err != nil || len(refused) != 0 {
			t.Fatalf("complete: %v, %v", refused, err)
		}
		list, err := db.ListWebhookDeliveries(ctx, store.WebhookFilter{State: store.DeliveryDone, Limit: 2 * n})
		if err != nil || len(list) != n {
			t.Fatalf("%d done, %v; want %d", len(list), err, n)
		}
	})
}

// TestReleasedDeliveriesAreClaimableAtOnce: deliveries a worker claimed and did not
// start go back pending, due now, their attempt not counted; the released claim's
// outcome no longer counts, and releasing a claim that lost its delivery leaves the
// newer claim alone.
func TestReleasedDeliveriesAreClaimableAtOnce(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		insertAt(t, db, time.Now().Add(-time.Hour), "started", "rest1", "rest2", "taken")
		batch := claimN(t, db, 4, time.Hour)
		takeOver(t, db, "taken")

		if err := db.ReleaseWebhookDeliveries(ctx, claims(batch[1:])); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"rest1", "rest2"} {
			if d := delivery(t, db, id); d.State != store.DeliveryPending || d.Attempts != 1 || d.FreeAttempts != 1 || !d.LeaseExpiresAt.IsZero() {
				t.Errorf("%s = %+v, want pending, attempt 1 not counted, no lease", id, d)
			}
		}
		if d := delivery(t, db, "taken"); d.State != store.DeliveryProcessing || d.Attempts != 2 || d.FreeAttempts != 0 {
			t.Errorf("taken = %+v, want the newer claim's attempt 2 untouched", d)
		}
		if d := delivery(t, db, "started"); d.State != store.DeliveryProcessing || d.Attempts != 1 {
			t.Errorf("started = %+v, want still leased", d)
		}
		if err := db.CompleteWebhookDelivery(ctx, batch[1].Claim()); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("completing a released claim: %v, want ErrLeaseLost", err)
		}
		again, err := db.ClaimWebhookDeliveries(ctx, 4, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"rest1", "rest2"}; !slices.Equal(ids(again), want) {
			t.Fatalf("claim after the release = %v, want %v", ids(again), want)
		}
		if again[0].Attempts != 2 || again[0].FreeAttempts != 1 {
			t.Errorf("rest1 claimed again as %+v, want attempt 2 with 1 free", again[0])
		}
	})
}

// TestConcurrentClaimersNeverShareADelivery: eight workers on two connection pools
// claim batches of a backlog at once and record each batch; every delivery is
// leased to exactly one of them, on its first attempt, and ends done.
func TestConcurrentClaimersNeverShareADelivery(t *testing.T) {
	for _, dialect := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			db, other := storetest.TwoPools(t, dialect)
			const total = 400
			all := make([]string, total)
			for i := range all {
				all[i] = fmt.Sprintf("d%03d", i)
			}
			insertAt(t, db, time.Now().Add(-time.Hour), all...)

			var (
				mu      sync.Mutex
				claimed = map[string]int{}
				wg      sync.WaitGroup
			)
			for w := range 8 {
				pool := db
				if w%2 == 1 {
					pool = other
				}
				wg.Go(func() {
					for {
						batch, err := pool.ClaimWebhookDeliveries(context.Background(), 7, time.Hour)
						if err != nil {
							t.Error(err)
							return
						}
						if len(batch) == 0 {
							return
						}
						mu.Lock()
						for _, d := range batch {
							claimed[d.DeliveryID]++
						}
						mu.Unlock()
						if refused, err := pool.CompleteWebhookDeliveries(context.Background(), completions(batch)); err != nil || len(refused) != 0 {
							t.Errorf("complete: %v, %v", refused, err)
							return
						}
					}
				})
			}
			wg.Wait()
			for _, id := range all {
				if claimed[id] != 1 {
					t.Errorf("%s claimed %d times, want once", id, claimed[id])
				}
				if d := delivery(t, db, id); d.State != store.DeliveryDone || d.Attempts != 1 {
					t.Errorf("%s = %s on attempt %d, want done on attempt 1", id, d.State, d.Attempts)
				}
			}
		})
	}
}
