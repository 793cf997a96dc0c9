package appcore

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
)

// GitHub's webhook headers.
const (
	headerEvent     = "X-GitHub-Event"
	headerDelivery  = "X-GitHub-Delivery"
	headerSignature = "X-Hub-Signature-256"
)

// maxDeliveryIDLength bounds the delivery id we store as a primary key; GitHub's are
// UUIDs.
const maxDeliveryIDLength = 100

// receiveWebhook answers POST /webhooks/github. The signature over the raw body is
// checked before anything else; an unverified delivery is neither parsed, nor
// stored, nor run. A verified one is stored under its delivery id and answered 202:
// the work happens later in the inbox workers, so GitHub's 10-second limit is never
// at risk and a crash loses nothing. A delivery id seen before is answered 409,
// unless that delivery failed: GitHub's "Redeliver" of it is queued again.
func (a *API) receiveWebhook(w http.ResponseWriter, r *http.Request) {
	if !a.WebhookSecret.IsSet() {
		server.WriteError(w, http.StatusServiceUnavailable, "webhook_secret_missing",
			"no webhook secret is configured, so deliveries cannot be verified and none is accepted")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			server.WriteError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the delivery is larger than GitHub's 25 MB limit")
			return
		}
		server.WriteError(w, http.StatusBadRequest, "unreadable_body", "the delivery body could not be read")
		return
	}
	if code, reason := verifySignature(a.WebhookSecret.Reveal(), r.Header.Get(headerSignature), body); code != "" {
		logger(r).Warn().Str("reason", code).Str("delivery_id", truncate(r.Header.Get(headerDelivery), maxDeliveryIDLength)).
			Msg("Webhook delivery refused: signature")
		server.WriteError(w, http.StatusUnauthorized, code, reason)
		return
	}

	event := r.Header.Get(headerEvent)
	deliveryID := r.Header.Get(headerDelivery)
	switch {
	case event == "" || deliveryID == "":
		server.WriteError(w, http.StatusBadRequest, "missing_header", "X-GitHub-Event and X-GitHub-Delivery are required")
		return
	case len(deliveryID) > maxDeliveryIDLength || len(event) > 100:
		server.WriteError(w, http.StatusBadRequest, "invalid_header", "X-GitHub-Event or X-GitHub-Delivery is too long")
		return
	}
	var envelope struct {
		Action       string `json:"action"`
		Installation struct {
			ID int64 `json:"id"`
		} `json:"installation"`
	}
	if !utf8.Valid(body) || json.Unmarshal(body, &envelope) != nil {
		server.WriteError(w, http.StatusBadRequest, "invalid_payload", "the delivery body is not a JSON object")
		return
	}

	delivery := store.WebhookDelivery{
		DeliveryID: deliveryID, Event: event, Action: envelope.Action,
		InstallationID: envelope.Installation.ID, Payload: body,
	}
	err = a.Store.InsertWebhookDelivery(r.Context(), delivery)
	status := "queued"
	if errors.Is(err, store.ErrConflict) {
		// GitHub's "Redeliver" reuses the delivery id: a delivery that failed is
		// taken again; one pending, running or done is a duplicate.
		var requeued bool
		if requeued, err = a.Store.RequeueFailedWebhookDelivery(r.Context(), delivery); err == nil && requeued {
			logger(r).Info().Str("delivery_id", deliveryID).Str("event", event).Msg("Redelivery of a failed webhook delivery queued again")
			a.audit(r, store.AuditEvent{Actor: "github", Action: "webhook.redelivery_requeued", SubjectType: "webhook_delivery",
				SubjectID: deliveryID, Detail: mustJSON(map[string]string{"event": event, "action": envelope.Action})})
			status = "requeued"
		} else if err == nil {
			err = store.ErrConflict
		}
	}
	if errors.Is(err, store.ErrConflict) {
		logger(r).Info().Str("delivery_id", deliveryID).Str("event", event).Msg("Webhook redelivery ignored")
		a.audit(r, store.AuditEvent{Actor: "github", Action: "webhook.redelivery", SubjectType: "webhook_delivery",
			SubjectID: deliveryID, Detail: mustJSON(map[string]string{"event": event, "action": envelope.Action})})
		server.WriteError(w, http.StatusConflict, "duplicate_delivery", "this delivery was already received and is queued, running or done; it is processed once")
		return
	}
	if err != nil {
		logger(r).Error().Err(err).Str("delivery_id", deliveryID).Msg("Storing webhook delivery failed")
		// 503 makes GitHub show the failure; a redelivery will be accepted.
		server.WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "the delivery could not be stored; redeliver it later")
		return
	}
	if a.Inbox != nil {
		a.Inbox.Wake()
	}
	server.WriteJSON(w, http.StatusAccepted, map[string]string{"delivery_id": deliveryID, "status": status})
}

// verifySignature checks GitHub's X-Hub-Signature-256 ("sha256=<hex HMAC of the
// body>") in constant time. It returns an error code and reason, or "" when valid.
func verifySignature(secret, header string, body []byte) (string, string) {
	if header == "" {
		return "missing_signature", "X-Hub-Signature-256 is required; unsigned deliveries are never accepted"
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return "invalid_signature", "X-Hub-Signature-256 must look like sha256=<hex>"
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return "invalid_signature", "X-Hub-Signature-256 must look like sha256=<hex>"
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return "invalid_signature", "the signature does not match the body and the configured webhook secret"
	}
	return "", ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
