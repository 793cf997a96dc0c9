package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kukie/kukie-gitops/objref"
)

// ErrStale is returned when a plan was changed by someone else since it was read;
// the caller re-reads the plan and decides again.
var ErrStale = errors.New("plan changed concurrently")

// Plan is one change request and everything the pipeline learned and did for it.
// Status values and their meaning belong to package plan; the store only keeps them.
type Plan struct {
	Code           string
	TeamID         string
	IdempotencyKey string
	Cluster        string
	Target         objref.Target
	Change         json.RawMessage
	Reason         string
	RequestedBy    string

	Path         string // "git", "direct" or "" until decided
	Status       string
	StatusReason string // why the plan was refused or failed, for a person
	ErrorCode    string // the same, as a stable code for a program
	FailedStep   string // the state an operator retry returns to

	Repo           string // normalized "owner/name"
	InstallationID int64
	BaseBranch     string
	BaseSHA        string
	CommitSHA      string
	HeadSHA        string
	Branch         string
	PRNumber       int64
	PRURL          string
	CheckRunID     int64
	CheckRunURL    string
	MergeSHA       string
	WaitingOn      string // code of the plan holding a lock this one needs
	RollbackOf     string // code of the plan this one reverts
	RolledBackBy   string // code of the plan that reverts this one
	DeployDeadline time.Time

	Payload json.RawMessage // JSON object owned by package plan

	ClaimedBy      string
	ClaimExpiresAt time.Time
	ClaimEpoch     int64 // grows by one with every claim (see PlanClaim)

	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// PlanEvent is one recorded step or transition of a plan.
type PlanEvent struct {
	PlanCode   string
	Seq        int64
	Actor      string
	FromStatus string
	ToStatus   string
	Step       string
	Message    string
	// Worker is the claim holder that recorded the event; empty for events recorded
	// outside a claim (webhooks, people through the API).
	Worker    string
	CreatedAt time.Time
}

type planRow struct {
	Code             string         `db:"code"`
	TeamID           string         `db:"team_id"`
	IdempotencyKey   sql.NullString `db:"idempotency_key"`
	Cluster          string         `db:"cluster"`
	TargetAPIVersion string         `db:"target_api_version"`
	TargetKind       string         `db:"target_kind"`
	TargetNamespace  string         `db:"target_namespace"`
	TargetName       string         `db:"target_name"`
	ChangeJSON       string         `db:"change_json"`
	Reason           string         `db:"reason"`
	RequestedBy      string         `db:"requested_by"`
	Path             string         `db:"path"`
	Status           string         `db:"status"`
	StatusReason     string         `db:"status_reason"`
	ErrorCode        string         `db:"error_code"`
	FailedStep       string         `db:"failed_step"`
	Repo             string         `db:"repo"`
	InstallationID   int64          `db:"installation_id"`
	BaseBranch       string         `db:"base_branch"`
	BaseSHA          string         `db:"base_sha"`
	CommitSHA        string         `db:"commit_sha"`
	HeadSHA          string         `db:"head_sha"`
	Branch           string         `db:"branch"`
	PRNumber         int64          `db:"pr_number"`
	PRURL            string         `db:"pr_url"`
	CheckRunID       int64          `db:"check_run_id"`
	CheckRunURL      string         `db:"check_run_url"`
	MergeSHA         string         `db:"merge_sha"`
	WaitingOn        string         `db:"waiting_on"`
	RollbackOf       string         `db:"rollback_of"`
	RolledBackBy     string         `db:"rolled_back_by"`
	DeployDeadlineAt sql.NullInt64  `db:"deploy_deadline_at"`
	Payload          string         `db:"payload"`
	ClaimedBy        string         `db:"claimed_by"`
	ClaimExpiresAt   sql.NullInt64  `db:"claim_expires_at"`
	ClaimEpoch       int64          `db:"claim_epoch"`
	Version          int64          `db:"version"`
	CreatedAt        int64          `db:"created_at"`
	UpdatedAt        int64          `db:"updated_at"`
}

const planColumns = `code, team_id, idempotency_key, cluster, target_api_version, target_kind,
	target_namespace, target_name, change_json, reason, requested_by, path, status, status_reason,
	error_code, failed_step, repo, installation_id, base_branch, base_sha, commit_sha, head_sha,
	branch, pr_number, pr_url, check_run_id, check_run_url, merge_sha, waiting_on, rollback_of,
	rolled_back_by, deploy_deadline_at, payload, claimed_by, claim_expires_at, claim_epoch,
	version, created_at, updated_at`

// PayloadCodec transforms plan payloads on their way into and out of the database,
// so that what must not be stored in clear is sealed (the pipeline seals the file
// contents a payload carries). OpenPayload undoes SealPayload for the same plan code;
// it must also accept a payload stored before the codec was set.
type PayloadCodec interface {
	SealPayload(code string, payload []byte) ([]byte, error)
	OpenPayload(code string, stored []byte) ([]byte, error)
}

// SealPlanPayloads makes every later write of a plan's payload go through c, and
// every read come back through it. Call it once, right after Open.
func (db *DB) SealPlanPayloads(c PayloadCodec) { db.payloads = c }

func (db *DB) sealPayload(code, payload string) (string, error) {
	if db.payloads == nil {
		return payload, nil
	}
	out, err := db.payloads.SealPayload(code, []byte(payload))
	if err != nil {
		return "", fmt.Errorf("seal payload of plan %s: %w", code, err)
	}
	return string(out), nil
}

// planOf converts a row, opening its payload.
func (db *DB) planOf(r planRow) (Plan, error) {
	p := r.plan()
	if db.payloads == nil {
		return p, nil
	}
	payload, err := db.payloads.OpenPayload(p.Code, p.Payload)
	if err != nil {
		return Plan{}, fmt.Errorf("open payload of plan %s: %w", p.Code, err)
	}
	p.Payload = payload
	return p, nil
}

func (r planRow) plan() Plan {
	return Plan{
		Code: r.Code, TeamID: r.TeamID, IdempotencyKey: r.IdempotencyKey.String, Cluster: r.Cluster,
		Target: objref.Target{APIVersion: r.TargetAPIVersion, Kind: r.TargetKind, Namespace: r.TargetNamespace, Name: r.TargetName},
		Change: json.RawMessage(r.ChangeJSON),
		Reason: r.Reason, RequestedBy: r.RequestedBy, Path: r.Path, Status: r.Status,
		StatusReason: r.StatusReason, ErrorCode: r.ErrorCode, FailedStep: r.FailedStep,
		Repo: r.Repo, InstallationID: r.InstallationID, BaseBranch: r.BaseBranch, BaseSHA: r.BaseSHA,
		CommitSHA: r.CommitSHA, HeadSHA: r.HeadSHA, Branch: r.Branch, PRNumber: r.PRNumber, PRURL: r.PRURL,
		CheckRunID: r.CheckRunID, CheckRunURL: r.CheckRunURL, MergeSHA: r.MergeSHA, WaitingOn: r.WaitingOn,
		RollbackOf: r.RollbackOf, RolledBackBy: r.RolledBackBy, DeployDeadline: nullMillis(r.DeployDeadlineAt),
		Payload:   json.RawMessage(r.Payload),
		ClaimedBy: r.ClaimedBy, ClaimExpiresAt: nullMillis(r.ClaimExpiresAt), ClaimEpoch: r.ClaimEpoch,
		Version: r.Version, CreatedAt: fromMillis(r.CreatedAt), UpdatedAt: fromMillis(r.UpdatedAt),
	}
}

func rowOf(p Plan) planRow {
	r := planRow{
		Code: p.Code, TeamID: p.TeamID, Cluster: p.Cluster,
		TargetAPIVersion: p.Target.APIVersion, TargetKind: p.Target.Kind, TargetNamespace: p.Target.Namespace, TargetName: p.Target.Name,
		ChangeJSON: string(p.Change), Reason: p.Reason, RequestedBy: p.RequestedBy, Path: p.Path, Status: p.Status,
		StatusReason: p.StatusReason, ErrorCode: p.ErrorCode, FailedStep: p.FailedStep, Repo: p.Repo,
		InstallationID: p.InstallationID, BaseBranch: p.BaseBranch, BaseSHA: p.BaseSHA, CommitSHA: p.CommitSHA,
		HeadSHA: p.HeadSHA, Branch: p.Branch, PRNumber: p.PRNumber, PRURL: p.PRURL, CheckRunID: p.CheckRunID,
		CheckRunURL: p.CheckRunURL, MergeSHA: p.MergeSHA, WaitingOn: p.WaitingOn, RollbackOf: p.RollbackOf,
		RolledBackBy: p.RolledBackBy, DeployDeadlineAt: optionalMillis(p.DeployDeadline), Payload: string(p.Payload),
		ClaimedBy: p.ClaimedBy, ClaimExpiresAt: optionalMillis(p.ClaimExpiresAt), ClaimEpoch: p.ClaimEpoch,
		Version: p.Version, CreatedAt: toMillis(p.CreatedAt), UpdatedAt: toMillis(p.UpdatedAt),
	}
	if p.IdempotencyKey != "" {
		r.IdempotencyKey = sql.NullString{String: p.IdempotencyKey, Valid: true}
	}
	if r.ChangeJSON == "" {
		r.ChangeJSON = "{}"
	}
	if r.Payload == "" {
		r.Payload = "{}"
	}
	return r
}

// CreatePlan stores a new plan with its first event. When the team already has a plan
// with the same idempotency key, that plan is returned instead and created is false:
// one key never yields two plans, however many requests race.
func (db *DB) CreatePlan(ctx context.Context, p Plan, ev PlanEvent) (_ Plan, created bool, err error) {
	if p.Code == "" || p.TeamID == "" || p.Status == "" {
		return Plan{}, false, errors.New("create plan: code, team and status are required")
	}
	now := time.Now()
	p.Version, p.CreatedAt, p.UpdatedAt = 1, now, now
	row := rowOf(p)
	if row.Payload, err = db.sealPayload(p.Code, row.Payload); err != nil {
		return Plan{}, false, err
	}
	err = db.InTx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.NamedExecContext(ctx, `INSERT INTO plans (`+planColumns+`) VALUES (`+namedPlaceholders(planColumns)+`)
			ON CONFLICT DO NOTHING`, row)
		if err != nil {
			return fmt.Errorf("insert plan %s: %w", p.Code, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("insert plan %s: %w", p.Code, err)
		}
		if n == 0 {
			return ErrConflict
		}
		ev.PlanCode, ev.Seq, ev.ToStatus = p.Code, 1, p.Status
		return insertPlanEvent(ctx, tx, p, ev, now)
	})
	if errors.Is(err, ErrConflict) && p.IdempotencyKey != "" {
		existing, gerr := db.PlanByIdempotencyKey(ctx, p.TeamID, p.IdempotencyKey)
		if gerr != nil {
			return Plan{}, false, fmt.Errorf("create plan: read plan of idempotency key: %w", gerr)
		}
		return existing, false, nil
	}
	if errors.Is(err, ErrConflict) {
		return Plan{}, false, fmt.Errorf("create plan %s: %w", p.Code, ErrConflict)
	}
	if err != nil {
		return Plan{}, false, err
	}
	return rowOf(p).plan(), true, nil
}

