package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// PlanCountsByStatus counts plans per status, for the metrics a scrape reads. The
// statuses are package plan's fixed set, so the answer stays small however many plans
// there are; the count is served by the plans_status index.
func (db *DB) PlanCountsByStatus(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Status string `db:"status"`
		N      int64  `db:"n"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT status, COUNT(*) AS n FROM plans GROUP BY status`); err != nil {
		return nil, fmt.Errorf("count plans by status: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// InboxStats is the webhook inbox at one moment.
type InboxStats struct {
	// ByState counts deliveries per state; states without deliveries are absent.
	ByState map[DeliveryState]int64
	// OldestPending is when the oldest delivery still waiting for a worker (pending,
	// retries included) was received; zero when none waits.
	OldestPending time.Time
}

// WebhookInboxStats counts the inbox's deliveries by state and finds the oldest one
// waiting, both from the (state, received_at) index.
func (db *DB) WebhookInboxStats(ctx context.Context) (InboxStats, error) {
	var rows []struct {
		State string `db:"state"`
		N     int64  `db:"n"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT state, COUNT(*) AS n FROM webhook_deliveries GROUP BY state`); err != nil {
		return InboxStats{}, fmt.Errorf("count webhook deliveries by state: %w", err)
	}
	st := InboxStats{ByState: make(map[DeliveryState]int64, len(rows))}
	for _, r := range rows {
		st.ByState[DeliveryState(r.State)] = r.N
	}
	var oldest sql.NullInt64
	if err := db.GetContext(ctx, &oldest, db.Rebind(`SELECT MIN(received_at) FROM webhook_deliveries WHERE state = ?`), string(DeliveryPending)); err != nil {
		return InboxStats{}, fmt.Errorf("find the oldest pending webhook delivery: %w", err)
	}
	st.OldestPending = nullMillis(oldest)
	return st, nil
}
