package notify_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/internal/servicetest"
	"github.com/kukie/kukie-gitops/notify"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// Endpoint URLs are a team's input: without the operator's allowance, the service
// neither registers an endpoint naming an internal address nor connects to one,
// however the name resolves.
func TestDeliveriesReachPublicAddressesOnly(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db})
		if err != nil {
			t.Fatal(err)
		}
		(&notify.API{Store: db, Credentials: e.box, AllowHTTP: true}).Mount(srv)
		strict := httptest.NewServer(srv.Handler())
		defer strict.Close()
		for _, u := range []string{
			"http://127.0.0.1:8080/hooks", "https://10.1.2.3/hooks", "https://192.168.0.10/hooks", "https://172.16.5.4/hooks",
			"http://169.254.169.254/latest/meta-data/", "https://[::1]/hooks", "https://[fd00::1]/hooks", "https://[::ffff:127.0.0.1]/hooks",
			"https://0.0.0.0/hooks", "https://localhost/hooks", "https://LOCALHOST./hooks", "https://chat.localhost/hooks",
		} {
			status, body := servicetest.Do(t, strict, "POST", "/api/v1/notifications/endpoints", e.admin, map[string]any{"url": u})
			if status != http.StatusBadRequest || !strings.Contains(string(body), "invalid_endpoint") || !strings.Contains(string(body), "public addresses only") {
				t.Errorf("register %s = %d %s, want 400 invalid_endpoint naming the public-address rule", u, status, body)
			}
		}
		if status, body := servicetest.Do(t, strict, "POST", "/api/v1/notifications/endpoints", e.admin, map[string]any{"url": "https://chat.example.com/hooks"}); status != http.StatusCreated {
			t.Errorf("register a public name = %d %s, want 201", status, body)
		}

		// A name is checked on the address dialled. The endpoint was registered while
		// the operator allowed private networks; a worker without that allowance
		// refuses to connect, and says why in the delivery log.
		rcv := newReceiver(t)
		id, _ := e.register(t, rcv.srv.URL+"/hooks")
		e.move(t, e.newPlan(t, "plan1"), "preparing")
		guarded := &notify.Worker{Store: db, Credentials: e.box, Now: e.clock.Now, FirstBackoff: time.Minute}
		if _, err := guarded.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if rcv.attempts != 0 {
			t.Fatalf("the receiver on a loopback address got %d requests through the guard", rcv.attempts)
		}
		log, err := db.ListNotificationDeliveries(context.Background(), e.team.ID, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		refused := 0
		for _, d := range log {
			if d.State != store.NotificationPending {
				t.Errorf("delivery %s is %s, want pending", d.ID, d.State)
			}
			if d.Attempts > 0 && strings.Contains(d.LastError, "public addresses only") {
				refused++
			}
		}
		// The plan's first delivery was tried and refused; the next waits behind it.
		if len(log) != 2 || refused != 1 {
			t.Fatalf("delivery log %+v, want two pending deliveries, the first refused by the guard", log)
		}
		// With the allowance, the same deliveries go out.
		e.clock.advance(time.Hour)
		if _, err := e.worker().Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := states(t, rcv.delivered(), "plan1"); strings.Join(got, ",") != "deciding,preparing" {
			t.Fatalf("delivered %v once private networks are allowed, want deciding,preparing", got)
		}
	})
}

// Delivered notifications leave the log after the retention; pending ones stay
// whatever their age. Every attempt is counted by outcome.
func TestDeliveredNotificationsArePrunedAndAttemptsCounted(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ok := newReceiver(t)
		okID, _ := e.register(t, ok.srv.URL+"/ok")
		down := newReceiver(t, 500, 500, 500, 500, 500, 500)
		downID, _ := e.register(t, down.srv.URL+"/down")
		e.move(t, e.newPlan(t, "plan1"), "preparing")

		outcomes := map[string]int{}
		w := e.worker()
		w.PauseAfter = 100
		w.Retention = 24 * time.Hour
		w.Outcome = func(event, outcome string) { outcomes[event+" "+outcome]++ }
		if _, err := w.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		// down's first delivery failed; its second waits behind it (order per plan).
		if outcomes["plan.transition delivered"] != 2 || outcomes["plan.transition failed"] != 1 || len(outcomes) != 2 {
			t.Fatalf("outcomes %v, want 2 delivered and 1 failed", outcomes)
		}

		count := func(id string) int {
			t.Helper()
			ds, err := db.ListNotificationDeliveries(context.Background(), e.team.ID, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			return len(ds)
		}
		if n, err := w.Prune(context.Background()); err != nil || n != 0 {
			t.Fatalf("prune within the retention deleted %d (%v), want 0", n, err)
		}
		e.clock.advance(25 * time.Hour)
		if n, err := w.Prune(context.Background()); err != nil || n != 2 {
			t.Fatalf("prune after the retention deleted %d (%v), want the 2 delivered", n, err)
		}
		if got := count(okID); got != 0 {
			t.Errorf("%d deliveries left for the endpoint that took them, want 0", got)
		}
		if got := count(downID); got != 2 {
			t.Errorf("%d deliveries left for the failing endpoint, want both pending ones kept", got)
		}
	})
}