func namedPlaceholders(columns string) string {
	parts := strings.Split(columns, ",")
	for i, c := range parts {
		parts[i] = ":" + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// PlanByCode reads one plan regardless of team (for webhooks and workers).
func (db *DB) PlanByCode(ctx context.Context, code string) (Plan, error) {
	var row planRow
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT `+planColumns+` FROM plans WHERE code = ?`), code)
	if errors.Is(err, sql.ErrNoRows) {
		return Plan{}, fmt.Errorf("plan %s: %w", code, ErrNotFound)
	}
	if err != nil {
		return Plan{}, fmt.Errorf("read plan %s: %w", code, err)
	}
	return db.planOf(row)
}

// TeamPlan reads a plan of one team; another team's plan is ErrNotFound.
func (db *DB) TeamPlan(ctx context.Context, teamID, code string) (Plan, error) {
	p, err := db.PlanByCode(ctx, code)
	if err != nil {
		return Plan{}, err
	}
	if p.TeamID != teamID {
		return Plan{}, fmt.Errorf("plan %s: %w", code, ErrNotFound)
	}
	return p, nil
}

// PlanByIdempotencyKey reads the team's plan created with key.
func (db *DB) PlanByIdempotencyKey(ctx context.Context, teamID, key string) (Plan, error) {
	var row planRow
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT `+planColumns+` FROM plans WHERE team_id = ? AND idempotency_key = ?`), teamID, key)
	if errors.Is(err, sql.ErrNoRows) {
		return Plan{}, fmt.Errorf("plan with idempotency key: %w", ErrNotFound)
	}
	if err != nil {
		return Plan{}, fmt.Errorf("read plan by idempotency key: %w", err)
	}
	return db.planOf(row)
}

