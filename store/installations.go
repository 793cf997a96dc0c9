package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kukie/kukie-gitops/secret"
)

const (
	// installStateBytes is the entropy of a setup-callback state.
	installStateBytes = 32
	// installStateRetention is how long expired states are kept (for inspection).
	installStateRetention = 24 * time.Hour
)

// Errors of the install-and-bind flow, tested with errors.Is.
var (
	// ErrInstallStateInvalid covers an unknown, used or expired state alike: the
	// callback must not tell an attacker which one it was.
	ErrInstallStateInvalid = errors.New("install state is unknown, already used or expired")
	// ErrInstallationTaken means the installation is bound to another team.
	ErrInstallationTaken = errors.New("installation is bound to another team")
)

// InstallationStatus is the lifecycle of a team's installation.
type InstallationStatus string

const (
	InstallationActive          InstallationStatus = "active"
	InstallationPendingApproval InstallationStatus = "pending_approval"
	InstallationSuspended       InstallationStatus = "suspended"
	InstallationDeleted         InstallationStatus = "deleted"
)

// Installation is an installation of the App bound to a team, or a team's request
// for one that an organization owner has not approved yet (InstallationID 0).
type Installation struct {
	ID             string
	InstallationID int64
	TeamID         string
	AccountLogin   string
	AccountType    string
	Status         InstallationStatus
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

type installationRow struct {
	ID             string        `db:"id"`
	InstallationID sql.NullInt64 `db:"installation_id"`
	TeamID         string        `db:"team_id"`
	AccountLogin   string        `db:"account_login"`
	AccountType    string        `db:"account_type"`
	Status         string        `db:"status"`
	CreatedAt      int64         `db:"created_at"`
	UpdatedAt      int64         `db:"updated_at"`
}

const installationColumns = `id, installation_id, team_id, account_login, account_type, status, created_at, updated_at`

func (r installationRow) installation() Installation {
	return Installation{
		ID: r.ID, InstallationID: r.InstallationID.Int64, TeamID: r.TeamID,
		AccountLogin: r.AccountLogin, AccountType: r.AccountType, Status: InstallationStatus(r.Status),
		CreatedAt: fromMillis(r.CreatedAt), UpdatedAt: fromMillis(r.UpdatedAt),
	}
}

// HashInstallState returns the stored form of a state.
func HashInstallState(state secret.Secret) string {
	sum := sha256.Sum256([]byte(state.Reveal()))
	return hex.EncodeToString(sum[:])
}

// CreateInstallState stores a new one-time state for team, valid for ttl, and
// returns it. Only its hash is stored.
func (db *DB) CreateInstallState(ctx context.Context, teamID string, ttl time.Duration) (secret.Secret, time.Time, error) {
	b := make([]byte, installStateBytes)
	if _, err := rand.Read(b); err != nil {
		return "", time.Time{}, fmt.Errorf("create install state: %w", err)
	}
	state := secret.New(base64.RawURLEncoding.EncodeToString(b))
	now := time.Now()
	expires := fromMillis(toMillis(now.Add(ttl)))
	if _, err := db.ExecContext(ctx, db.Rebind(`INSERT INTO install_states (state_hash, team_id, created_at, expires_at)
		VALUES (?, ?, ?, ?)`), HashInstallState(state), teamID, toMillis(now), toMillis(expires)); err != nil {
		return "", time.Time{}, fmt.Errorf("create install state for team %s: %w", teamID, err)
	}
	// States are worthless a day after they expire; dropping them here keeps the
	// table small without a separate job.
	if _, err := db.ExecContext(ctx, db.Rebind(`DELETE FROM install_states WHERE expires_at < ?`),
		toMillis(now.Add(-installStateRetention))); err != nil {
		return "", time.Time{}, fmt.Errorf("prune install states: %w", err)
	}
	return state, expires, nil
}

// ConsumeInstallState marks a state used and returns the team it was issued to. A
// state is consumed at most once, even by concurrent callbacks: the single UPDATE
// matches only an unused, unexpired row. Anything else is ErrInstallStateInvalid.
func (db *DB) ConsumeInstallState(ctx context.Context, state secret.Secret) (string, error) {
	if !state.IsSet() {
		return "", ErrInstallStateInvalid
	}
	now := toMillis(time.Now())
	var teamID string
	err := db.GetContext(ctx, &teamID, db.Rebind(`UPDATE install_states SET used_at = ?
		WHERE state_hash = ? AND used_at IS NULL AND expires_at > ?
		RETURNING team_id`), now, HashInstallState(state), now)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrInstallStateInvalid
	}
	if err != nil {
		return "", fmt.Errorf("consume install state: %w", err)
	}
	return teamID, nil
}

