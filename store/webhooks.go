package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
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

// ClaimWebhookDeliveries leases up to limit deliveries to the caller for lease, in
// one statement: the oldest due pending ones (next_attempt_at holds back those
// waiting out a retry backoff, see RetryWebhookDeliveryAt) and processing ones whose
// lease ran out (their worker died), oldest first. On PostgreSQL concurrent claimers
// skip each other's rows (FOR UPDATE SKIP LOCKED), so several replicas share the
// inbox; on SQLite the write lock serialises them. Either way a delivery is leased to
// one claimer at a time.
func (db *DB) ClaimWebhookDeliveries(ctx context.Context, limit int, lease time.Duration) ([]WebhookDelivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	now := time.Now()
	lock := ""
	if db.dialect == Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	// Each source is read on its own so that both walk the index on (state,
	// received_at, delivery_id) in order and stop after limit rows; one WHERE with
	// an OR of the two made both databases read and sort the whole backlog on every
	// claim. Processing rows are few (the batches in flight), so filtering them by
	// lease on the walk is cheap.
	query := db.Rebind(`WITH due AS (
			SELECT delivery_id, received_at FROM webhook_deliveries
			WHERE state = ? AND (next_attempt_at IS NULL OR next_attempt_at <= ?)
			ORDER BY received_at, delivery_id LIMIT ?` + lock + `
		), expired AS (
			SELECT delivery_id, received_at FROM webhook_deliveries
			WHERE state = ? AND lease_expires_at < ?
			ORDER BY received_at, delivery_id LIMIT ?` + lock + `
		)
		UPDATE webhook_deliveries
		SET state = ?, attempts = attempts + 1, lease_expires_at = ?
		WHERE delivery_id IN (
			SELECT delivery_id FROM (
				SELECT delivery_id, received_at FROM due
				UNION ALL SELECT delivery_id, received_at FROM expired
			) AS claimable
			ORDER BY received_at, delivery_id LIMIT ?)
		RETURNING ` + webhookColumns)
	var rows []webhookRow
	// A claim's commit waits for the disk, unlike the outcomes of what it claimed (see
	// recordWrite): claims fence outcomes by the attempt number they count, which a
	// database crash must never take back and hand out a second time.
	if err := db.SelectContext(ctx, &rows, query,
		DeliveryPending, toMillis(now), limit,
		DeliveryProcessing, toMillis(now), limit,
		DeliveryProcessing, toMillis(now.Add(lease)), limit); err != nil {
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

// recordWrite runs a write of the outcome of claimed deliveries: the record of a
// batch's done ones, or a hand-back of those not started. On PostgreSQL its commit
// does not wait for the WAL to reach the disk (synchronous_commit off, for this
// transaction alone), which halves what a batch waits for. A database crash may then
// forget the last fraction of a second of such writes; that only leaves those
// deliveries claimed under a lease that runs out, to be claimed again on a new
// attempt and processed again, as after a worker's crash. Nothing else is written
// this way: not a stored delivery (the 202 promises it is on disk), and not a claim
// (see ClaimWebhookDeliveries). SQLite's commits, in WAL mode with synchronous
// NORMAL, wait for no disk flush already.
func (db *DB) recordWrite(ctx context.Context, fn func(q sqlx.ExtContext) error) error {
	if db.dialect != Postgres {
		return fn(db.DB)
	}
	return db.InTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SET LOCAL synchronous_commit TO OFF`); err != nil {
			return err
		}
		return fn(tx)
	})
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
	return db.completeOne(ctx, DeliveryCompletion{Claim: claim})
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
	return db.completeOne(ctx, DeliveryCompletion{Claim: claim, SkipReason: reason})
}

func (db *DB) completeOne(ctx context.Context, c DeliveryCompletion) error {
	refused, err := db.CompleteWebhookDeliveries(ctx, []DeliveryCompletion{c})
	if err != nil {
		return err
	}
	return refused[c.Claim]
}

// DeliveryCompletion is one claimed delivery finished as done: processed, or, with a
// SkipReason, not acted on and why.
type DeliveryCompletion struct {
	Claim      DeliveryClaim
	SkipReason string
	// FinishedAt is when the attempt ended; zero for the time of the record.
	FinishedAt time.Time
}

// completionChunk bounds the completions written by one statement, far below both
// databases' limits on bound parameters.
const completionChunk = 500

// CompleteWebhookDeliveries marks many claimed deliveries done, a statement per
// completionChunk of them rather than one each, so a worker records a whole batch at
// the cost of one. Each is fenced by its claim as CompleteWebhookDelivery is: a claim
// that no longer holds its delivery changes nothing and is in refused, with the
// ErrLeaseLost or ErrNotFound error naming it; the others are recorded. err is for a
// statement failing, and then what it would have written is not recorded (refused
// is only complete without err).
func (db *DB) CompleteWebhookDeliveries(ctx context.Context, done []DeliveryCompletion) (refused map[DeliveryClaim]error, err error) {
	refused = map[DeliveryClaim]error{}
	for start := 0; start < len(done); start += completionChunk {
		if err := db.completeChunk(ctx, done[start:min(start+completionChunk, len(done))], refused); err != nil {
			return refused, err
		}
	}
	return refused, nil
}

func (db *DB) completeChunk(ctx context.Context, done []DeliveryCompletion, refused map[DeliveryClaim]error) error {
	// UPDATE ... FROM (VALUES ...) is understood by both databases (SQLite since
	// 3.33), and VALUES names its columns column1, column2, ... in both.
	var values strings.Builder
	now := time.Now()
	args := []any{DeliveryDone}
	for i, c := range done {
		if i > 0 {
			values.WriteString(", ")
		}
		finished := c.FinishedAt
		if finished.IsZero() {
			finished = now
		}
		values.WriteString("(?, CAST(? AS INTEGER), ?, CAST(? AS BIGINT))")
		args = append(args, c.Claim.DeliveryID, c.Claim.Attempt, c.SkipReason, toMillis(finished))
	}
	args = append(args, DeliveryProcessing)
	var recorded []string
	query := db.Rebind(`UPDATE webhook_deliveries
		SET state = ?, last_error = '', skip_reason = v.column3, lease_expires_at = NULL, finished_at = v.column4
		FROM (VALUES ` + values.String() + `) AS v
		WHERE webhook_deliveries.delivery_id = v.column1 AND webhook_deliveries.attempts = v.column2
			AND webhook_deliveries.state = ?
		RETURNING webhook_deliveries.delivery_id`)
	if err := db.recordWrite(ctx, func(q sqlx.ExtContext) error {
		return sqlx.SelectContext(ctx, q, &recorded, query, args...)
	}); err != nil {
		return fmt.Errorf("complete %d webhook deliveries: %w", len(done), err)
	}
	if len(recorded) == len(done) {
		return nil
	}
	// Rare: a worker that overran its lease, or a claim finished twice.
	took := make(map[string]bool, len(recorded))
	for _, id := range recorded {
		took[id] = true
	}
	for _, c := range done {
		if !took[c.Claim.DeliveryID] {
			refused[c.Claim] = db.explainUnclaimed(ctx, c.Claim)
		}
	}
	return nil
}

// ReleaseWebhookDeliveries hands claimed deliveries that were never started back to
// the inbox, pending and due now, so any worker of any replica takes them at once
// instead of after their lease. The released attempt does not count toward giving up
// (FreeAttempts). Claims that no longer hold their delivery are left alone.
func (db *DB) ReleaseWebhookDeliveries(ctx context.Context, claims []DeliveryClaim) error {
	for start := 0; start < len(claims); start += completionChunk {
		chunk := claims[start:min(start+completionChunk, len(claims))]
		var values strings.Builder
		args := []any{DeliveryPending}
		for i, c := range chunk {
			if i > 0 {
				values.WriteString(", ")
			}
			values.WriteString("(?, CAST(? AS INTEGER))")
			args = append(args, c.DeliveryID, c.Attempt)
		}
		args = append(args, DeliveryProcessing)
		query := db.Rebind(`UPDATE webhook_deliveries
			SET state = ?, lease_expires_at = NULL, free_attempts = free_attempts + 1
			FROM (VALUES ` + values.String() + `) AS v
			WHERE webhook_deliveries.delivery_id = v.column1 AND webhook_deliveries.attempts = v.column2
				AND webhook_deliveries.state = ?`)
		if err := db.recordWrite(ctx, func(q sqlx.ExtContext) error {
			_, err := q.ExecContext(ctx, query, args...)
			return err
		}); err != nil {
			return fmt.Errorf("release %d webhook deliveries: %w", len(chunk), err)
		}
	}
	return nil
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
	return db.explainUnclaimed(ctx, claim)
}

// explainUnclaimed says why a fenced update of claim matched no row.
func (db *DB) explainUnclaimed(ctx context.Context, claim DeliveryClaim) error {
	// Only done deliveries are ever deleted (pruned), never claimed ones, so a row
	// seen now existed at the UPDATE too.
	var state string
	var attempts int
	err := db.QueryRowxContext(ctx, db.Rebind(`SELECT state, attempts FROM webhook_deliveries WHERE delivery_id = ?`),
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