// PlanFilter selects plans; empty fields match everything.
type PlanFilter struct {
	TeamID    string
	Cluster   string
	Statuses  []string
	Repo      string
	Branch    string
	PRNumber  int64
	WaitingOn string
	// Target matches plans on this object (all four fields compared; an empty
	// namespace matches only an empty namespace).
	Target *objref.Target
	// Before, when set, matches only the plans listed after it (older, or as old
	// with a smaller code): the next page of a listing that ended at it.
	Before *PlanPosition
	Limit  int // default 100, at most 1000
}

// PlanPosition is a plan's place in ListPlans' order, newest first: its creation
// time (to the millisecond the store keeps) and its code.
type PlanPosition struct {
	CreatedAt time.Time
	Code      string
}

// ListPlans returns matching plans, newest first.
func (db *DB) ListPlans(ctx context.Context, f PlanFilter) ([]Plan, error) {
	query := `SELECT ` + planColumns + ` FROM plans WHERE 1 = 1`
	var args []any
	add := func(cond string, v any) {
		query += ` AND ` + cond
		args = append(args, v)
	}
	if f.TeamID != "" {
		add(`team_id = ?`, f.TeamID)
	}
	if f.Cluster != "" {
		add(`cluster = ?`, f.Cluster)
	}
	if f.Repo != "" {
		add(`repo = ?`, f.Repo)
	}
	if f.Branch != "" {
		add(`branch = ?`, f.Branch)
	}
	if f.PRNumber != 0 {
		add(`pr_number = ?`, f.PRNumber)
	}
	if f.WaitingOn != "" {
		add(`waiting_on = ?`, f.WaitingOn)
	}
	if f.Target != nil {
		add(`target_api_version = ?`, f.Target.APIVersion)
		add(`target_kind = ?`, f.Target.Kind)
		add(`target_namespace = ?`, f.Target.Namespace)
		add(`target_name = ?`, f.Target.Name)
	}
	if len(f.Statuses) > 0 {
		query += ` AND status IN (?` + strings.Repeat(`, ?`, len(f.Statuses)-1) + `)`
		for _, s := range f.Statuses {
			args = append(args, s)
		}
	}
	if f.Before != nil {
		ms := toMillis(f.Before.CreatedAt)
		query += ` AND (created_at < ? OR (created_at = ? AND code < ?))`
		args = append(args, ms, ms, f.Before.Code)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	query += ` ORDER BY created_at DESC, code DESC LIMIT ?`
	args = append(args, min(limit, 1000))
	var rows []planRow
	if err := db.SelectContext(ctx, &rows, db.Rebind(query), args...); err != nil {
		return nil, fmt.Errorf("list plans: %w", err)
	}
	return db.plansOf(rows)
}

// UpdatePlan writes p's mutable columns if nobody changed the plan since p was read
// (p.Version), records ev as the next event, and writes an audit row when the status
// changes. It returns the stored plan with its new version, or ErrStale. The claim
// columns are left alone: only ClaimPlan, RenewPlanClaim and ReleasePlanClaim move a
// claim, so an update from a copy read before a worker claimed the plan cannot drop
// that claim. Writers that act for a claim use UpdateClaimedPlan.
func (db *DB) UpdatePlan(ctx context.Context, p Plan, ev PlanEvent) (Plan, error) {
	saved, _, err := db.UpdatePlanLocks(ctx, p, ev, LockChange{})
	return saved, err
}

// LockChange is what UpdatePlanLocks does to the plan's file locks, in the same
// transaction as the update, so that no state a plan moves into is ever seen with
// the wrong locks (a failed plan still holding its files, a resumed one without
// them).
type LockChange struct {
	// Take are files of the plan's repository the plan holds after the update
	// (files it holds already count as taken). When another plan holds one of them
	// nothing is written and the update fails with a *LockHeldError.
	Take []string
	// ReleaseAll drops every lock of the plan.
	ReleaseAll bool
}

// LockHeldError is returned by UpdatePlanLocks when a file to take is held by
// another plan.
type LockHeldError struct {
	Holder string
}

func (e *LockHeldError) Error() string { return "a file is locked by plan " + e.Holder }

// UpdatePlanLocks is UpdatePlan that also applies lc to the plan's file locks in
// the same transaction. It returns the locks it released.
func (db *DB) UpdatePlanLocks(ctx context.Context, p Plan, ev PlanEvent, lc LockChange) (Plan, []FileLock, error) {
	return db.updatePlan(ctx, p, ev, lc, nil)
}

// UpdateClaimedPlan is UpdatePlanLocks for the holder of claim: the update is made
// only while claim still holds the plan (same owner and epoch, not expired), checked
// in the same transaction as the write, and ev names the claim's owner as its
// worker. ErrClaimLost when the claim ran out, was released or was taken over: the
// worker must record nothing more and stop.
func (db *DB) UpdateClaimedPlan(ctx context.Context, claim PlanClaim, p Plan, ev PlanEvent, lc LockChange) (Plan, []FileLock, error) {
	if claim.Code != p.Code {
		return Plan{}, nil, fmt.Errorf("update plan %s under the claim of plan %s", p.Code, claim.Code)
	}
	ev.Worker = claim.Owner
	return db.updatePlan(ctx, p, ev, lc, &claim)
}

func (db *DB) updatePlan(ctx context.Context, p Plan, ev PlanEvent, lc LockChange, claim *PlanClaim) (Plan, []FileLock, error) {
	var released []FileLock
	now := time.Now()
	prevVersion := p.Version
	p.Version, p.UpdatedAt = prevVersion+1, now
	row := rowOf(p)
	var err error
	if row.Payload, err = db.sealPayload(p.Code, row.Payload); err != nil {
		return Plan{}, nil, err
	}
	err = db.InTx(ctx, func(tx *sqlx.Tx) error {
		var cur planClaimRow
		err := tx.GetContext(ctx, &cur, tx.Rebind(`SELECT status, version, claimed_by, claim_epoch, claim_expires_at
			FROM plans WHERE code = ?`), p.Code)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrStale
		}
		if err != nil {
			return fmt.Errorf("read plan %s: %w", p.Code, err)
		}
		if claim != nil {
			if err := claim.heldIn(cur, now); err != nil {
				return err
			}
		}
		if cur.Version != prevVersion {
			return ErrStale
		}
		fromStatus := cur.Status
		query := `UPDATE plans SET path = ?, status = ?, status_reason = ?, error_code = ?,
			failed_step = ?, repo = ?, installation_id = ?, base_branch = ?, base_sha = ?, commit_sha = ?, head_sha = ?,
			branch = ?, pr_number = ?, pr_url = ?, check_run_id = ?, check_run_url = ?, merge_sha = ?, waiting_on = ?,
			rollback_of = ?, rolled_back_by = ?, deploy_deadline_at = ?, payload = ?,
			version = ?, updated_at = ?
			WHERE code = ? AND version = ?`
		args := []any{row.Path, row.Status, row.StatusReason, row.ErrorCode, row.FailedStep, row.Repo, row.InstallationID,
			row.BaseBranch, row.BaseSHA, row.CommitSHA, row.HeadSHA, row.Branch, row.PRNumber, row.PRURL,
			row.CheckRunID, row.CheckRunURL, row.MergeSHA, row.WaitingOn, row.RollbackOf, row.RolledBackBy,
			row.DeployDeadlineAt, row.Payload, row.Version, row.UpdatedAt,
			p.Code, prevVersion}
		if claim != nil {
			// Checked again in the write itself: on PostgreSQL another worker's
			// takeover may commit between the read above and this statement.
			query += ` AND claimed_by = ? AND claim_epoch = ? AND claim_expires_at >= ?`
			args = append(args, claim.Owner, claim.Epoch, toMillis(now))
		}
		res, err := tx.ExecContext(ctx, tx.Rebind(query), args...)
		if err != nil {
			return fmt.Errorf("update plan %s: %w", p.Code, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return ErrStale
		}
		ev.PlanCode, ev.Seq = p.Code, p.Version
		if ev.FromStatus == "" {
			ev.FromStatus = fromStatus
		}
		if ev.ToStatus == "" {
			ev.ToStatus = p.Status
		}
		if err := insertPlanEvent(ctx, tx, p, ev, now); err != nil {
			return err
		}
		if lc.ReleaseAll {
			var rerr error
			if released, rerr = releaseFileLocksTx(ctx, tx, p.Code); rerr != nil {
				return rerr
			}
		}
		if len(lc.Take) > 0 {
			if holder, terr := acquireFileLocksTx(ctx, tx, p.Code, p.Repo, lc.Take); terr != nil {
				if errors.Is(terr, ErrConflict) {
					return &LockHeldError{Holder: holder}
				}
				return terr
			}
		}
		return nil
	})
	if errors.Is(err, ErrStale) {
		return Plan{}, nil, fmt.Errorf("update plan %s: %w", p.Code, ErrStale)
	}
	if err != nil {
		return Plan{}, nil, err
	}
	return rowOf(p).plan(), released, nil
}

// insertPlanEvent records ev of plan p. A change of status is also an audit row and
// a plan.transition notification to each of the team's endpoints, all in the
// transaction that moves the plan.
func insertPlanEvent(ctx context.Context, tx *sqlx.Tx, p Plan, ev PlanEvent, now time.Time) error {
	teamID := p.TeamID
	if _, err := tx.ExecContext(ctx, tx.Rebind(`INSERT INTO plan_events
		(plan_code, seq, actor, from_status, to_status, step, message, worker, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		ev.PlanCode, ev.Seq, ev.Actor, ev.FromStatus, ev.ToStatus, ev.Step, ev.Message, ev.Worker, toMillis(now)); err != nil {
		if IsUniqueViolation(err) {
			return ErrStale
		}
		return fmt.Errorf("record event of plan %s: %w", ev.PlanCode, err)
	}
	if ev.FromStatus == ev.ToStatus {
		return nil
	}
	detail, err := json.Marshal(map[string]string{"from": ev.FromStatus, "to": ev.ToStatus, "step": ev.Step, "message": ev.Message})
	if err != nil {
		return fmt.Errorf("encode audit detail: %w", err)
	}
	actor := ev.Actor
	if actor == "" {
		actor = "system"
	}
	if _, err = RecordAuditEventTx(ctx, tx, AuditEvent{TeamID: teamID, Actor: actor, Action: "plan.transition",
		SubjectType: "plan", SubjectID: ev.PlanCode, Detail: detail, CreatedAt: now}); err != nil {
		return err
	}
	return notifyPlanTransitionTx(ctx, tx, p, ev, now)
}

// PlanEvents returns a plan's history, oldest first.
func (db *DB) PlanEvents(ctx context.Context, code string) ([]PlanEvent, error) {
	var rows []struct {
		PlanCode   string `db:"plan_code"`
		Seq        int64  `db:"seq"`
		Actor      string `db:"actor"`
		FromStatus string `db:"from_status"`
		ToStatus   string `db:"to_status"`
		Step       string `db:"step"`
		Message    string `db:"message"`
		Worker     string `db:"worker"`
		CreatedAt  int64  `db:"created_at"`
	}
	if err := db.SelectContext(ctx, &rows, db.Rebind(`SELECT plan_code, seq, actor, from_status, to_status, step, message, worker, created_at
		FROM plan_events WHERE plan_code = ? ORDER BY seq`), code); err != nil {
		return nil, fmt.Errorf("list events of plan %s: %w", code, err)
	}
	out := make([]PlanEvent, len(rows))
	for i, r := range rows {
		out[i] = PlanEvent{PlanCode: r.PlanCode, Seq: r.Seq, Actor: r.Actor, FromStatus: r.FromStatus, ToStatus: r.ToStatus,
			Step: r.Step, Message: r.Message, Worker: r.Worker, CreatedAt: fromMillis(r.CreatedAt)}
	}
	return out, nil
}

// FileLock is one (repository, file) held by a plan.
type FileLock struct {
	Repo       string    `db:"repo"`
	Path       string    `db:"path"`
	PlanCode   string    `db:"plan_code"`
	AcquiredAt time.Time `db:"-"`
}

// AcquireFileLocks takes every (repo, path) for plan, or none of them. When another
// plan holds one of the files, its code is returned and nothing is taken. Taking
// locks the plan already holds succeeds.
func (db *DB) AcquireFileLocks(ctx context.Context, planCode, repo string, paths []string) (holder string, err error) {
	err = db.InTx(ctx, func(tx *sqlx.Tx) error {
		var terr error
		holder, terr = acquireFileLocksTx(ctx, tx, planCode, repo, paths)
		return terr
	})
	if errors.Is(err, ErrConflict) {
		return holder, nil
	}
	return "", err
}

// acquireFileLocksTx takes paths for plan inside tx. When another plan holds one,
// it returns that plan's code with ErrConflict, so the caller's transaction rolls
// back what was taken; InTx callers turn that into (holder, nil).
func acquireFileLocksTx(ctx context.Context, tx *sqlx.Tx, planCode, repo string, paths []string) (string, error) {
	now := toMillis(time.Now())
	for _, p := range paths {
		if _, err := tx.ExecContext(ctx, tx.Rebind(`INSERT INTO file_locks (repo, path, plan_code, acquired_at)
			VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`), repo, p, planCode, now); err != nil {
			return "", fmt.Errorf("lock %s in %s: %w", p, repo, err)
		}
		var owner string
		if err := tx.GetContext(ctx, &owner, tx.Rebind(`SELECT plan_code FROM file_locks WHERE repo = ? AND path = ?`), repo, p); err != nil {
			return "", fmt.Errorf("read lock of %s in %s: %w", p, repo, err)
		}
		if owner != planCode {
			return owner, ErrConflict
		}
	}
	return "", nil
}

// ReplaceFileLocks makes paths the whole set of plan's locks in repo, in one
// transaction: the new files are taken and the files the plan no longer edits are
// released. When another plan holds one of the new files its code is returned and
// nothing changes. It returns the locks it released.
func (db *DB) ReplaceFileLocks(ctx context.Context, planCode, repo string, paths []string) (holder string, released []FileLock, err error) {
	keep := make(map[string]bool, len(paths))
	for _, p := range paths {
		keep[p] = true
	}
	err = db.InTx(ctx, func(tx *sqlx.Tx) error {
		var terr error
		if holder, terr = acquireFileLocksTx(ctx, tx, planCode, repo, paths); terr != nil {
			return terr
		}
		var held []FileLock
		if err := tx.SelectContext(ctx, &held, tx.Rebind(`SELECT repo, path, plan_code FROM file_locks WHERE plan_code = ? ORDER BY repo, path`), planCode); err != nil {
			return fmt.Errorf("read locks of plan %s: %w", planCode, err)
		}
		for _, l := range held {
			if l.Repo == repo && keep[l.Path] {
				continue
			}
			if _, err := tx.ExecContext(ctx, tx.Rebind(`DELETE FROM file_locks WHERE repo = ? AND path = ? AND plan_code = ?`), l.Repo, l.Path, planCode); err != nil {
				return fmt.Errorf("release lock of %s in %s: %w", l.Path, l.Repo, err)
			}
			released = append(released, l)
		}
		return nil
	})
	switch {
	case errors.Is(err, ErrConflict):
		return holder, nil, nil
	case err != nil:
		return "", nil, err
	}
	return "", released, nil
}

// ReleaseFileLocks drops every lock of plan and returns what was released.
func (db *DB) ReleaseFileLocks(ctx context.Context, planCode string) ([]FileLock, error) {
	var released []FileLock
	err := db.InTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		released, err = releaseFileLocksTx(ctx, tx, planCode)
		return err
	})
	return released, err
}

func releaseFileLocksTx(ctx context.Context, tx *sqlx.Tx, planCode string) ([]FileLock, error) {
	var released []FileLock
	if err := tx.SelectContext(ctx, &released, tx.Rebind(`SELECT repo, path, plan_code FROM file_locks WHERE plan_code = ?`), planCode); err != nil {
		return nil, fmt.Errorf("read locks of plan %s: %w", planCode, err)
	}
	if len(released) == 0 {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, tx.Rebind(`DELETE FROM file_locks WHERE plan_code = ?`), planCode); err != nil {
		return nil, fmt.Errorf("release locks of plan %s: %w", planCode, err)
	}
	return released, nil
}

// FileLocks lists the locks of a plan.
func (db *DB) FileLocks(ctx context.Context, planCode string) ([]FileLock, error) {
	var locks []FileLock
	if err := db.SelectContext(ctx, &locks, db.Rebind(`SELECT repo, path, plan_code FROM file_locks WHERE plan_code = ? ORDER BY path`), planCode); err != nil {
		return nil, fmt.Errorf("read locks of plan %s: %w", planCode, err)
	}
	return locks, nil
}

// plansOf decodes the rows of a listing of plans, in their order.
func (db *DB) plansOf(rows []planRow) ([]Plan, error) {
	out := make([]Plan, len(rows))
	for i, r := range rows {
		p, err := db.planOf(r)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}
