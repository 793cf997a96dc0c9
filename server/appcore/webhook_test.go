package appcore_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server/appcore"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func sign(key secret.Secret, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key.Reveal()))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func (e *env) postHook(id, event, signature string, body []byte) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.http.URL+appcore.WebhookPath, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	if signature != "" {
		req.Header.Set("X-Hub-Signature-256", signature)
	}
	res, err := e.http.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(res.Body)
	return res.StatusCode, buf.String()
}

func TestWebhookSignatureIsCheckedFirst(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		body := []byte(`{"action":"created","installation":{"id":1}}`)
		good := sign(e.gh.WebhookSecret(), body)
		other := sign(secret.New("not-the-secret"), body)
		cases := map[string]struct {
			signature string
			body      []byte
			wantCode  string
		}{
			"missing":            {signature: "", body: body, wantCode: "missing_signature"},
			"wrong secret":       {signature: other, body: body, wantCode: "invalid_signature"},
			"body changed":       {signature: good, body: []byte(`{"action":"deleted","installation":{"id":1}}`), wantCode: "invalid_signature"},
			"sha1 scheme":        {signature: "sha1=" + strings.TrimPrefix(good, "sha256="), body: body, wantCode: "invalid_signature"},
			"not hex":            {signature: "sha256=zz", body: body, wantCode: "invalid_signature"},
			"truncated":          {signature: good[:len(good)-2], body: body, wantCode: "invalid_signature"},
			"signature of empty": {signature: sign(e.gh.WebhookSecret(), nil), body: body, wantCode: "invalid_signature"},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				id := "bad-" + strings.ReplaceAll(name, " ", "-")
				status, resp := e.postHook(id, "installation", tc.signature, tc.body)
				if status != http.StatusUnauthorized || !strings.Contains(resp, tc.wantCode) {
					t.Errorf("= %d %s, want 401 %s", status, resp, tc.wantCode)
				}
				if _, err := db.WebhookDeliveryByID(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("a refused delivery was stored: %v", err)
				}
			})
		}
		status, resp := e.postHook("good-1", "installation", good, body)
		if status != http.StatusAccepted {
			t.Fatalf("signed delivery = %d %s, want 202", status, resp)
		}
		d, err := db.WebhookDeliveryByID(context.Background(), "good-1")
		if err != nil || d.Event != "installation" || d.Action != "created" || d.InstallationID != 1 || !bytes.Equal(d.Payload, body) {
			t.Errorf("stored delivery = %+v, %v", d, err)
		}
		status, resp = e.postHook("good-2", "installation", sign(e.gh.WebhookSecret(), []byte(`[1,2]`)), []byte(`[1,2]`))
		if status != http.StatusBadRequest || !strings.Contains(resp, "invalid_payload") {
			t.Errorf("signed non-object = %d %s, want 400 invalid_payload", status, resp)
		}
		status, resp = e.postHook("", "installation", good, body)
		if status != http.StatusBadRequest || !strings.Contains(resp, "missing_header") {
			t.Errorf("no delivery id = %d %s, want 400 missing_header", status, resp)
		}
	})
}

