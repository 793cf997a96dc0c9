// Package webhook owns the GitHub webhook route, POST /webhooks/github: it verifies
// each delivery's signature over the raw body and stores the delivery in the durable
// inbox, answering 202 before any work is done. It must not parse an unverified
// delivery, act on a delivery itself or call GitHub: the inbox's handlers (package
// handler) do the work, later and with retries.
//
// The route has no rate limit, not even on refused deliveries: GitHub does not
// retry a delivery it was refused, and it sends from addresses that every GitHub
// user's webhooks share, so anyone pointing a webhook with another secret here
// could spend such a limit and have the service drop its own deliveries. What
// bounds a refused request instead: one without a signature in GitHub's form is
// refused before its body is read, and a body is read up to MaxBytes within the
// server's read timeout, its HMAC costing about what receiving it does.
package webhook

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"
	"github.com/rs/zerolog"

	"github.com/kukie/kukie-gitops/secret"
	"github.com/kukie/kukie-gitops/server"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/textcut"
)

// Path is the route GitHub delivers to.
const Path = "/webhooks/github"

// MaxBytes is GitHub's cap on a webhook payload.
const MaxBytes = 25 << 20

// Waker is told that a delivery was stored; *handler.Inbox implements it.
type Waker interface{ Wake() }

// Receiver serves the webhook route.
type Receiver struct {
	Store *store.DB
	// Secret verifies deliveries. Unset, the route refuses every delivery: unsigned
	// deliveries are never accepted, in any profile.
	Secret secret.Secret
	// Inbox, when set, is woken for each stored delivery.
	Inbox Waker
}

// Mount adds the route to srv, with GitHub's body limit.
func (rc *Receiver) Mount(srv *server.Server) {
	srv.HandleFunc("POST "+Path, rc.receive, server.MaxBody(MaxBytes))
}

// GitHub's webhook headers.
const (
	headerEvent     = "X-GitHub-Event"
	headerDelivery  = "X-GitHub-Delivery"
	headerSignature = "X-Hub-Signature-256"
)

// maxReasonLength bounds the decoder's error quoted in a refusal.
const maxReasonLength = 300

// maxDeliveryIDLength bounds the delivery id we store as a primary key; GitHub's are
// UUIDs.
const maxDeliveryIDLength = 100

