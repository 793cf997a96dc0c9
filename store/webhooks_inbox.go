package store

import (
	"context"
	"time"
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
