package webhook_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/ratelimit"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestDeliveriesAreNeverRateLimited: GitHub does not retry a delivery on its own,
// so a refused one is lost, and it sends from addresses every GitHub user's
// webhooks share (anyone can point one with another secret at this route). So on a
// server that limits its public routes per client address to one call, deliveries
// from one address, after many refused for their signature, are each verified and
// taken, never answered 429.
func TestDeliveriesAreNeverRateLimited(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		perClient, err := ratelimit.New("requests from this address", 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db, PerClient: perClient})
		if err != nil {
			t.Fatal(err)
		}
		(&webhook.Receiver{Store: db, Secret: hookSecret}).Mount(srv)
		e := &env{t: t, http: httptest.NewServer(srv.Handler())}
		t.Cleanup(e.http.Close)

		body := []byte(`{"action":"created","installation":{"id":1}}`)
		for i := range 10 {
			if status, answer := e.postHook(fmt.Sprintf("bad-%d", i), "installation", sign(secret.New("another webhook's secret"), body), body); status != http.StatusUnauthorized {
				t.Fatalf("delivery %d signed with another secret: %d %s, want 401", i, status, answer)
			}
		}
		for i := range 10 {
			if status, answer := e.postHook(fmt.Sprintf("good-%d", i), "installation", sign(hookSecret, body), body); status != http.StatusAccepted {
				t.Fatalf("signed delivery %d from the same address: %d %s, want 202", i, status, answer)
			}
		}
	})
}
