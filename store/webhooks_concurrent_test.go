package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestConcurrentDeliveriesAreEachStoredOnce: 64 goroutines store 32 deliveries, each
// id twice and at once, as GitHub's retries of a slow answer do. Each id is stored
// exactly once, with its own payload; the other insert of it is ErrConflict; and
// nothing else is stored.
func TestConcurrentDeliveriesAreEachStoredOnce(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const ids = 32
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			stored    = map[string]int{}
			conflicts = map[string]int{}
		)
		for i := range 2 * ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("d-%d", i%ids)
				err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: id, Event: "push",
					InstallationID: int64(i%ids + 1), Payload: []byte(`{"n":"` + id + `"}`)})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					stored[id]++
				case errors.Is(err, store.ErrConflict):
					conflicts[id]++
				default:
					t.Errorf("insert %s: %v", id, err)
				}
			}()
		}
		wg.Wait()
		for i := range ids {
			id := fmt.Sprintf("d-%d", i)
			if stored[id] != 1 || conflicts[id] != 1 {
				t.Errorf("%s: stored %d times, %d conflicts; want 1 and 1", id, stored[id], conflicts[id])
			}
			d := delivery(t, db, id)
			if string(d.Payload) != `{"n":"`+id+`"}` || d.InstallationID != int64(i+1) || d.State != store.DeliveryPending {
				t.Errorf("%s stored as %+v", id, d)
			}
		}
		all, err := db.ListWebhookDeliveries(ctx, store.WebhookFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != ids {
			t.Errorf("%d deliveries stored, want %d", len(all), ids)
		}
	})
}
