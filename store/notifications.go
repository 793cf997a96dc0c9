package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kukie/kukie-gitops/objref"
)

// Notification events, the X-Kukie-Event of each delivery.
const (
	EventPlanTransition    = "plan.transition"
	EventConnectionChanged = "connection.changed"
)

// Delivery states.
const (
	NotificationPending   = "pending"
	NotificationDelivered = "delivered"
)

// NotificationEndpoint is a team's webhook receiver. SealedSecret opens with the
// service's credentials key to the secret deliveries are signed with.
type NotificationEndpoint struct {
	ID                  string    `json:"id"`
	TeamID              string    `json:"-"`
	URL                 string    `json:"url"`
	Description         string    `json:"description"`
	SealedSecret        string    `json:"-"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	PausedAt            time.Time `json:"paused_at,omitzero"`
	PauseReason         string    `json:"pause_reason,omitempty"`
	CreatedAt           time.Time `json:"created_at"`
}

type notificationEndpointRow struct {
	ID                  string        `db:"id"`
	TeamID              string        `db:"team_id"`
	URL                 string        `db:"url"`
	Description         string        `db:"description"`
	SealedSecret        string        `db:"sealed_secret"`
	ConsecutiveFailures int           `db:"consecutive_failures"`
	PausedAt            sql.NullInt64 `db:"paused_at"`
	PauseReason         string        `db:"pause_reason"`
	CreatedAt           int64         `db:"created_at"`
}

const notificationEndpointColumns = `id, team_id, url, description, sealed_secret, consecutive_failures, paused_at, pause_reason, created_at`

func (r notificationEndpointRow) endpoint() NotificationEndpoint {
	return NotificationEndpoint{ID: r.ID, TeamID: r.TeamID, URL: r.URL, Description: r.Description, SealedSecret: r.SealedSecret,
		ConsecutiveFailures: r.ConsecutiveFailures, PausedAt: nullMillis(r.PausedAt), PauseReason: r.PauseReason, CreatedAt: fromMillis(r.CreatedAt)}
}

// NotificationDelivery is one event for one endpoint, and what became of it.
type NotificationDelivery struct {
	ID            string          `json:"id"`
	EndpointID    string          `json:"endpoint_id"`
	TeamID        string          `json:"-"`
	Event         string          `json:"event"`
	OrderingKey   string          `json:"ordering_key"`
	Seq           int64           `json:"seq"`
	Payload       json.RawMessage `json:"payload"`
	State         string          `json:"state"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt time.Time       `json:"next_attempt_at,omitzero"`
	LastStatus    int             `json:"last_status,omitempty"`
	LastError     string          `json:"last_error,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	DeliveredAt   time.Time       `json:"delivered_at,omitzero"`
}

type notificationDeliveryRow struct {
	ID             string        `db:"id"`
	EndpointID     string        `db:"endpoint_id"`
	TeamID         string        `db:"team_id"`
	Event          string        `db:"event"`
	OrderingKey    string        `db:"ordering_key"`
	Seq            int64         `db:"seq"`
	Payload        string        `db:"payload"`
	State          string        `db:"state"`
	Attempts       int           `db:"attempts"`
	NextAttemptAt  int64         `db:"next_attempt_at"`
	LeaseExpiresAt sql.NullInt64 `db:"lease_expires_at"`
	LastStatus     int           `db:"last_status"`
	LastError      string        `db:"last_error"`
	CreatedAt      int64         `db:"created_at"`
	DeliveredAt    sql.NullInt64 `db:"delivered_at"`
}

const notificationDeliveryColumns = `id, endpoint_id, team_id, event, ordering_key, seq, payload, state, attempts,
	next_attempt_at, lease_expires_at, last_status, last_error, created_at, delivered_at`

func (r notificationDeliveryRow) delivery() NotificationDelivery {
	d := NotificationDelivery{ID: r.ID, EndpointID: r.EndpointID, TeamID: r.TeamID, Event: r.Event, OrderingKey: r.OrderingKey,
		Seq: r.Seq, Payload: json.RawMessage(r.Payload), State: r.State, Attempts: r.Attempts, LastStatus: r.LastStatus,
		LastError: r.LastError, CreatedAt: fromMillis(r.CreatedAt), DeliveredAt: nullMillis(r.DeliveredAt)}
	if r.State == NotificationPending {
		d.NextAttemptAt = fromMillis(r.NextAttemptAt)
	}
	return d
}

// CreateNotificationEndpoint stores a team's endpoint (ID and CreatedAt are set here).
func (db *DB) CreateNotificationEndpoint(ctx context.Context, e NotificationEndpoint) (NotificationEndpoint, error) {
	e.ID, e.CreatedAt = NewID(), time.Now()
	if _, err := db.ExecContext(ctx, db.Rebind(`INSERT INTO notification_endpoints (id, team_id, url, description, sealed_secret, created_at)
		VALUES (?, ?, ?, ?, ?, ?)`), e.ID, e.TeamID, e.URL, e.Description, e.SealedSecret, toMillis(e.CreatedAt)); err != nil {
		return NotificationEndpoint{}, fmt.Errorf("create notification endpoint for team %s: %w", e.TeamID, err)
	}
	return db.NotificationEndpoint(ctx, e.ID)
}

// NotificationEndpoint reads one endpoint; ErrNotFound when there is none.
func (db *DB) NotificationEndpoint(ctx context.Context, id string) (NotificationEndpoint, error) {
	return getRow(ctx, db, "notification endpoint "+id, notificationEndpointRow.endpoint,
		`SELECT `+notificationEndpointColumns+` FROM notification_endpoints WHERE id = ?`, id)
}

// ListNotificationEndpoints returns the team's endpoints, oldest first.
func (db *DB) ListNotificationEndpoints(ctx context.Context, teamID string) ([]NotificationEndpoint, error) {
	return listRows(ctx, db, "notification endpoints of team "+teamID, notificationEndpointRow.endpoint,
		`SELECT `+notificationEndpointColumns+` FROM notification_endpoints WHERE team_id = ? ORDER BY created_at, id`, teamID)
}

// DeleteNotificationEndpoint removes a team's endpoint with its deliveries, sent or
// not; another team's endpoint is ErrNotFound.
func (db *DB) DeleteNotificationEndpoint(ctx context.Context, teamID, id string) error {
	return db.InTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, tx.Rebind(`DELETE FROM notification_deliveries WHERE endpoint_id = ? AND team_id = ?`), id, teamID); err != nil {
			return fmt.Errorf("delete deliveries of notification endpoint %s: %w", id, err)
		}
		res, err := tx.ExecContext(ctx, tx.Rebind(`DELETE FROM notification_endpoints WHERE id = ? AND team_id = ?`), id, teamID)
		return checkOneRow(res, err, "notification endpoint "+id)
	})
}

// ResumeNotificationEndpoint lets a paused endpoint receive again, from the delivery
// it stopped at.
func (db *DB) ResumeNotificationEndpoint(ctx context.Context, teamID, id string) (NotificationEndpoint, error) {
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE notification_endpoints SET paused_at = NULL, pause_reason = '', consecutive_failures = 0
		WHERE id = ? AND team_id = ?`), id, teamID)
	if err := checkOneRow(res, err, "notification endpoint "+id); err != nil {
		return NotificationEndpoint{}, err
	}
	return db.NotificationEndpoint(ctx, id)
}

