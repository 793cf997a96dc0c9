package store

import (
	"context"
	"time"
)

// RetryWebhookDeliveryAt records why an attempt failed and puts the delivery back in
// the inbox, due at the given time: claims skip it until then. This is how failed
// deliveries back off without a worker holding them.
func (db *DB) RetryWebhookDeliveryAt(ctx context.Context, id, reason string, at time.Time) error {
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE webhook_deliveries
		SET state = ?, last_error = ?, lease_expires_at = NULL, next_attempt_at = ? WHERE delivery_id = ?`),
		DeliveryPending, reason, toMillis(at), id)
	return checkOneRow(res, err, "webhook delivery "+id)
}
