package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"time"
	"unicode/utf8"
)

// DeliveryState is where a webhook delivery is in the inbox.
type DeliveryState string

const (
	DeliveryPending    DeliveryState = "pending"
	DeliveryProcessing DeliveryState = "processing"
	DeliveryDone       DeliveryState = "done"
	DeliveryFailed     DeliveryState = "failed"
)

// WebhookDelivery is one GitHub webhook delivery stored in the durable inbox.
type WebhookDelivery struct {
	DeliveryID     string // X-GitHub-Delivery
	Event          string // X-GitHub-Event
	Action         string
	InstallationID int64 // 0 when the event has none
	Payload        []byte
	State          DeliveryState
	Attempts       int
	// FreeAttempts are the attempts that do not count toward giving up: those GitHub's
	// rate limits deferred, and those before a redelivery or replay of a failed
	// delivery. Attempts - FreeAttempts is what the inbox's limit applies to.
	FreeAttempts int
	LastError    string
	// SkipReason says why a done delivery was not acted on; empty when it was.
	SkipReason     string
	ReceivedAt     time.Time
	LeaseExpiresAt time.Time
	FinishedAt     time.Time
}

type webhookRow struct {
	DeliveryID     string        `db:"delivery_id"`
	Event          string        `db:"event"`
	Action         string        `db:"action"`
	InstallationID sql.NullInt64 `db:"installation_id"`
	Payload        string        `db:"payload"`
	State          string        `db:"state"`
	Attempts       int           `db:"attempts"`
	FreeAttempts   int           `db:"free_attempts"`
	LastError      string        `db:"last_error"`
	SkipReason     string        `db:"skip_reason"`
	ReceivedAt     int64         `db:"received_at"`
	LeaseExpiresAt sql.NullInt64 `db:"lease_expires_at"`
	FinishedAt     sql.NullInt64 `db:"finished_at"`
}

const webhookColumns = `delivery_id, event, action, installation_id, payload, state, attempts, free_attempts, last_error,
	skip_reason, received_at, lease_expires_at, finished_at`

func (r webhookRow) delivery() WebhookDelivery {
	return WebhookDelivery{
		DeliveryID:     r.DeliveryID,
		Event:          r.Event,
		Action:         r.Action,
		InstallationID: r.InstallationID.Int64,
		Payload:        []byte(r.Payload),
		State:          DeliveryState(r.State),
		Attempts:       r.Attempts,
		FreeAttempts:   r.FreeAttempts,
		LastError:      r.LastError,
		SkipReason:     r.SkipReason,
		ReceivedAt:     fromMillis(r.ReceivedAt),
		LeaseExpiresAt: nullMillis(r.LeaseExpiresAt),
		FinishedAt:     nullMillis(r.FinishedAt),
	}
}