func TestWebhookWithoutSecretRefusesEverything(t *testing.T) {
	db := storetest.SQLite(t)
	e := newEnv(t, db, func(a *appcore.API) { a.WebhookSecret = "" })
	body := []byte(`{"action":"created"}`)
	for name, sig := range map[string]string{
		"unsigned":             "",
		"signed with nothing":  sign("", body),
		"signed by the fake's": sign(e.gh.WebhookSecret(), body),
	} {
		t.Run(name, func(t *testing.T) {
			status, resp := e.postHook("d-"+strings.ReplaceAll(name, " ", "-"), "installation", sig, body)
			if status != http.StatusServiceUnavailable || !strings.Contains(resp, "webhook_secret_missing") {
				t.Errorf("= %d %s, want 503 webhook_secret_missing", status, resp)
			}
		})
	}
	list, err := db.ListAuditEvents(context.Background(), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.WebhookDeliveryByID(context.Background(), "d-unsigned"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delivery stored without a secret: %v (audit %v)", err, list)
	}
}

func TestWebhookRedeliveryIsRefusedAndAuditedWithOneEffect(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		e.gh.CreateRepo(t, "acme", "infra", nil, "main")
		id := e.gh.CreateInstallation(t, "acme", "deploy")
		if status, page := e.bind(e.tokenA, id); status != http.StatusOK {
			t.Fatalf("bind: %d %s", status, page)
		}
		e.drain()
		e.gh.AddInstallationRepos(t, id, "infra")
		e.gh.WaitForDeliveries()
		added := e.gh.DeliveriesOf("installation_repositories", "added")
		if len(added) != 1 || added[0].StatusCode != http.StatusAccepted {
			t.Fatalf("added deliveries = %+v, want one accepted", added)
		}
		again := e.gh.Redeliver(t, added[0].ID)
		if again.StatusCode != http.StatusConflict || !strings.Contains(again.ResponseBody, "duplicate_delivery") {
			t.Fatalf("redelivery = %d %s, want 409 duplicate_delivery", again.StatusCode, again.ResponseBody)
		}
		e.drain()
		events, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "webhook_delivery", SubjectID: added[0].ID})
		if err != nil || len(events) != 1 || events[0].Action != "webhook.redelivery" {
			t.Errorf("audit of the redelivery = %+v, %v; want one webhook.redelivery", events, err)
		}
		d, err := db.WebhookDeliveryByID(ctx, added[0].ID)
		if err != nil || d.State != store.DeliveryDone || d.Attempts != 1 {
			t.Errorf("delivery = %+v, %v; want done after one attempt", d, err)
		}
		repos, err := db.InstallationRepos(ctx, id)
		if err != nil || len(repos) != 2 {
			t.Errorf("installation repos = %+v, %v; want deploy and infra", repos, err)
		}
	})
}

// TestWebhookRedeliveryOfAFailedDeliveryIsQueuedAgain: GitHub's "Redeliver" of a
// delivery the inbox gave up on (same delivery id) is accepted, audited, and runs.
func TestWebhookRedeliveryOfAFailedDeliveryIsQueuedAgain(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		e.gh.CreateRepo(t, "acme", "deploy", nil, "main")
		e.gh.CreateRepo(t, "acme", "infra", nil, "main")
		id := e.gh.CreateInstallation(t, "acme", "deploy")
		if status, page := e.bind(e.tokenA, id); status != http.StatusOK {
			t.Fatalf("bind: %d %s", status, page)
		}
		e.drain()
		e.gh.AddInstallationRepos(t, id, "infra")
		e.gh.WaitForDeliveries()
		added := e.gh.DeliveriesOf("installation_repositories", "added")
		if len(added) != 1 || added[0].StatusCode != http.StatusAccepted {
			t.Fatalf("added deliveries = %+v, want one accepted", added)
		}
		// The inbox gives up on it (as after its last attempt during an outage).
		claimed, err := db.ClaimWebhookDeliveries(ctx, 10, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].DeliveryID != added[0].ID {
			t.Fatalf("claim = %+v, %v", claimed, err)
		}
		if err := db.FailWebhookDelivery(ctx, claimed[0].Claim(), "github said 502"); err != nil {
			t.Fatal(err)
		}

		again := e.gh.Redeliver(t, added[0].ID)
		if again.StatusCode != http.StatusAccepted || !strings.Contains(again.ResponseBody, "requeued") {
			t.Fatalf("redelivery of a failed delivery = %d %s, want 202 requeued", again.StatusCode, again.ResponseBody)
		}
		events, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "webhook_delivery", SubjectID: added[0].ID})
		if err != nil || len(events) != 1 || events[0].Action != "webhook.redelivery_requeued" {
			t.Errorf("audit of the redelivery = %+v, %v; want one webhook.redelivery_requeued", events, err)
		}
		e.drain()
		d, err := db.WebhookDeliveryByID(ctx, added[0].ID)
		if err != nil || d.State != store.DeliveryDone || d.LastError != "" {
			t.Errorf("delivery = %+v, %v; want done after the redelivery", d, err)
		}
		repos, err := db.InstallationRepos(ctx, id)
		if err != nil || len(repos) != 2 {
			t.Errorf("installation repos = %+v, %v; want deploy and infra", repos, err)
		}
		// Once done, a further redelivery is a duplicate again.
		if third := e.gh.Redeliver(t, added[0].ID); third.StatusCode != http.StatusConflict {
			t.Errorf("redelivery of a done delivery = %d %s, want 409", third.StatusCode, third.ResponseBody)
		}
	})
}
