package store

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// RetryWebhookDeliveryAt records why a claimed attempt failed and puts the delivery
// back in the inbox, due at the given time: claims skip it until then. This is how
// failed deliveries back off without a worker holding them. ErrLeaseLost when the
// claim no longer holds the delivery, ErrNotFound when there is no such delivery.
func (db *DB) RetryWebhookDeliveryAt(ctx context.Context, claim DeliveryClaim, reason string, at time.Time) error {
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE webhook_deliveries
		SET state = ?, last_error = ?, lease_expires_at = NULL, next_attempt_at = ?
		WHERE delivery_id = ? AND state = ? AND attempts = ?`),
		DeliveryPending, reason, toMillis(at), claim.DeliveryID, DeliveryProcessing, claim.Attempt)
	return db.checkClaimed(ctx, res, err, claim)
}

// DeferWebhookDeliveryUntil is RetryWebhookDeliveryAt for an attempt that GitHub's
// rate limit stopped: the attempt does not count toward giving up (FreeAttempts),
// since the delivery itself did not fail. ErrLeaseLost and ErrNotFound as there.
func (db *DB) DeferWebhookDeliveryUntil(ctx context.Context, claim DeliveryClaim, reason string, at time.Time) error {
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE webhook_deliveries
		SET state = ?, last_error = ?, lease_expires_at = NULL, next_attempt_at = ?, free_attempts = free_attempts + 1
		WHERE delivery_id = ? AND state = ? AND attempts = ?`),
		DeliveryPending, reason, toMillis(at), claim.DeliveryID, DeliveryProcessing, claim.Attempt)
	return db.checkClaimed(ctx, res, err, claim)
}

// RequeueFailedWebhookDelivery takes a redelivery (the same delivery id, from
// GitHub's "Redeliver") of a delivery that failed: it becomes pending again, due now,
// with a fresh attempt budget. It reports false, changing nothing, when the stored
// delivery is not failed (pending, processing or done: the redelivery is a
// duplicate), names another event or has another body: GitHub redelivers the body
// it signed the first time, and the delivery id is not signed, so a signed body
// under a failed delivery's id is another delivery, which must not replace the
// stored one.
func (db *DB) RequeueFailedWebhookDelivery(ctx context.Context, d WebhookDelivery) (bool, error) {
	if !utf8.Valid(d.Payload) {
		return false, fmt.Errorf("requeue webhook delivery %s: payload is not valid UTF-8", d.DeliveryID)
	}
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE webhook_deliveries
		SET state = ?, free_attempts = attempts, last_error = '', skip_reason = '',
			lease_expires_at = NULL, next_attempt_at = NULL, finished_at = NULL
		WHERE delivery_id = ? AND event = ? AND state = ? AND payload = ?`),
		DeliveryPending, d.DeliveryID, d.Event, DeliveryFailed, string(d.Payload))
	if err != nil {
		return false, fmt.Errorf("requeue webhook delivery %s: %w", d.DeliveryID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("requeue webhook delivery %s: %w", d.DeliveryID, err)
	}
	return n > 0, nil
}

// ReplayWebhookDelivery puts a failed or done delivery back in the inbox as stored,
// due now, with a fresh attempt budget: an operator's way to run it again once the
// cause is fixed. A pending or processing delivery is ErrConflict (it runs anyway), a
// missing one ErrNotFound.
func (db *DB) ReplayWebhookDelivery(ctx context.Context, id string) (WebhookDelivery, error) {
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE webhook_deliveries
		SET state = ?, free_attempts = attempts, last_error = '', skip_reason = '', lease_expires_at = NULL, next_attempt_at = NULL, finished_at = NULL
		WHERE delivery_id = ? AND state IN (?, ?)`),
		DeliveryPending, id, DeliveryFailed, DeliveryDone)
	if err != nil {
		return WebhookDelivery{}, fmt.Errorf("replay webhook delivery %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return WebhookDelivery{}, fmt.Errorf("replay webhook delivery %s: %w", id, err)
	}
	d, err := db.WebhookDeliveryByID(ctx, id)
	if err != nil {
		return WebhookDelivery{}, err
	}
	if n == 0 {
		return d, fmt.Errorf("replay webhook delivery %s: it is %s and runs without a replay: %w", id, d.State, ErrConflict)
	}
	return d, nil
}

// WebhookFilter selects deliveries for ListWebhookDeliveries.
type WebhookFilter struct {
	State DeliveryState // "" for every state
	Limit int           // 0 for 100
}

// ListWebhookDeliveries returns deliveries, newest first, without their payloads.
func (db *DB) ListWebhookDeliveries(ctx context.Context, f WebhookFilter) ([]WebhookDelivery, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	query := `SELECT delivery_id, event, action, installation_id, '' AS payload, state, attempts, free_attempts, last_error,
		skip_reason, received_at, lease_expires_at, finished_at FROM webhook_deliveries`
	args := []any{}
	if f.State != "" {
		query += ` WHERE state = ?`
		args = append(args, f.State)
	}
	query += ` ORDER BY received_at DESC, delivery_id DESC LIMIT ?`
	args = append(args, f.Limit)
	var rows []webhookRow
	if err := db.SelectContext(ctx, &rows, db.Rebind(query), args...); err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	out := make([]WebhookDelivery, len(rows))
	for i, r := range rows {
		out[i] = r.delivery()
	}
	return out, nil
}

// PruneWebhookDeliveries deletes done deliveries that finished before before and
// returns how many. Failed and waiting deliveries are kept whatever their age: they
// are what an operator looks at.
func (db *DB) PruneWebhookDeliveries(ctx context.Context, before time.Time) (int64, error) {
	res, err := db.ExecContext(ctx, db.Rebind(`DELETE FROM webhook_deliveries WHERE state = ? AND finished_at < ?`),
		DeliveryDone, toMillis(before))
	if err != nil {
		return 0, fmt.Errorf("prune webhook deliveries: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune webhook deliveries: %w", err)
	}
	return n, nil
}
