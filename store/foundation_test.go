package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestTeams(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.CreateTeam(ctx, "payments"); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second create: got %v, want ErrConflict", err)
		}
		byName, err := db.TeamByName(ctx, "payments")
		if err != nil || byName.ID != team.ID || !byName.CreatedAt.Equal(team.CreatedAt) {
			t.Fatalf("TeamByName = %+v, %v; want %+v", byName, err, team)
		}
		if _, err := db.TeamByName(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown team: got %v, want ErrNotFound", err)
		}
		ensured, err := db.EnsureTeam(ctx, "payments")
		if err != nil || ensured.ID != team.ID {
			t.Fatalf("EnsureTeam existing = %+v, %v", ensured, err)
		}
		if _, err := db.EnsureTeam(ctx, "search"); err != nil {
			t.Fatal(err)
		}
		teams, err := db.ListTeams(ctx)
		if err != nil || len(teams) != 2 || teams[0].Name != "payments" || teams[1].Name != "search" {
			t.Fatalf("ListTeams = %+v, %v", teams, err)
		}
	})
}

func TestValidateTeamName(t *testing.T) {
	cases := map[string]struct {
		name  string
		valid bool
	}{
		"simple":         {"payments", true},
		"with dash":      {"team-a1", true},
		"single char":    {"a", true},
		"upper case":     {"Payments", false},
		"leading dash":   {"-a", false},
		"trailing dash":  {"a-", false},
		"space":          {"a b", false},
		"empty":          {"", false},
		"slash":          {"a/b", false},
		"too long (64)":  {strings.Repeat("a", 64), false},
		"max length(63)": {strings.Repeat("a", 63), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := store.ValidateTeamName(tc.name); (err == nil) != tc.valid {
				t.Fatalf("ValidateTeamName(%q) = %v, want valid=%v", tc.name, err, tc.valid)
			}
		})
	}
}

func TestAPITokens(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		tok, clear, err := db.CreateAPIToken(ctx, team.ID, "ci")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(clear.Reveal(), store.APITokenPrefix) || len(clear.Reveal()) < 40 {
			t.Fatalf("token %q: want prefix %s and 32 random bytes", clear.Reveal(), store.APITokenPrefix)
		}
		var stored string
		if err := db.GetContext(ctx, &stored, db.Rebind("SELECT token_hash FROM api_tokens WHERE id = ?"), tok.ID); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stored, clear.Reveal()) || stored != store.HashAPIToken(clear) {
			t.Fatalf("stored %q: want the SHA-256 of the token, never the token", stored)
		}

		got, err := db.TeamForAPIToken(ctx, clear)
		if err != nil || got.ID != team.ID {
			t.Fatalf("TeamForAPIToken = %+v, %v", got, err)
		}
		for name, bad := range map[string]secret.Secret{
			"unknown":   secret.New(store.APITokenPrefix + "AAAA"),
			"no prefix": secret.New(strings.TrimPrefix(clear.Reveal(), store.APITokenPrefix)),
			"empty":     "",
		} {
			if _, err := db.TeamForAPIToken(ctx, bad); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s token: got %v, want ErrNotFound", name, err)
			}
		}

		revoked, err := db.RevokeAPIToken(ctx, tok.ID)
		if err != nil || revoked.RevokedAt.IsZero() {
			t.Fatalf("RevokeAPIToken = %+v, %v", revoked, err)
		}
		if _, err := db.TeamForAPIToken(ctx, clear); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("revoked token still authenticates: %v", err)
		}
		again, err := db.RevokeAPIToken(ctx, tok.ID)
		if err != nil || !again.RevokedAt.Equal(revoked.RevokedAt) {
			t.Fatalf("second revoke = %+v, %v; want the first revocation time kept", again, err)
		}
		if _, err := db.RevokeAPIToken(ctx, "no-such-id"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("revoke unknown: got %v, want ErrNotFound", err)
		}
		if _, _, err := db.CreateAPIToken(ctx, "no-such-team", "x"); err == nil {
			t.Fatal("token for a team that does not exist was created (foreign key not enforced)")
		}
		list, err := db.ListAPITokens(ctx, team.ID)
		if err != nil || len(list) != 1 || list[0].ID != tok.ID {
			t.Fatalf("ListAPITokens = %+v, %v", list, err)
		}
		if n, err := db.CountActiveAPITokens(ctx); err != nil || n != 0 {
			t.Fatalf("CountActiveAPITokens = %d, %v; want 0", n, err)
		}
	})
}

