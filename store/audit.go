package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// AuditEvent is one entry of the append-only audit trail.
type AuditEvent struct {
	ID          string
	TeamID      string // empty for events without a team (e.g. an unbound webhook)
	Actor       string // who: "team:<name>", "github:<login>", "system"
	Action      string // what, dotted: "token.create", "plan.transition"
	SubjectType string
	SubjectID   string
	Detail      json.RawMessage // a JSON object; never a secret
	CreatedAt   time.Time
}

type auditRow struct {
	ID          string  `db:"id"`
	TeamID      *string `db:"team_id"`
	Actor       string  `db:"actor"`
	Action      string  `db:"action"`
	SubjectType string  `db:"subject_type"`
	SubjectID   string  `db:"subject_id"`
	Detail      string  `db:"detail"`
	CreatedAt   int64   `db:"created_at"`
}

func (r auditRow) event() AuditEvent {
	e := AuditEvent{ID: r.ID, Actor: r.Actor, Action: r.Action, SubjectType: r.SubjectType, SubjectID: r.SubjectID,
		Detail: json.RawMessage(r.Detail), CreatedAt: fromMillis(r.CreatedAt)}
	if r.TeamID != nil {
		e.TeamID = *r.TeamID
	}
	return e
}

// RecordAuditEvent appends an event and returns it with its id and time filled in.
func (db *DB) RecordAuditEvent(ctx context.Context, e AuditEvent) (AuditEvent, error) {
	return insertAuditEvent(ctx, db.DB, e)
}

// OperatorActor is the audit actor of the administrative commands, which run with
// direct database access and so act for the operator, not for a team.
const OperatorActor = "cli"

// RecordOperatorAction appends the audit event of an administrative command's
// action on a subject, as OperatorActor; teamID is empty for an action outside any
// team (a webhook delivery). detail holds plain strings, never a secret.
func (db *DB) RecordOperatorAction(ctx context.Context, teamID, action, subjectType, subjectID string, detail map[string]string) error {
	raw := []byte("{}")
	if detail != nil {
		b, err := json.Marshal(detail)
		if err != nil {
			return fmt.Errorf("record audit event %s: %w", action, err)
		}
		raw = b
	}
	_, err := insertAuditEvent(ctx, db.DB, AuditEvent{
		TeamID: teamID, Actor: OperatorActor, Action: action, SubjectType: subjectType, SubjectID: subjectID, Detail: raw,
	})
	return err
}

// RecordAuditEventTx appends an event inside tx, so that a state change and its audit
// row commit or roll back together.
func RecordAuditEventTx(ctx context.Context, tx *sqlx.Tx, e AuditEvent) (AuditEvent, error) {
	return insertAuditEvent(ctx, tx, e)
}

func insertAuditEvent(ctx context.Context, ext sqlx.ExtContext, e AuditEvent) (AuditEvent, error) {
	if e.Actor == "" || e.Action == "" {
		return AuditEvent{}, errors.New("record audit event: actor and action are required")
	}
	if len(e.Detail) == 0 {
		e.Detail = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(e.Detail, &obj); err != nil {
		return AuditEvent{}, fmt.Errorf("record audit event %s: detail must be a JSON object: %w", e.Action, err)
	}
	if e.ID == "" {
		e.ID = NewID()
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = time.Now()
	}
	e.CreatedAt = fromMillis(toMillis(e.CreatedAt))
	var team *string
	if e.TeamID != "" {
		team = &e.TeamID
	}
	if _, err := ext.ExecContext(ctx, ext.Rebind(`INSERT INTO audit_events
		(id, team_id, actor, action, subject_type, subject_id, detail, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
		e.ID, team, e.Actor, e.Action, e.SubjectType, e.SubjectID, string(e.Detail), toMillis(e.CreatedAt)); err != nil {
		return AuditEvent{}, fmt.Errorf("record audit event %s: %w", e.Action, err)
	}
	return e, nil
}

// AuditFilter selects audit events; empty fields match everything.
type AuditFilter struct {
	TeamID      string
	SubjectType string
	SubjectID   string
	Limit       int // default 100, at most 1000
}

// ListAuditEvents returns matching events, newest first.
func (db *DB) ListAuditEvents(ctx context.Context, f AuditFilter) ([]AuditEvent, error) {
	query := `SELECT id, team_id, actor, action, subject_type, subject_id, detail, created_at FROM audit_events WHERE 1 = 1`
	var args []any
	if f.TeamID != "" {
		query += ` AND team_id = ?`
		args = append(args, f.TeamID)
	}
	if f.SubjectType != "" {
		query += ` AND subject_type = ?`
		args = append(args, f.SubjectType)
	}
	if f.SubjectID != "" {
		query += ` AND subject_id = ?`
		args = append(args, f.SubjectID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	var rows []auditRow
	if err := db.SelectContext(ctx, &rows, db.Rebind(query), args...); err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	out := make([]AuditEvent, len(rows))
	for i, r := range rows {
		out[i] = r.event()
	}
	return out, nil
}
