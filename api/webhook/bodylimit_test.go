package webhook_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/api/webhook"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestWebhookOverGitHubsLimitIsRefused: a delivery in GitHub's signature form whose
// body runs past GitHub's 25 MB is refused 413 body_too_large, read no further than
// the limit and stored nowhere, while one within the server's default limit and
// above it (which only this route allows) is not refused for its size.
func TestWebhookOverGitHubsLimitIsRefused(t *testing.T) {
	db := storetest.SQLite(t)
	srv, err := server.New(server.Config{}, server.Deps{Logger: zerolog.Nop(), Auth: db})
	if err != nil {
		t.Fatal(err)
	}
	(&webhook.Receiver{Store: db, Secret: hookSecret}).Mount(srv)
	post := func(size int) (*httptest.ResponseRecorder, *countingBody) {
		// A signature in GitHub's form; the body is never verified if it is too large.
		body := &countingBody{r: io.MultiReader(strings.NewReader(`{"pad":"`), io.LimitReader(zeros{}, int64(size)))}
		req := httptest.NewRequest(http.MethodPost, webhook.Path, nil)
		req.Body = body
		req.Header.Set("X-GitHub-Event", "installation")
		req.Header.Set("X-GitHub-Delivery", "d-big")
		req.Header.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		return rec, body
	}

	rec, body := post(webhook.MaxBytes)
	var answer server.ErrorBody
	if rec.Code != http.StatusRequestEntityTooLarge || json.Unmarshal(rec.Body.Bytes(), &answer) != nil ||
		answer.Error != "body_too_large" || !strings.Contains(answer.Reason, "25 MB") {
		t.Fatalf("a delivery past 25 MB: %d %s, want 413 body_too_large naming GitHub's limit", rec.Code, rec.Body)
	}
	if body.read > webhook.MaxBytes+1 {
		t.Errorf("%d bytes read of a body past the limit of %d", body.read, webhook.MaxBytes)
	}
	if _, err := db.WebhookDeliveryByID(t.Context(), "d-big"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the delivery past the limit was stored (%v)", err)
	}

	rec, _ = post(2 * server.DefaultMaxBodyBytes)
	if rec.Code != http.StatusUnauthorized || !bytes.Contains(rec.Body.Bytes(), []byte("invalid_signature")) {
		t.Errorf("a delivery of 2 MiB with a wrong signature: %d %s, want 401 invalid_signature (read whole, not refused for its size)", rec.Code, rec.Body)
	}
}

// zeros reads as an endless run of the digit 0.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}