// ListNotificationDeliveries returns an endpoint's deliveries, newest first (at most
// limit, 100 by default and 1000 at most).
func (db *DB) ListNotificationDeliveries(ctx context.Context, teamID, endpointID string, limit int) ([]NotificationDelivery, error) {
	if limit <= 0 {
		limit = 100
	}
	return listRows(ctx, db, "deliveries of notification endpoint "+endpointID, notificationDeliveryRow.delivery,
		`SELECT `+notificationDeliveryColumns+` FROM notification_deliveries WHERE endpoint_id = ? AND team_id = ?
		ORDER BY created_at DESC, id DESC LIMIT ?`, endpointID, teamID, min(limit, 1000))
}

// enqueueNotificationTx writes one pending delivery of an event per endpoint of the
// team, in the caller's transaction: the outbox commits with what it announces, or
// not at all. Paused endpoints get theirs too, delivered when they are resumed.
func enqueueNotificationTx(ctx context.Context, tx *sqlx.Tx, teamID, event, key string, seq int64, payload any, now time.Time) error {
	var endpoints []string
	if err := tx.SelectContext(ctx, &endpoints, tx.Rebind(`SELECT id FROM notification_endpoints WHERE team_id = ?`), teamID); err != nil {
		return fmt.Errorf("list notification endpoints of team %s: %w", teamID, err)
	}
	if len(endpoints) == 0 {
		return nil
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encode %s notification: %w", event, err)
	}
	for _, ep := range endpoints {
		if _, err := tx.ExecContext(ctx, tx.Rebind(`INSERT INTO notification_deliveries
			(id, endpoint_id, team_id, event, ordering_key, seq, payload, state, next_attempt_at, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			NewID(), ep, teamID, event, key, seq, string(body), NotificationPending, toMillis(now), toMillis(now)); err != nil {
			return fmt.Errorf("queue %s notification for endpoint %s: %w", event, ep, err)
		}
	}
	return nil
}

// PlanNotification is the body of a plan.transition delivery.
type PlanNotification struct {
	Event      string           `json:"event"`
	OccurredAt time.Time        `json:"occurred_at"`
	Plan       PlanNotice       `json:"plan"`
	Links      NotificationLink `json:"links"`
}

// PlanNotice is the plan as a notification tells it.
type PlanNotice struct {
	Code           string        `json:"code"`
	IdempotencyKey string        `json:"idempotency_key,omitempty"`
	State          string        `json:"state"`
	From           string        `json:"from,omitempty"`
	Reason         string        `json:"reason,omitempty"`
	ErrorCode      string        `json:"error_code,omitempty"`
	Cluster        string        `json:"cluster"`
	Target         objref.Target `json:"target"`
	RollbackOf     string        `json:"rollback_of,omitempty"`
}

// NotificationLink points at what the notification is about.
type NotificationLink struct {
	Change      string `json:"change,omitempty"`
	PullRequest string `json:"pull_request,omitempty"`
}

// ConnectionNotification is the body of a connection.changed delivery.
type ConnectionNotification struct {
	Event      string    `json:"event"`
	OccurredAt time.Time `json:"occurred_at"`
	Cluster    string    `json:"cluster"`
	Repo       string    `json:"repo"`
	Status     string    `json:"status"` // connected, pending_approval, revoked, disconnected
	Reason     string    `json:"reason,omitempty"`
}

// ConnectionDisconnected is the status a connection.changed notification gives a
// connection that was removed.
const ConnectionDisconnected = "disconnected"

func notifyPlanTransitionTx(ctx context.Context, tx *sqlx.Tx, p Plan, ev PlanEvent, now time.Time) error {
	reason := p.StatusReason
	if reason == "" {
		reason = ev.Message
	}
	n := PlanNotification{Event: EventPlanTransition, OccurredAt: now.UTC(),
		Plan: PlanNotice{Code: p.Code, IdempotencyKey: p.IdempotencyKey, State: ev.ToStatus, From: ev.FromStatus, Reason: reason,
			ErrorCode: p.ErrorCode, Cluster: p.Cluster, Target: p.Target, RollbackOf: p.RollbackOf},
		Links: NotificationLink{Change: "/api/v1/changes/" + p.Code, PullRequest: p.PRURL}}
	return enqueueNotificationTx(ctx, tx, p.TeamID, EventPlanTransition, "plan:"+p.Code, ev.Seq, n, now)
}

func notifyConnectionTx(ctx context.Context, tx *sqlx.Tx, clusterID, repo, status, reason string, now time.Time) error {
	var c struct {
		TeamID string `db:"team_id"`
		Name   string `db:"name"`
	}
	if err := tx.GetContext(ctx, &c, tx.Rebind(`SELECT team_id, name FROM clusters WHERE id = ?`), clusterID); err != nil {
		return fmt.Errorf("read cluster %s: %w", clusterID, err)
	}
	n := ConnectionNotification{Event: EventConnectionChanged, OccurredAt: now.UTC(), Cluster: c.Name, Repo: repo, Status: status, Reason: reason}
	// Ordered by time per connection; NewID-style ids break ties in the rare same
	// millisecond.
	return enqueueNotificationTx(ctx, tx, c.TeamID, EventConnectionChanged, "connection:"+c.Name+":"+repo, now.UnixNano(), n, now)
}

// ClaimDueNotifications leases up to limit deliveries that are due at now: pending,
// attempt time reached, not leased, the endpoint not paused, and no earlier delivery
// of the same ordering key to the same endpoint still pending (order per plan). A
// lease that runs out (a worker died mid-send) makes the delivery due again.
func (db *DB) ClaimDueNotifications(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]NotificationDelivery, error) {
	var out []NotificationDelivery
	err := db.InTx(ctx, func(tx *sqlx.Tx) error {
		var rows []notificationDeliveryRow
		if err := tx.SelectContext(ctx, &rows, tx.Rebind(`SELECT `+notificationDeliveryColumns+` FROM notification_deliveries d
			WHERE d.state = ? AND d.next_attempt_at <= ? AND (d.lease_expires_at IS NULL OR d.lease_expires_at < ?)
			AND NOT EXISTS (SELECT 1 FROM notification_endpoints e WHERE e.id = d.endpoint_id AND e.paused_at IS NOT NULL)
			AND NOT EXISTS (SELECT 1 FROM notification_deliveries p WHERE p.endpoint_id = d.endpoint_id
				AND p.ordering_key = d.ordering_key AND p.state = ? AND (p.seq < d.seq OR (p.seq = d.seq AND p.id < d.id)))
			ORDER BY d.next_attempt_at, d.id LIMIT ?`),
			NotificationPending, toMillis(now), toMillis(now), NotificationPending, limit); err != nil {
			return fmt.Errorf("list due notifications: %w", err)
		}
		for _, r := range rows {
			res, err := tx.ExecContext(ctx, tx.Rebind(`UPDATE notification_deliveries SET lease_expires_at = ?
				WHERE id = ? AND state = ? AND (lease_expires_at IS NULL OR lease_expires_at < ?)`),
				toMillis(now.Add(lease)), r.ID, NotificationPending, toMillis(now))
			if err != nil {
				return fmt.Errorf("lease notification %s: %w", r.ID, err)
			}
			if n, err := res.RowsAffected(); err == nil && n == 1 {
				out = append(out, r.delivery())
			}
		}
		return nil
	})
	return out, err
}

// DeliveryAttempt is the outcome of one send.
type DeliveryAttempt struct {
	OK     bool
	Status int    // the receiver's HTTP status, 0 when none came
	Error  string // why it failed, for the delivery log
	// NextAttemptAt is when to try again after a failure.
	NextAttemptAt time.Time
}

// RecordNotificationAttempt records one send of a delivery and its endpoint's
// health, in one transaction: a success resets the endpoint's failure count; a
// failure counts, and the pauseAfter-th failure in a row pauses the endpoint.
func (db *DB) RecordNotificationAttempt(ctx context.Context, d NotificationDelivery, a DeliveryAttempt, now time.Time, pauseAfter int) error {
	return db.InTx(ctx, func(tx *sqlx.Tx) error {
		if a.OK {
			if _, err := tx.ExecContext(ctx, tx.Rebind(`UPDATE notification_deliveries SET state = ?, attempts = attempts + 1,
				lease_expires_at = NULL, last_status = ?, last_error = '', delivered_at = ? WHERE id = ?`),
				NotificationDelivered, a.Status, toMillis(now), d.ID); err != nil {
				return fmt.Errorf("record delivery %s: %w", d.ID, err)
			}
			_, err := tx.ExecContext(ctx, tx.Rebind(`UPDATE notification_endpoints SET consecutive_failures = 0 WHERE id = ?`), d.EndpointID)
			return err
		}
		if _, err := tx.ExecContext(ctx, tx.Rebind(`UPDATE notification_deliveries SET attempts = attempts + 1, lease_expires_at = NULL,
			last_status = ?, last_error = ?, next_attempt_at = ? WHERE id = ?`),
			a.Status, a.Error, toMillis(a.NextAttemptAt), d.ID); err != nil {
			return fmt.Errorf("record delivery %s: %w", d.ID, err)
		}
		var failures int
		err := tx.GetContext(ctx, &failures, tx.Rebind(`UPDATE notification_endpoints SET consecutive_failures = consecutive_failures + 1
			WHERE id = ? RETURNING consecutive_failures`), d.EndpointID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("count failure of endpoint %s: %w", d.EndpointID, err)
		}
		if failures >= pauseAfter {
			reason := fmt.Sprintf("paused after %d failed deliveries in a row; the last: %s", failures, a.Error)
			if _, err := tx.ExecContext(ctx, tx.Rebind(`UPDATE notification_endpoints SET paused_at = ?, pause_reason = ?
				WHERE id = ? AND paused_at IS NULL`), toMillis(now), reason, d.EndpointID); err != nil {
				return fmt.Errorf("pause endpoint %s: %w", d.EndpointID, err)
			}
		}
		return nil
	})
}

// PruneNotificationDeliveries deletes delivered notifications delivered before
// before and returns how many; pending ones stay whatever their age.
func (db *DB) PruneNotificationDeliveries(ctx context.Context, before time.Time) (int64, error) {
	res, err := db.ExecContext(ctx, db.Rebind(`DELETE FROM notification_deliveries WHERE state = ? AND delivered_at < ?`),
		NotificationDelivered, toMillis(before))
	if err != nil {
		return 0, fmt.Errorf("delete delivered notifications: %w", err)
	}
	return res.RowsAffected()
}