// InsertWebhookDelivery stores a verified delivery as pending. A delivery id seen
// before is ErrConflict, which is how redeliveries are recognised (see
// RequeueFailedWebhookDelivery for one that had failed).
func (db *DB) InsertWebhookDelivery(ctx context.Context, d WebhookDelivery) error {
	switch {
	case d.DeliveryID == "":
		return errors.New("store webhook delivery: delivery id is empty")
	case d.Event == "":
		return fmt.Errorf("store webhook delivery %s: event is empty", d.DeliveryID)
	case !utf8.Valid(d.Payload):
		return fmt.Errorf("store webhook delivery %s: payload is not valid UTF-8", d.DeliveryID)
	}
	received := d.ReceivedAt
	if received.IsZero() {
		received = time.Now()
	}
	row := webhookRow{
		DeliveryID:     d.DeliveryID,
		Event:          d.Event,
		Action:         d.Action,
		InstallationID: sql.NullInt64{Int64: d.InstallationID, Valid: d.InstallationID != 0},
		Payload:        string(d.Payload),
		State:          string(DeliveryPending),
		ReceivedAt:     toMillis(received),
	}
	_, err := db.NamedExecContext(ctx, `INSERT INTO webhook_deliveries
		(delivery_id, event, action, installation_id, payload, state, attempts, last_error, received_at)
		VALUES (:delivery_id, :event, :action, :installation_id, :payload, :state, 0, '', :received_at)`, row)
	if IsUniqueViolation(err) {
		return fmt.Errorf("store webhook delivery %s: %w", d.DeliveryID, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("store webhook delivery %s: %w", d.DeliveryID, err)
	}
	return nil
}

// WebhookDeliveryByID reads one delivery.
func (db *DB) WebhookDeliveryByID(ctx context.Context, id string) (WebhookDelivery, error) {
	var row webhookRow
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT `+webhookColumns+` FROM webhook_deliveries WHERE delivery_id = ?`), id)
	if errors.Is(err, sql.ErrNoRows) {
		return WebhookDelivery{}, fmt.Errorf("webhook delivery %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return WebhookDelivery{}, fmt.Errorf("read webhook delivery %s: %w", id, err)
	}
	return row.delivery(), nil
}

// ClaimWebhookDeliveries leases up to limit deliveries to the caller for lease: the
// oldest pending ones, and processing ones whose lease ran out (their worker died).
// On PostgreSQL concurrent claimers skip each other's rows (FOR UPDATE SKIP LOCKED),
// so several replicas share the inbox; on SQLite the write lock serialises them.
func (db *DB) ClaimWebhookDeliveries(ctx context.Context, limit int, lease time.Duration) ([]WebhookDelivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	now := time.Now()
	lock := ""
	if db.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	query := db.Rebind(`UPDATE webhook_deliveries
		SET state = ?, attempts = attempts + 1, lease_expires_at = ?
		WHERE delivery_id IN (
			SELECT delivery_id FROM webhook_deliveries
			WHERE (state = ? AND (next_attempt_at IS NULL OR next_attempt_at <= ?))
				OR (state = ? AND lease_expires_at < ?)
			ORDER BY received_at, delivery_id
			LIMIT ?` + lock + `)
		RETURNING ` + webhookColumns)
	var rows []webhookRow
	// next_attempt_at (migration 0002) holds back deliveries waiting out a retry
	// backoff; see RetryWebhookDeliveryAt.
	if err := db.SelectContext(ctx, &rows, query,
		DeliveryProcessing, toMillis(now.Add(lease)), DeliveryPending, toMillis(now), DeliveryProcessing, toMillis(now), limit); err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	out := make([]WebhookDelivery, len(rows))
	for i, r := range rows {
		out[i] = r.delivery()
	}
	// RETURNING has no defined order.
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ReceivedAt.Equal(out[j].ReceivedAt) {
			return out[i].ReceivedAt.Before(out[j].ReceivedAt)
		}
		return out[i].DeliveryID < out[j].DeliveryID
	})
	return out, nil
}

// DeliveryClaim identifies one claim of a delivery: the delivery and the attempt
// number its claim returned. Claims are fenced by it: once a lease runs out and
// another worker claims the delivery again, attempts moves on, and the outcome of
// the older claim is refused with ErrLeaseLost instead of overwriting the newer
// attempt's state.
type DeliveryClaim struct {
	DeliveryID string
	Attempt    int
}

// Claim is the claim this delivery, as returned by ClaimWebhookDeliveries, stands for.
func (d WebhookDelivery) Claim() DeliveryClaim {
	return DeliveryClaim{DeliveryID: d.DeliveryID, Attempt: d.Attempts}
}

func (c DeliveryClaim) String() string {
	return fmt.Sprintf("webhook delivery %s attempt %d", c.DeliveryID, c.Attempt)
}

// CompleteWebhookDelivery marks a claimed delivery as processed. ErrLeaseLost when
// the claim no longer holds the delivery, ErrNotFound when there is no such delivery.
func (db *DB) CompleteWebhookDelivery(ctx context.Context, claim DeliveryClaim) error {
	return db.finishWebhookDelivery(ctx, claim, DeliveryDone, "")
}

// FailWebhookDelivery parks a claimed delivery as failed, keeping why; it is not
// tried again (RetryWebhookDeliveryAt is for failures worth another attempt).
// ErrLeaseLost when the claim no longer holds the delivery, ErrNotFound when there is
// no such delivery.
func (db *DB) FailWebhookDelivery(ctx context.Context, claim DeliveryClaim, reason string) error {
	return db.finishWebhookDelivery(ctx, claim, DeliveryFailed, reason)
}

// SkipWebhookDelivery finishes a claimed delivery as done without it having been
// acted on, keeping why (a payload its handler cannot act on and never will).
// ErrLeaseLost when the claim no longer holds the delivery, ErrNotFound when there
// is no such delivery.
func (db *DB) SkipWebhookDelivery(ctx context.Context, claim DeliveryClaim, reason string) error {
	if reason == "" {
		return fmt.Errorf("skip %s: a reason is required", claim)
	}
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE webhook_deliveries
		SET state = ?, last_error = '', skip_reason = ?, lease_expires_at = NULL, finished_at = ?
		WHERE delivery_id = ? AND state = ? AND attempts = ?`),
		DeliveryDone, reason, toMillis(time.Now()), claim.DeliveryID, DeliveryProcessing, claim.Attempt)
	return db.checkClaimed(ctx, res, err, claim)
}

func (db *DB) finishWebhookDelivery(ctx context.Context, claim DeliveryClaim, state DeliveryState, reason string) error {
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE webhook_deliveries
		SET state = ?, last_error = ?, lease_expires_at = NULL, finished_at = ?
		WHERE delivery_id = ? AND state = ? AND attempts = ?`),
		state, reason, toMillis(time.Now()), claim.DeliveryID, DeliveryProcessing, claim.Attempt)
	return db.checkClaimed(ctx, res, err, claim)
}

// checkClaimed explains a fenced UPDATE of a claimed delivery that matched no row:
// ErrNotFound when the delivery does not exist, ErrLeaseLost when it does but the
// claim no longer holds it (re-claimed after its lease ran out, or already finished).
func (db *DB) checkClaimed(ctx context.Context, res sql.Result, err error, claim DeliveryClaim) error {
	if err != nil {
		return fmt.Errorf("update %s: %w", claim, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("update %s: %w", claim, err)
	}
	if n > 0 {
		return nil
	}
	// Only done deliveries are ever deleted (pruned), never claimed ones, so a row
	// seen now existed at the UPDATE too.
	var state string
	var attempts int
	err = db.QueryRowxContext(ctx, db.Rebind(`SELECT state, attempts FROM webhook_deliveries WHERE delivery_id = ?`),
		claim.DeliveryID).Scan(&state, &attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("webhook delivery %s: %w", claim.DeliveryID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", claim, err)
	}
	return fmt.Errorf("%s: delivery is %s on attempt %d: %w", claim, state, attempts, ErrLeaseLost)
}

// checkOneRow turns an UPDATE that matched nothing into ErrNotFound.
func checkOneRow(res sql.Result, err error, what string) error {
	if err != nil {
		return fmt.Errorf("update %s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("update %s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return nil
}