func TestWebhookInbox(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		base := time.Now().Add(-time.Minute)
		for i, id := range []string{"d1", "d2", "d3"} {
			err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{
				DeliveryID: id, Event: "push", InstallationID: 42,
				Payload: []byte(`{"ref":"refs/heads/main"}`), ReceivedAt: base.Add(time.Duration(i) * time.Second),
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: "d1", Event: "push", Payload: []byte(`{}`)})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("redelivery: got %v, want ErrConflict", err)
		}
		if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: "bad", Event: "push", Payload: []byte{0xff, 0xfe}}); err == nil {
			t.Fatal("invalid UTF-8 payload was accepted")
		}

		claimed, err := db.ClaimWebhookDeliveries(ctx, 2, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) != 2 || claimed[0].DeliveryID != "d1" || claimed[1].DeliveryID != "d2" {
			t.Fatalf("claimed %+v, want d1, d2 (oldest first)", claimed)
		}
		if c := claimed[0]; c.State != store.DeliveryProcessing || c.Attempts != 1 || c.InstallationID != 42 ||
			string(c.Payload) != `{"ref":"refs/heads/main"}` || c.LeaseExpiresAt.IsZero() {
			t.Fatalf("claimed delivery = %+v", c)
		}
		next, err := db.ClaimWebhookDeliveries(ctx, 10, time.Minute)
		if err != nil || len(next) != 1 || next[0].DeliveryID != "d3" {
			t.Fatalf("second claim = %+v, %v; want only d3 (d1, d2 are leased)", next, err)
		}

		if err := db.CompleteWebhookDelivery(ctx, claimed[0].Claim()); err != nil {
			t.Fatal(err)
		}
		if err := db.RetryWebhookDeliveryAt(ctx, claimed[1].Claim(), "github unreachable", time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := db.FailWebhookDelivery(ctx, next[0].Claim(), "bad payload"); err != nil {
			t.Fatal(err)
		}
		unknown := store.DeliveryClaim{DeliveryID: "nope", Attempt: 1}
		if err := db.CompleteWebhookDelivery(ctx, unknown); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("complete unknown: got %v, want ErrNotFound", err)
		}
		if err := db.FailWebhookDelivery(ctx, unknown, "x"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("fail unknown: got %v, want ErrNotFound", err)
		}
		// A finished delivery is no longer held by the claim that finished it.
		if err := db.CompleteWebhookDelivery(ctx, claimed[0].Claim()); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("second completion: got %v, want ErrLeaseLost", err)
		}
		retried, err := db.ClaimWebhookDeliveries(ctx, 10, time.Minute)
		if err != nil || len(retried) != 1 || retried[0].DeliveryID != "d2" || retried[0].Attempts != 2 || retried[0].LastError != "github unreachable" {
			t.Fatalf("retry claim = %+v, %v; want d2 on attempt 2", retried, err)
		}
		d1, _ := db.WebhookDeliveryByID(ctx, "d1")
		d3, _ := db.WebhookDeliveryByID(ctx, "d3")
		if d1.State != store.DeliveryDone || d1.FinishedAt.IsZero() || d3.State != store.DeliveryFailed || d3.LastError != "bad payload" {
			t.Fatalf("final states: d1 %+v, d3 %+v", d1, d3)
		}
	})
}

func TestWebhookLeaseExpiryHandsDeliveryToAnotherWorker(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: "d1", Event: "push", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		// A lease already in the past stands for a worker that died mid-delivery.
		if got, err := db.ClaimWebhookDeliveries(ctx, 1, -time.Second); err != nil || len(got) != 1 {
			t.Fatalf("first claim = %v, %v", got, err)
		}
		got, err := db.ClaimWebhookDeliveries(ctx, 1, time.Minute)
		if err != nil || len(got) != 1 || got[0].Attempts != 2 {
			t.Fatalf("reclaim after expiry = %+v, %v; want attempt 2", got, err)
		}
	})
}

func TestConcurrentClaimsNeverShareADelivery(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const deliveries = 40
		for i := range deliveries {
			id := "d" + string(rune('A'+i/26)) + string(rune('a'+i%26))
			if err := db.InsertWebhookDelivery(ctx, store.WebhookDelivery{DeliveryID: id, Event: "push", Payload: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		seen := map[string]int{}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					got, err := db.ClaimWebhookDeliveries(ctx, 3, time.Minute)
					if err != nil {
						t.Error(err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, d := range got {
						seen[d.DeliveryID]++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(seen) != deliveries {
			t.Fatalf("claimed %d distinct deliveries, want %d", len(seen), deliveries)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("delivery %s claimed %d times", id, n)
			}
		}
	})
}

func TestAuditEvents(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		// In the past, so that the event recorded without a time below (stamped now) is
		// the newest even when the inserts take less than a millisecond.
		base := time.Now().Add(-time.Second)
		for i, action := range []string{"token.create", "token.revoke"} {
			if _, err := db.RecordAuditEvent(ctx, store.AuditEvent{
				TeamID: team.ID, Actor: "cli", Action: action, SubjectType: "api_token", SubjectID: "t1",
				Detail: json.RawMessage(`{"name":"ci"}`), CreatedAt: base.Add(time.Duration(i) * time.Millisecond),
			}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.RecordAuditEvent(ctx, store.AuditEvent{Actor: "system", Action: "webhook.duplicate"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.RecordAuditEvent(ctx, store.AuditEvent{Actor: "x", Action: "y", Detail: json.RawMessage(`[1]`)}); err == nil {
			t.Fatal("non-object detail accepted")
		}
		if _, err := db.RecordAuditEvent(ctx, store.AuditEvent{Action: "y"}); err == nil {
			t.Fatal("event without actor accepted")
		}
		got, err := db.ListAuditEvents(ctx, store.AuditFilter{TeamID: team.ID})
		if err != nil || len(got) != 2 {
			t.Fatalf("ListAuditEvents = %+v, %v", got, err)
		}
		if got[0].Action != "token.revoke" || got[1].Action != "token.create" || string(got[0].Detail) != `{"name":"ci"}` {
			t.Fatalf("events = %+v; want newest first with detail kept", got)
		}
		all, err := db.ListAuditEvents(ctx, store.AuditFilter{})
		if err != nil || len(all) != 3 || all[0].TeamID != "" || string(all[0].Detail) != "{}" {
			t.Fatalf("all events = %+v, %v", all, err)
		}
		err = db.InTx(ctx, func(tx *sqlx.Tx) error {
			if _, err := store.RecordAuditEventTx(ctx, tx, store.AuditEvent{Actor: "x", Action: "rolled.back"}); err != nil {
				return err
			}
			return errors.New("abort")
		})
		if err == nil {
			t.Fatal("InTx returned nil for a failing function")
		}
		if after, _ := db.ListAuditEvents(ctx, store.AuditFilter{}); len(after) != 3 {
			t.Fatalf("audit row of a rolled back transaction persisted: %d rows", len(after))
		}
	})
}
