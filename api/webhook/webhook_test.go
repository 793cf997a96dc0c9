package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func sign(key secret.Secret, body []byte) string {
	return signWith(sha256.New, "sha256=", key, body)
}

func signWith(h func() hash.Hash, prefix string, key secret.Secret, body []byte) string {
	mac := hmac.New(h, []byte(key.Reveal()))
	mac.Write(body)
	return prefix + hex.EncodeToString(mac.Sum(nil))
}

// env is the webhook route on a server over a real database, verifying with
// hookSecret unless the test says otherwise.
type env struct {
	t    *testing.T
	http *httptest.Server
}

var hookSecret = secret.New("webhook-test-secret")

func newEnv(t *testing.T, db *store.DB, opts ...func(*webhook.Receiver)) *env {
	t.Helper()
	rc := &webhook.Receiver{Store: db, Secret: hookSecret}
	for _, o := range opts {
		o(rc)
	}
	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db})
	if err != nil {
		t.Fatal(err)
	}
	rc.Mount(srv)
	e := &env{t: t, http: httptest.NewServer(srv.Handler())}
	t.Cleanup(e.http.Close)
	return e
}

func (e *env) postHook(id, event, signature string, body []byte) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.http.URL+webhook.Path, bytes.NewReader(body))
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
		good := sign(hookSecret, body)
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
			"signature of empty": {signature: sign(hookSecret, nil), body: body, wantCode: "invalid_signature"},
			// Valid HMACs in schemes other than the header's own are refused too.
			"true sha1 HMAC":   {signature: signWith(sha1.New, "sha1=", hookSecret, body), body: body, wantCode: "invalid_signature"},
			"true sha512 HMAC": {signature: signWith(sha512.New, "sha512=", hookSecret, body), body: body, wantCode: "invalid_signature"},
			"no scheme":        {signature: strings.TrimPrefix(good, "sha256="), body: body, wantCode: "invalid_signature"},
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
		status, resp = e.postHook("good-2", "installation", sign(hookSecret, []byte(`[1,2]`)), []byte(`[1,2]`))
		if status != http.StatusBadRequest || !strings.Contains(resp, "invalid_payload") {
			t.Errorf("signed non-object = %d %s, want 400 invalid_payload", status, resp)
		}
		status, resp = e.postHook("", "installation", good, body)
		if status != http.StatusBadRequest || !strings.Contains(resp, "missing_header") {
			t.Errorf("no delivery id = %d %s, want 400 missing_header", status, resp)
		}
	})
}

// TestWebhookSignedBodyAndHeadersAreGitHubs: a signed delivery is stored only when
// its body is a JSON object and its delivery id and event are visible ASCII, as
// GitHub's GUIDs and event names are; a refusal says which (failed before: a signed
// null was queued as a delivery, an object whose installation id is a string was
// "not a JSON object", and a delivery id with a right-to-left override was stored
// and listed as it is; an installation id of a megabyte of digits was quoted whole
// in the answer).
func TestWebhookSignedBodyAndHeadersAreGitHubs(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		body := []byte(`{"action":"created","installation":{"id":1}}`)
		cases := map[string]struct {
			id, event  string
			body       []byte
			wantStatus int
			wantReason string
		}{
			"GitHub's":               {"72d3162e-cc78-11e3-81ab-4c9367dc0958", "installation", body, http.StatusAccepted, ""},
			"null":                   {"d-null", "installation", []byte(`null`), http.StatusBadRequest, "not a JSON object"},
			"a string":               {"d-string", "installation", []byte(` "x"`), http.StatusBadRequest, "not a JSON object"},
			"an id of another type":  {"d-type", "installation", []byte(`{"installation":{"id":"1"}}`), http.StatusBadRequest, "not one GitHub sends: json: cannot unmarshal string"},
			"a right-to-left id":     {"d-‮rtl", "installation", body, http.StatusBadRequest, "visible ASCII"},
			"an id with a space":     {"d 1", "installation", body, http.StatusBadRequest, "visible ASCII"},
			"an event not ASCII":     {"d-event", "instalаtion", body, http.StatusBadRequest, "visible ASCII"},
			"an id that is not UTF8": {"d-ÿ", "installation", body, http.StatusBadRequest, "visible ASCII"},
			"an installation id of a megabyte": {"d-huge", "installation", []byte(`{"installation":{"id":` + strings.Repeat("9", 1<<20) + `}}`),
				http.StatusBadRequest, "not one GitHub sends: json: cannot unmarshal number 999"},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				status, resp := e.postHook(tc.id, tc.event, sign(hookSecret, tc.body), tc.body)
				if status != tc.wantStatus || !strings.Contains(resp, tc.wantReason) {
					t.Fatalf("= %d %.500s, want %d saying %q", status, resp, tc.wantStatus, tc.wantReason)
				}
				if len(resp) > 1000 {
					t.Errorf("answer of %d bytes: %.200s…", len(resp), resp)
				}
				_, err := db.WebhookDeliveryByID(context.Background(), tc.id)
				if stored := err == nil; stored != (tc.wantStatus == http.StatusAccepted) {
					t.Fatalf("stored: %v (%v), want %v", stored, err, tc.wantStatus == http.StatusAccepted)
				}
			})
		}
	})
}

