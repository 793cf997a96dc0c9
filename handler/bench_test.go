package handler

import (
	"context"
	"fmt"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// BenchmarkInboxDrain measures the inbox's own cost per delivery (claim, dispatch
// to a handler that does nothing, record done) while emptying a backlog of b.N
// deliveries: ns/op is the inverse of the drain rate.
func BenchmarkInboxDrain(b *testing.B) {
	for _, dialect := range []store.Dialect{store.SQLite, store.Postgres} {
		b.Run(string(dialect), func(b *testing.B) {
			ctx := context.Background()
			db := storetest.OpenURL(b, storetest.EmptyURL(b, dialect))
			if _, err := db.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			for i := range b.N {
				if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{
					DeliveryID: fmt.Sprintf("bench-%d", i), Event: "push", Payload: []byte(`{"ref":"refs/heads/main"}`),
				}); err != nil {
					b.Fatal(err)
				}
			}
			h := &recorder{events: []string{"push"}}
			in, err := NewInbox(db, InboxOptions{}, h)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			// Drain from as many goroutines as the inbox would run workers.
			done := make(chan error, in.opts.Workers)
			for range in.opts.Workers {
				go func() {
					_, err := in.Drain(ctx)
					done <- err
				}()
			}
			for range in.opts.Workers {
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if got, _ := h.counts(); len(got) != b.N {
				b.Fatalf("drained %d deliveries, want %d", len(got), b.N)
			}
		})
	}
}