// BoundInstallation is what GitHub confirmed about an installation being bound.
type BoundInstallation struct {
	InstallationID int64
	AccountLogin   string
	AccountType    string
	Suspended      bool
}

// BindInstallation binds an installation to team. The unique installation_id decides
// races: of concurrent binds by different teams exactly one wins and the others get
// ErrInstallationTaken; binding again by the same team refreshes the account and
// status and returns the existing binding. A pending request of the team is resolved
// by the binding. The caller must have confirmed the installation with GitHub first;
// this runs without any call out, in one short transaction.
func (db *DB) BindInstallation(ctx context.Context, teamID string, b BoundInstallation) (Installation, error) {
	if b.InstallationID <= 0 {
		return Installation{}, fmt.Errorf("bind installation: invalid installation id %d", b.InstallationID)
	}
	status := InstallationActive
	if b.Suspended {
		status = InstallationSuspended
	}
	var out Installation
	err := db.InTx(ctx, func(tx *sqlx.Tx) error {
		now := toMillis(time.Now())
		if _, err := tx.ExecContext(ctx, tx.Rebind(`INSERT INTO installations
			(id, installation_id, team_id, account_login, account_type, status, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (installation_id) DO NOTHING`),
			NewID(), b.InstallationID, teamID, b.AccountLogin, b.AccountType, status, now, now); err != nil {
			return fmt.Errorf("bind installation %d: %w", b.InstallationID, err)
		}
		var row installationRow
		if err := tx.GetContext(ctx, &row, tx.Rebind(`SELECT `+installationColumns+` FROM installations
			WHERE installation_id = ?`), b.InstallationID); err != nil {
			return fmt.Errorf("bind installation %d: read back: %w", b.InstallationID, err)
		}
		if row.TeamID != teamID {
			return fmt.Errorf("bind installation %d: %w", b.InstallationID, ErrInstallationTaken)
		}
		if _, err := tx.ExecContext(ctx, tx.Rebind(`UPDATE installations
			SET account_login = ?, account_type = ?, status = ?, updated_at = ? WHERE id = ?`),
			b.AccountLogin, b.AccountType, status, now, row.ID); err != nil {
			return fmt.Errorf("bind installation %d: %w", b.InstallationID, err)
		}
		if _, err := tx.ExecContext(ctx, tx.Rebind(`DELETE FROM installations
			WHERE team_id = ? AND installation_id IS NULL AND status = ?`), teamID, InstallationPendingApproval); err != nil {
			return fmt.Errorf("bind installation %d: resolve pending request: %w", b.InstallationID, err)
		}
		row.AccountLogin, row.AccountType, row.Status, row.UpdatedAt = b.AccountLogin, b.AccountType, string(status), now
		out = row.installation()
		return nil
	})
	return out, err
}