// receive answers POST /webhooks/github. The signature over the raw body is
// checked before anything else; an unverified delivery is neither parsed, nor
// stored, nor run, and one without a signature in GitHub's form is not even read. A
// verified one is stored under its delivery id and answered 202:
// the work happens later in the inbox workers, so GitHub's 10-second limit is never
// at risk and a crash loses nothing. A delivery id seen before is answered 409,
// unless that delivery failed and the body is the one received: GitHub's "Redeliver"
// of it is queued again. GitHub signs the body, not the delivery id, so another
// signed body under a known id is another delivery and never replaces the stored one.
func (rc *Receiver) receive(w http.ResponseWriter, r *http.Request) {
	log := zerolog.Ctx(r.Context())
	if !rc.Secret.IsSet() {
		server.WriteError(w, http.StatusServiceUnavailable, "webhook_secret_missing",
			"no webhook secret is configured, so deliveries cannot be verified and none is accepted")
		return
	}
	// A request that is not signed at all, or not in GitHub's form, is refused before
	// its body (up to 25 MB) is read: the route is public.
	sigHeader := r.Header.Get(headerSignature)
	if code, reason := signatureForm(sigHeader); code != "" {
		rc.refuseSignature(r, code)
		server.WriteError(w, http.StatusUnauthorized, code, reason)
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
	if code, reason := verifySignature(rc.Secret.Reveal(), sigHeader, body); code != "" {
		rc.refuseSignature(r, code)
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
	case !visibleASCII(deliveryID) || !visibleASCII(event):
		// GitHub's are a GUID and an event name. Anything else would be stored as
		// the delivery's key and shown by `webhooks list` as it is (a right-to-left
		// override reorders the columns), and PostgreSQL stores no text that is not
		// UTF-8.
		server.WriteError(w, http.StatusBadRequest, "invalid_header", "X-GitHub-Event and X-GitHub-Delivery hold visible ASCII characters only")
		return
	}
	var envelope struct {
		Action       string `json:"action"`
		Installation struct {
			ID int64 `json:"id"`
		} `json:"installation"`
	}
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); !utf8.Valid(body) || len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(body) {
		server.WriteError(w, http.StatusBadRequest, "invalid_payload", "the delivery body is not a JSON object")
		return
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		// The decoder quotes a number it cannot store whole, which may be megabytes
		// of digits.
		server.WriteError(w, http.StatusBadRequest, "invalid_payload", "the delivery body is not one GitHub sends: "+textcut.Cut(err.Error(), maxReasonLength))
		return
	}

	delivery := store.WebhookDelivery{
		DeliveryID: deliveryID, Event: event, Action: envelope.Action,
		InstallationID: envelope.Installation.ID, Payload: body,
	}
	err = rc.Store.InsertWebhookDelivery(r.Context(), delivery)
	status := "queued"
	if errors.Is(err, store.ErrConflict) {
		// GitHub's "Redeliver" reuses the delivery id and body: a delivery that
		// failed is taken again; one pending, running or done, or another body under
		// the id, is a duplicate.
		var requeued bool
		if requeued, err = rc.Store.RequeueFailedWebhookDelivery(r.Context(), delivery); err == nil && requeued {
			log.Info().Str("delivery_id", deliveryID).Str("event", event).Msg("Redelivery of a failed webhook delivery queued again")
			rc.audit(r, store.AuditEvent{Actor: "github", Action: "webhook.redelivery_requeued", SubjectType: "webhook_delivery",
				SubjectID: deliveryID, Detail: detail(map[string]string{"event": event, "action": envelope.Action})})
			status = "requeued"
		} else if err == nil {
			err = store.ErrConflict
		}
	}
	if errors.Is(err, store.ErrConflict) {
		log.Info().Str("delivery_id", deliveryID).Str("event", event).Msg("Webhook redelivery ignored")
		rc.audit(r, store.AuditEvent{Actor: "github", Action: "webhook.redelivery", SubjectType: "webhook_delivery",
			SubjectID: deliveryID, Detail: detail(map[string]string{"event": event, "action": envelope.Action})})
		server.WriteError(w, http.StatusConflict, "duplicate_delivery", "this delivery id was already received (its delivery is queued, running or done, or had another body); a delivery is processed once")
		return
	}
	if err != nil {
		log.Error().Err(err).Str("delivery_id", deliveryID).Msg("Storing webhook delivery failed")
		// 503 makes GitHub show the failure; a redelivery will be accepted.
		server.WriteError(w, http.StatusServiceUnavailable, "store_unavailable", "the delivery could not be stored; redeliver it later")
		return
	}
	if rc.Inbox != nil {
		rc.Inbox.Wake()
	}
	server.WriteJSON(w, http.StatusAccepted, map[string]string{"delivery_id": deliveryID, "status": status})
}

func (rc *Receiver) refuseSignature(r *http.Request, code string) {
	zerolog.Ctx(r.Context()).Warn().Str("reason", code).Str("delivery_id", textcut.Cut(r.Header.Get(headerDelivery), maxDeliveryIDLength)).
		Msg("Webhook delivery refused: signature")
}

// signatureForm checks that X-Hub-Signature-256 is there and has GitHub's form,
// "sha256=<hex>", returning an error code and reason, or "". Only sha256 is taken:
// go-github also accepts sha1= and sha512=, which this header never carries, and a
// weaker scheme named in it must not pass.
func signatureForm(header string) (string, string) {
	if header == "" {
		return "missing_signature", "X-Hub-Signature-256 is required; unsigned deliveries are never accepted"
	}
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if _, err := hex.DecodeString(hexSig); !ok || err != nil {
		return "invalid_signature", "X-Hub-Signature-256 must look like sha256=<hex>"
	}
	return "", ""
}

// verifySignature checks GitHub's X-Hub-Signature-256 (the hex HMAC of the body,
// in the form signatureForm checks); go-github computes the HMAC and compares it in
// constant time. It returns an error code and reason, or "" when valid.
func verifySignature(secret, header string, body []byte) (string, string) {
	if code, reason := signatureForm(header); code != "" {
		return code, reason
	}
	if err := gh.ValidateSignature(header, body, []byte(secret)); err != nil {
		return "invalid_signature", "the signature does not match the body and the configured webhook secret"
	}
	return "", ""
}

// visibleASCII reports whether s holds only printable ASCII characters, no space.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// audit records an event; a failure is logged, not answered, since the delivery it
// describes has already been handled.
func (rc *Receiver) audit(r *http.Request, e store.AuditEvent) {
	if _, err := rc.Store.RecordAuditEvent(r.Context(), e); err != nil {
		zerolog.Ctx(r.Context()).Error().Err(err).Str("action", e.Action).Msg("Recording audit event failed")
	}
}

// detail encodes an audit detail; a map of strings always encodes.
func detail(m map[string]string) json.RawMessage {
	b, _ := json.Marshal(m)
	return b
}