func TestWebhookWithoutSecretRefusesEverything(t *testing.T) {
	db := storetest.SQLite(t)
	e := newEnv(t, db, func(rc *webhook.Receiver) { rc.Secret = "" })
	body := []byte(`{"action":"created"}`)
	for name, sig := range map[string]string{
		"unsigned":             "",
		"signed with nothing":  sign("", body),
		"signed by the test's": sign(hookSecret, body),
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

// TestWebhookRedeliveryWithAnotherBodyIsRefused: the delivery id is not signed, so a
// validly signed body sent under the id of a delivery that failed is another
// delivery: it must neither replace what was received under that id nor run in its
// place. GitHub's own redelivery (the same body) is queued again.
func TestWebhookRedeliveryWithAnotherBodyIsRefused(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		e := newEnv(t, db)
		first := []byte(`{"action":"added","installation":{"id":1}}`)
		if status, resp := e.postHook("d-1", "installation_repositories", sign(hookSecret, first), first); status != http.StatusAccepted {
			t.Fatalf("first delivery = %d %s", status, resp)
		}
		claimed, err := db.ClaimWebhookDeliveries(ctx, 10, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim = %+v, %v", claimed, err)
		}
		if err := db.FailWebhookDelivery(ctx, claimed[0].Claim(), "gave up"); err != nil {
			t.Fatal(err)
		}
		other := []byte(`{"action":"removed","installation":{"id":1}}`)
		status, resp := e.postHook("d-1", "installation_repositories", sign(hookSecret, other), other)
		if status != http.StatusConflict || !strings.Contains(resp, "duplicate_delivery") {
			t.Errorf("another body under a failed delivery's id = %d %s, want 409 duplicate_delivery", status, resp)
		}
		d, err := db.WebhookDeliveryByID(ctx, "d-1")
		if err != nil || d.State != store.DeliveryFailed || !bytes.Equal(d.Payload, first) || d.Action != "added" {
			t.Errorf("stored delivery = %+v, %v; want the failed one as first received", d, err)
		}
		status, resp = e.postHook("d-1", "installation_repositories", sign(hookSecret, first), first)
		if status != http.StatusAccepted || !strings.Contains(resp, "requeued") {
			t.Errorf("redelivery of the same body = %d %s, want 202 requeued", status, resp)
		}
	})
}

// countingBody is a request body that counts the bytes read from it.
type countingBody struct {
	r    io.Reader
	read int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *countingBody) Close() error { return nil }

// TestWebhookUnsignedBodyIsNotRead: the route is public and takes bodies up to 25 MB;
// a request without a signature in GitHub's form is refused before its body is read,
// so unsigned floods cost no memory. A signed one is read whole, as before.
func TestWebhookUnsignedBodyIsNotRead(t *testing.T) {
	db := storetest.SQLite(t)
	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db})
	if err != nil {
		t.Fatal(err)
	}
	(&webhook.Receiver{Store: db, Secret: hookSecret}).Mount(srv)
	payload := append([]byte(`{"action":"created","pad":"`), bytes.Repeat([]byte("x"), 4<<20)...)
	payload = append(payload, `"}`...)
	for name, tc := range map[string]struct {
		signature string
		status    int
		wantRead  bool
	}{
		"unsigned":       {signature: "", status: http.StatusUnauthorized},
		"not GitHub's":   {signature: "sha1=00", status: http.StatusUnauthorized},
		"signed, wrong":  {signature: sign(secret.New("other"), payload), status: http.StatusUnauthorized, wantRead: true},
		"signed, GitHub": {signature: sign(hookSecret, payload), status: http.StatusAccepted, wantRead: true},
	} {
		t.Run(name, func(t *testing.T) {
			body := &countingBody{r: bytes.NewReader(payload)}
			req := httptest.NewRequest(http.MethodPost, webhook.Path, nil)
			req.Body = body
			req.Header.Set("X-GitHub-Event", "installation")
			req.Header.Set("X-GitHub-Delivery", "d-"+strings.ReplaceAll(name, " ", ""))
			if tc.signature != "" {
				req.Header.Set("X-Hub-Signature-256", tc.signature)
			}
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("= %d %s, want %d", rec.Code, rec.Body, tc.status)
			}
			if read := body.read == len(payload); read != tc.wantRead || (!tc.wantRead && body.read != 0) {
				t.Errorf("%d of %d body bytes read, want all: %v", body.read, len(payload), tc.wantRead)
			}
		})
	}
}