// RecordInstallationRequest notes that team asked an organization owner to approve
// an installation (GitHub's setup_action=request). One pending request per team.
func (db *DB) RecordInstallationRequest(ctx context.Context, teamID string) (Installation, error) {
	var out Installation
	err := db.InTx(ctx, func(tx *sqlx.Tx) error {
		var rows []installationRow
		if err := tx.SelectContext(ctx, &rows, tx.Rebind(`SELECT `+installationColumns+` FROM installations
			WHERE team_id = ? AND installation_id IS NULL AND status = ?`), teamID, InstallationPendingApproval); err != nil {
			return fmt.Errorf("record installation request: %w", err)
		}
		if len(rows) > 0 {
			out = rows[0].installation()
			return nil
		}
		now := toMillis(time.Now())
		row := installationRow{ID: NewID(), TeamID: teamID, Status: string(InstallationPendingApproval), CreatedAt: now, UpdatedAt: now}
		if _, err := tx.NamedExecContext(ctx, `INSERT INTO installations
			(id, installation_id, team_id, account_login, account_type, status, created_at, updated_at)
			VALUES (:id, NULL, :team_id, '', '', :status, :created_at, :updated_at)`, row); err != nil {
			return fmt.Errorf("record installation request: %w", err)
		}
		out = row.installation()
		return nil
	})
	return out, err
}

// InstallationByGitHubID reads the binding of an installation; ErrNotFound when no
// team has bound it.
func (db *DB) InstallationByGitHubID(ctx context.Context, installationID int64) (Installation, error) {
	var row installationRow
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT `+installationColumns+` FROM installations
		WHERE installation_id = ?`), installationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Installation{}, fmt.Errorf("installation %d: %w", installationID, ErrNotFound)
	}
	if err != nil {
		return Installation{}, fmt.Errorf("read installation %d: %w", installationID, err)
	}
	return row.installation(), nil
}

// ListInstallations returns a team's installations and pending requests, oldest first.
func (db *DB) ListInstallations(ctx context.Context, teamID string) ([]Installation, error) {
	var rows []installationRow
	if err := db.SelectContext(ctx, &rows, db.Rebind(`SELECT `+installationColumns+` FROM installations
		WHERE team_id = ? ORDER BY created_at, id`), teamID); err != nil {
		return nil, fmt.Errorf("list installations of team %s: %w", teamID, err)
	}
	out := make([]Installation, len(rows))
	for i, r := range rows {
		out[i] = r.installation()
	}
	return out, nil
}

// SetInstallationStatus records a status GitHub reported for a bound installation;
// ErrNotFound when no team has bound it.
func (db *DB) SetInstallationStatus(ctx context.Context, installationID int64, status InstallationStatus) (Installation, error) {
	var row installationRow
	err := db.GetContext(ctx, &row, db.Rebind(`UPDATE installations SET status = ?, updated_at = ?
		WHERE installation_id = ? RETURNING `+installationColumns), status, toMillis(time.Now()), installationID)
	if errors.Is(err, sql.ErrNoRows) {
		return Installation{}, fmt.Errorf("installation %d: %w", installationID, ErrNotFound)
	}
	if err != nil {
		return Installation{}, fmt.Errorf("set status of installation %d: %w", installationID, err)
	}
	return row.installation(), nil
}

// InstallationRepo is a repository an installation can access.
type InstallationRepo struct {
	Repo         string // canonical URL
	GitHubRepoID int64
}

// ReplaceInstallationRepos makes repos the complete list of repositories a bound
// installation can access (after a full listing from GitHub), revoking connections
// to repositories no longer in it, with reason (RepoAccessLost when empty), and
// restoring those back in it.
func (db *DB) ReplaceInstallationRepos(ctx context.Context, installationID int64, repos []InstallationRepo, reason string) (RepoAccessChange, error) {
	if reason == "" {
		reason = RepoAccessLost
	}
	var change RepoAccessChange
	err := db.InTx(ctx, func(tx *sqlx.Tx) error {
		var current []string
		if err := tx.SelectContext(ctx, &current, tx.Rebind(`SELECT repo FROM installation_repos WHERE installation_id = ?`), installationID); err != nil {
			return fmt.Errorf("replace repositories of installation %d: %w", installationID, err)
		}
		keep := make(map[string]bool, len(repos))
		for _, r := range repos {
			keep[r.Repo] = true
		}
		var gone []string
		for _, r := range current {
			if !keep[r] {
				gone = append(gone, r)
			}
		}
		var err error
		if change.Revoked, err = removeInstallationRepos(ctx, tx, installationID, gone, reason); err != nil {
			return err
		}
		change.Restored, err = addInstallationRepos(ctx, tx, installationID, repos)
		return err
	})
	return change, err
}

// RepoAccessLost is the reason a connection is revoked when GitHub's listing of an
// installation's repositories no longer has its repository.
const RepoAccessLost = "the installation no longer has access to this repository"

// RepoAccessChange lists the connections whose status changed with an installation's
// repositories.
type RepoAccessChange struct {
	Revoked  []RepoConnection
	Restored []RepoConnection
}

// AddInstallationRepos records repositories added to a bound installation and
// restores the team's connections to them that were revoked or waiting for approval.
func (db *DB) AddInstallationRepos(ctx context.Context, installationID int64, repos []InstallationRepo) ([]RepoConnection, error) {
	var restored []RepoConnection
	err := db.InTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		restored, err = addInstallationRepos(ctx, tx, installationID, repos)
		return err
	})
	return restored, err
}

// RemoveInstallationRepos records repositories removed from a bound installation and
// revokes the team's connections to them, with reason, unless another active
// installation of the team still grants access. It returns the revoked connections.
func (db *DB) RemoveInstallationRepos(ctx context.Context, installationID int64, repos []string, reason string) ([]RepoConnection, error) {
	var revoked []RepoConnection
	err := db.InTx(ctx, func(tx *sqlx.Tx) error {
		var err error
		revoked, err = removeInstallationRepos(ctx, tx, installationID, repos, reason)
		return err
	})
	return revoked, err
}

func addInstallationRepos(ctx context.Context, tx *sqlx.Tx, installationID int64, repos []InstallationRepo) ([]RepoConnection, error) {
	teamID, err := installationTeam(ctx, tx, installationID)
	if err != nil {
		return nil, err
	}
	now := toMillis(time.Now())
	var restored []RepoConnection
	for _, r := range repos {
		if _, err := tx.ExecContext(ctx, tx.Rebind(`INSERT INTO installation_repos (installation_id, repo, github_repo_id, added_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (installation_id, repo) DO UPDATE SET github_repo_id = excluded.github_repo_id`),
			installationID, r.Repo, r.GitHubRepoID, now); err != nil {
			return nil, fmt.Errorf("add repository %s to installation %d: %w", r.Repo, installationID, err)
		}
		var rows []repoConnectionRow
		if err := tx.SelectContext(ctx, &rows, tx.Rebind(`UPDATE repo_connections SET status = ?, status_reason = '', updated_at = ?
			WHERE repo = ? AND status IN (?, ?) AND cluster_id IN (SELECT id FROM clusters WHERE team_id = ?)
			RETURNING `+repoConnectionColumns), ConnectionConnected, now, r.Repo, ConnectionRevoked, ConnectionPendingApproval, teamID); err != nil {
			return nil, fmt.Errorf("restore connections to %s: %w", r.Repo, err)
		}
		for _, row := range rows {
			restored = append(restored, row.connection())
			if err := notifyConnectionTx(ctx, tx, row.ClusterID, row.Repo, row.Status, "", fromMillis(now)); err != nil {
				return nil, err
			}
		}
	}
	return restored, nil
}

func removeInstallationRepos(ctx context.Context, tx *sqlx.Tx, installationID int64, repos []string, reason string) ([]RepoConnection, error) {
	teamID, err := installationTeam(ctx, tx, installationID)
	if err != nil {
		return nil, err
	}
	now := toMillis(time.Now())
	var revoked []RepoConnection
	for _, repo := range repos {
		if _, err := tx.ExecContext(ctx, tx.Rebind(`DELETE FROM installation_repos WHERE installation_id = ? AND repo = ?`),
			installationID, repo); err != nil {
			return nil, fmt.Errorf("remove repository %s from installation %d: %w", repo, installationID, err)
		}
		var others int
		if err := tx.GetContext(ctx, &others, tx.Rebind(`SELECT COUNT(*) FROM installation_repos ir
			JOIN installations i ON i.installation_id = ir.installation_id
			WHERE ir.repo = ? AND i.team_id = ? AND i.status = ?`), repo, teamID, InstallationActive); err != nil {
			return nil, fmt.Errorf("remove repository %s from installation %d: %w", repo, installationID, err)
		}
		if others > 0 {
			continue
		}
		var rows []repoConnectionRow
		if err := tx.SelectContext(ctx, &rows, tx.Rebind(`UPDATE repo_connections SET status = ?, status_reason = ?, updated_at = ?
			WHERE repo = ? AND status <> ? AND cluster_id IN (SELECT id FROM clusters WHERE team_id = ?)
			RETURNING `+repoConnectionColumns), ConnectionRevoked, reason, now, repo, ConnectionRevoked, teamID); err != nil {
			return nil, fmt.Errorf("revoke connections to %s: %w", repo, err)
		}
		for _, row := range rows {
			revoked = append(revoked, row.connection())
			if err := notifyConnectionTx(ctx, tx, row.ClusterID, row.Repo, row.Status, reason, fromMillis(now)); err != nil {
				return nil, err
			}
		}
	}
	return revoked, nil
}

func installationTeam(ctx context.Context, tx *sqlx.Tx, installationID int64) (string, error) {
	var teamID string
	err := tx.GetContext(ctx, &teamID, tx.Rebind(`SELECT team_id FROM installations WHERE installation_id = ?`), installationID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("installation %d: %w", installationID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read installation %d: %w", installationID, err)
	}
	return teamID, nil
}

// InstallationRepos lists the repositories a bound installation can access.
func (db *DB) InstallationRepos(ctx context.Context, installationID int64) ([]InstallationRepo, error) {
	var rows []struct {
		Repo         string `db:"repo"`
		GitHubRepoID int64  `db:"github_repo_id"`
	}
	if err := db.SelectContext(ctx, &rows, db.Rebind(`SELECT repo, github_repo_id FROM installation_repos
		WHERE installation_id = ? ORDER BY repo`), installationID); err != nil {
		return nil, fmt.Errorf("list repositories of installation %d: %w", installationID, err)
	}
	out := make([]InstallationRepo, len(rows))
	for i, r := range rows {
		out[i] = InstallationRepo{Repo: r.Repo, GitHubRepoID: r.GitHubRepoID}
	}
	return out, nil
}

// InstallationsForRepo returns the team's bound installations that can access repo
// (canonical URL), active ones first.
func (db *DB) InstallationsForRepo(ctx context.Context, teamID, repo string) ([]Installation, error) {
	var rows []installationRow
	if err := db.SelectContext(ctx, &rows, db.Rebind(`SELECT i.id, i.installation_id, i.team_id, i.account_login,
			i.account_type, i.status, i.created_at, i.updated_at
		FROM installations i JOIN installation_repos ir ON ir.installation_id = i.installation_id
		WHERE i.team_id = ? AND ir.repo = ?
		ORDER BY CASE WHEN i.status = ? THEN 0 ELSE 1 END, i.created_at`), teamID, repo, InstallationActive); err != nil {
		return nil, fmt.Errorf("find installations of team %s for %s: %w", teamID, repo, err)
	}
	out := make([]Installation, len(rows))
	for i, r := range rows {
		out[i] = r.installation()
	}
	return out, nil
}
