package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// States of a pull request check.
const (
	PullCheckRunning    = "running"
	PullCheckCompleted  = "completed"
	PullCheckSuperseded = "superseded"
	PullCheckFailed     = "failed"
)

// PullCheck is one kukie/render check of a head the service did not open: a pull
// request's or a merge queue entry's, named by Key ("pull/12").
type PullCheck struct {
	ID             string
	InstallationID int64
	// Repo is "owner/name" in lower case; RepoURL its canonical URL.
	Repo       string
	RepoURL    string
	Key        string
	BaseBranch string
	BaseSHA    string
	HeadSHA    string
	// Generation orders the checks of one key: each takes the next.
	Generation int64
	State      string
	Conclusion string
	// Note says why a check was superseded or failed.
	Note       string
	CheckRunID int64
	// PolicyCheckRunID is the check's kukie/policy run.
	PolicyCheckRunID int64
	// BaseMovedSHA is the base branch's commit a push first moved it to after the
	// check completed ("" while it did not): the check run says its result is stale.
	BaseMovedSHA string
	// PolicyMovedSHA is the commit a push that changed the policy file first moved
	// the policy's branch to after the check read it: the base branch's, after the
	// check completed, or the default branch's for a check into another branch
	// (told while it runs too). The kukie/policy run says the policy it was judged
	// by is outdated.
	PolicyMovedSHA string
	// MovedWhileRunningSHA is the newest commit a push moved the base branch to
	// while the check ran: the check judges it once it completes.
	MovedWhileRunningSHA string
	// PolicySHA is the commit of the policy's branch (the default branch) the check
	// read its policy from, or one before it: read just before the policy, so the
	// policy file's changes up to it are not moves of the policy the check was
	// judged by. "" when it is not known (a merge group, or GitHub did not say).
	PolicySHA string
	// MovesPending is set while the check's judgement of the base moves while it
	// ran is owed: it failed when the check completed, and the next push to the
	// base branch judges them (SetPullCheckMovesPending).
	MovesPending bool
	// Result is what the check computed (JSON), empty until it completed.
	Result    json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

type pullCheckRow struct {
	ID             string `db:"id"`
	InstallationID int64  `db:"installation_id"`
	Repo           string `db:"repo"`
	RepoURL        string `db:"repo_url"`
	Key            string `db:"check_key"`
	BaseBranch     string `db:"base_branch"`
	BaseSHA        string `db:"base_sha"`
	HeadSHA        string `db:"head_sha"`
	Generation     int64  `db:"generation"`
	State          string `db:"state"`
	Conclusion     string `db:"conclusion"`
	Note           string `db:"note"`
	CheckRunID     int64  `db:"check_run_id"`
	Result         string `db:"result"`
	BaseMovedSHA   string `db:"base_moved_sha"`
	PolicyRunID    int64  `db:"policy_check_run_id"`
	PolicyMovedSHA string `db:"policy_moved_sha"`
	MovedRunning   string `db:"moved_while_running_sha"`
	MovesPending   int64  `db:"moves_pending"`
	PolicySHA      string `db:"policy_sha"`
	CreatedAt      int64  `db:"created_at"`
	UpdatedAt      int64  `db:"updated_at"`
}

const pullCheckColumns = `id, installation_id, repo, repo_url, check_key, base_branch, base_sha, head_sha, generation,
	state, conclusion, note, check_run_id, result, base_moved_sha, policy_check_run_id, policy_moved_sha, moved_while_running_sha,
	moves_pending, policy_sha, created_at, updated_at`

// pullCheckListColumns leave the result out: a history lists checks, it does not
// show their diffs.
const pullCheckListColumns = `id, installation_id, repo, repo_url, check_key, base_branch, base_sha, head_sha, generation,
	state, conclusion, note, check_run_id, '' AS result, base_moved_sha, policy_check_run_id, policy_moved_sha, moved_while_running_sha,
	moves_pending, policy_sha, created_at, updated_at`

func (r pullCheckRow) check() PullCheck {
	c := PullCheck{ID: r.ID, InstallationID: r.InstallationID, Repo: r.Repo, RepoURL: r.RepoURL, Key: r.Key,
		BaseBranch: r.BaseBranch, BaseSHA: r.BaseSHA, HeadSHA: r.HeadSHA, Generation: r.Generation, State: r.State,
		Conclusion: r.Conclusion, Note: r.Note, CheckRunID: r.CheckRunID, PolicyCheckRunID: r.PolicyRunID, BaseMovedSHA: r.BaseMovedSHA, PolicyMovedSHA: r.PolicyMovedSHA,
		MovedWhileRunningSHA: r.MovedRunning, MovesPending: r.MovesPending != 0, PolicySHA: r.PolicySHA, CreatedAt: fromMillis(r.CreatedAt), UpdatedAt: fromMillis(r.UpdatedAt)}
	if r.Result != "" {
		c.Result = json.RawMessage(r.Result)
	}
	return c
}

// BeginPullCheck records a new running check of c's repository and key and makes it
// the key's current one, with the next generation: a check of the key that is still
// running, on this replica or another, is superseded from then on (PullCheckHolder
// tells it so). c's PolicySHA is kept with it. The returned check has its id,
// generation and times.
func (db *DB) BeginPullCheck(ctx context.Context, c PullCheck) (PullCheck, error) {
	if c.Repo == "" || c.Key == "" || c.HeadSHA == "" {
		return PullCheck{}, fmt.Errorf("begin pull check: repository, key and head are required (got %q, %q, %q)", c.Repo, c.Key, c.HeadSHA)
	}
	now := time.Now()
	c.ID, c.State, c.Conclusion, c.Note, c.CheckRunID, c.Result = NewID(), PullCheckRunning, "", "", 0, nil
	c.CreatedAt, c.UpdatedAt = fromMillis(toMillis(now)), fromMillis(toMillis(now))
	err := db.InTx(ctx, func(tx *sqlx.Tx) error {
		// The upsert takes the key's row lock (PostgreSQL) or the write lock
		// (SQLite), so two checks beginning at once get different generations.
		if err := tx.QueryRowxContext(ctx, tx.Rebind(`INSERT INTO pull_check_keys (repo, check_key, generation, check_id, head_sha)
			VALUES (?, ?, 1, ?, ?)
			ON CONFLICT (repo, check_key) DO UPDATE SET generation = pull_check_keys.generation + 1,
				check_id = excluded.check_id, head_sha = excluded.head_sha
			RETURNING generation`), c.Repo, c.Key, c.ID, c.HeadSHA).Scan(&c.Generation); err != nil {
			return fmt.Errorf("take key %s of %s: %w", c.Key, c.Repo, err)
		}
		if _, err := tx.ExecContext(ctx, tx.Rebind(`INSERT INTO pull_checks (`+pullCheckColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', '', 0, '', '', 0, '', '', 0, ?, ?, ?)`),
			c.ID, c.InstallationID, c.Repo, c.RepoURL, c.Key, c.BaseBranch, c.BaseSHA, c.HeadSHA, c.Generation, c.State,
			c.PolicySHA, toMillis(now), toMillis(now)); err != nil {
			return fmt.Errorf("insert check of %s: %w", c.HeadSHA, err)
		}
		return nil
	})
	if err != nil {
		return PullCheck{}, fmt.Errorf("begin pull check %s of %s: %w", c.Key, c.Repo, err)
	}
	return c, nil
}

// PullCheckHolder reports whether the check id is still the current one of its key.
// When it is not, by is the head of the check that took the key over, or "" when
// the key was released (ReleasePullCheckKey).
func (db *DB) PullCheckHolder(ctx context.Context, id string) (holds bool, by string, err error) {
	var row struct {
		CheckID sql.NullString `db:"check_id"`
		HeadSHA sql.NullString `db:"head_sha"`
	}
	err = db.GetContext(ctx, &row, db.Rebind(`SELECT k.check_id, k.head_sha FROM pull_checks c
		LEFT JOIN pull_check_keys k ON k.repo = c.repo AND k.check_key = c.check_key WHERE c.id = ?`), id)
	if errors.Is(err, sql.ErrNoRows) {
		return false, "", fmt.Errorf("pull check %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return false, "", fmt.Errorf("read the holder of pull check %s: %w", id, err)
	}
	if row.CheckID.String == id {
		return true, "", nil
	}
	if row.CheckID.String == "" {
		return false, "", nil
	}
	return false, row.HeadSHA.String, nil
}

// ReleasePullCheckKey ends the key's current check without a successor (the pull
// request closed): a check of it still running is superseded.
func (db *DB) ReleasePullCheckKey(ctx context.Context, repo, key string) error {
	if _, err := db.ExecContext(ctx, db.Rebind(`UPDATE pull_check_keys SET generation = generation + 1, check_id = '', head_sha = ''
		WHERE repo = ? AND check_key = ?`), repo, key); err != nil {
		return fmt.Errorf("release key %s of %s: %w", key, repo, err)
	}
	return nil
}

// SetPullCheckRun records the check run a check publishes on.
func (db *DB) SetPullCheckRun(ctx context.Context, id string, checkRunID int64) error {
	return db.updatePullCheck(ctx, id, `check_run_id = ?`, checkRunID)
}

// SetPullCheckPolicyRun records the kukie/policy run a check publishes on.
func (db *DB) SetPullCheckPolicyRun(ctx context.Context, id string, checkRunID int64) error {
	return db.updatePullCheck(ctx, id, `policy_check_run_id = ?`, checkRunID)
}

// FinishPullCheck records how a check ended: its state (completed, superseded or
// failed), the conclusion it published, a note, and for a completed check its
// result.
func (db *DB) FinishPullCheck(ctx context.Context, id, state, conclusion, note string, result json.RawMessage) error {
	switch state {
	case PullCheckCompleted, PullCheckSuperseded, PullCheckFailed:
	default:
		return fmt.Errorf("finish pull check %s: %q is not a final state", id, state)
	}
	if result != nil && !json.Valid(result) {
		return fmt.Errorf("finish pull check %s: the result is not JSON", id)
	}
	return db.updatePullCheck(ctx, id, `state = ?, conclusion = ?, note = ?, result = ?`, state, conclusion, note, string(result))
}

func (db *DB) updatePullCheck(ctx context.Context, id, set string, args ...any) error {
	args = append(args, toMillis(time.Now()), id)
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE pull_checks SET `+set+`, updated_at = ? WHERE id = ?`), args...)
	if err != nil {
		return fmt.Errorf("update pull check %s: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update pull check %s: %w", id, err)
	} else if n == 0 {
		return fmt.Errorf("update pull check %s: %w", id, ErrNotFound)
	}
	return nil
}

// PullCheckByID reads one check with its result.
func (db *DB) PullCheckByID(ctx context.Context, id string) (PullCheck, error) {
	return getRow(ctx, db, "pull check "+id, pullCheckRow.check, `SELECT `+pullCheckColumns+` FROM pull_checks WHERE id = ?`, id)
}

// PullCheckMarks reads one check without its result: its state, runs and marks.
func (db *DB) PullCheckMarks(ctx context.Context, id string) (PullCheck, error) {
	return getRow(ctx, db, "pull check "+id, pullCheckRow.check, `SELECT `+pullCheckListColumns+` FROM pull_checks WHERE id = ?`, id)
}

// PullChecksOf lists the checks of a repository's key, newest first, without their
// results: the history of a pull request's checks.
func (db *DB) PullChecksOf(ctx context.Context, repo, key string) ([]PullCheck, error) {
	return listRows(ctx, db, "pull checks of "+key, pullCheckRow.check,
		`SELECT `+pullCheckListColumns+` FROM pull_checks WHERE repo = ? AND check_key = ? ORDER BY generation DESC`, repo, key)
}

// PrunePullChecks deletes the finished checks last updated before before that are
// no longer the current check of their key, and returns how many: one row is
// added per push, and only the current check's page is worth keeping for long.
func (db *DB) PrunePullChecks(ctx context.Context, before time.Time) (int64, error) {
	res, err := db.ExecContext(ctx, db.Rebind(`DELETE FROM pull_checks WHERE state <> ? AND updated_at < ?
		AND id NOT IN (SELECT check_id FROM pull_check_keys)`), PullCheckRunning, toMillis(before))
	if err != nil {
		return 0, fmt.Errorf("prune pull checks: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune pull checks: %w", err)
	}
	return n, nil
}

// CurrentPullChecksOnBase lists the current checks of repo's pull requests into
// branch that were computed against another base than sha, most recently updated
// first, at most limit, without their results: the checks a push of sha to branch
// may have made stale. They are the completed checks whose kukie/render run is not
// marked stale yet or, with policy (the push may have changed the policy file),
// whose kukie/policy run is not, or whose judgement of the moves while they ran is
// owed (MovesPending); and the running checks not yet told of sha
// (MarkPullCheckMovedWhileRunning), which judge it when they complete.
func (db *DB) CurrentPullChecksOnBase(ctx context.Context, repo, branch, sha string, policy bool, limit int) ([]PullCheck, error) {
	return listRows(ctx, db, "current pull checks on "+branch, pullCheckRow.check,
		`SELECT c.id, c.installation_id, c.repo, c.repo_url, c.check_key, c.base_branch, c.base_sha, c.head_sha, c.generation,
			c.state, c.conclusion, c.note, c.check_run_id, '' AS result, c.base_moved_sha, c.policy_check_run_id, c.policy_moved_sha,
			c.moved_while_running_sha, c.moves_pending, c.policy_sha, c.created_at, c.updated_at
		FROM pull_check_keys k JOIN pull_checks c ON c.id = k.check_id
		WHERE k.repo = ? AND k.check_key LIKE 'pull/%' AND c.base_branch = ? AND c.base_sha <> ?
			AND (c.state = ? AND (c.base_moved_sha = '' OR (? AND c.policy_check_run_id <> 0 AND c.policy_moved_sha = '') OR c.moves_pending <> 0)
				OR c.state = ? AND c.moved_while_running_sha <> ?)
		ORDER BY c.updated_at DESC, c.id DESC LIMIT ?`, repo, branch, sha, PullCheckCompleted, policy, PullCheckRunning, sha, limit)
}

// CurrentPullChecksOffBase lists the current checks of repo's pull requests into
// another branch than branch whose judgement of the moves while they ran is owed
// (MovesPending) and, with policy, those whose kukie/policy run is not marked
// stale yet, most recently updated first, at most limit, without their results:
// the checks a push to branch, the repository's default branch, whose policy file
// is read whatever the pull request's base, may judge or have made stale. With
// policy, they are the completed checks with a kukie/policy run whose policy is
// not marked moved, and the running checks not yet told
// (MarkPullCheckPolicyMovedWhileRunning).
func (db *DB) CurrentPullChecksOffBase(ctx context.Context, repo, branch string, policy bool, limit int) ([]PullCheck, error) {
	return listRows(ctx, db, "current pull checks off "+branch, pullCheckRow.check,
		`SELECT c.id, c.installation_id, c.repo, c.repo_url, c.check_key, c.base_branch, c.base_sha, c.head_sha, c.generation,
			c.state, c.conclusion, c.note, c.check_run_id, '' AS result, c.base_moved_sha, c.policy_check_run_id, c.policy_moved_sha,
			c.moved_while_running_sha, c.moves_pending, c.policy_sha, c.created_at, c.updated_at
		FROM pull_check_keys k JOIN pull_checks c ON c.id = k.check_id
		WHERE k.repo = ? AND k.check_key LIKE 'pull/%' AND c.base_branch <> ?
			AND (? AND c.policy_moved_sha = '' AND (c.state = ? AND c.policy_check_run_id <> 0 OR c.state = ?)
				OR c.state = ? AND c.moves_pending <> 0)
		ORDER BY c.updated_at DESC, c.id DESC LIMIT ?`, repo, branch, policy, PullCheckCompleted, PullCheckRunning, PullCheckCompleted, limit)
}

// MarkPullCheckBaseMoved records that the base of the completed check id moved to
// sha, unless it was marked already, and reports whether this call marked it: a
// marked check is not listed by CurrentPullChecksOnBase again, so later pushes and
// repeated deliveries say so on GitHub no more.
func (db *DB) MarkPullCheckBaseMoved(ctx context.Context, id, sha string) (bool, error) {
	return db.markPullCheck(ctx, "mark the base of pull check "+id+" moved", `base_moved_sha = ?`,
		`state = ? AND base_moved_sha = ''`, sha, id, PullCheckCompleted)
}

// MarkPullCheckPolicyMoved records that a push that changed the policy file moved
// the base of the completed check id to sha, unless it was marked so already, and
// reports whether this call marked it: its kukie/policy run says so once.
func (db *DB) MarkPullCheckPolicyMoved(ctx context.Context, id, sha string) (bool, error) {
	return db.markPullCheck(ctx, "mark the policy of pull check "+id+" moved", `policy_moved_sha = ?`,
		`state = ? AND policy_moved_sha = ''`, sha, id, PullCheckCompleted)
}

// MarkPullCheckMovedWhileRunning records that a push moved the base of the check
// id to sha while the check runs, and reports whether it did: false when the check
// is no longer running (it completed since it was listed, and is judged as a
// completed check is). A later push replaces sha with its own.
func (db *DB) MarkPullCheckMovedWhileRunning(ctx context.Context, id, sha string) (bool, error) {
	return db.markPullCheck(ctx, "record a base move under running pull check "+id, `moved_while_running_sha = ?`,
		`state = ?`, sha, id, PullCheckRunning)
}

// MarkPullCheckPolicyMovedWhileRunning records that a push that changed the policy
// file of another branch than the check's base (the default branch) moved it to sha
// while the check id runs, unless it was told so already, and reports whether this
// call told it: false when the check is no longer running (it is then judged as a
// completed check is). The check marks its kukie/policy run once it completed.
func (db *DB) MarkPullCheckPolicyMovedWhileRunning(ctx context.Context, id, sha string) (bool, error) {
	return db.markPullCheck(ctx, "record a policy move under running pull check "+id, `policy_moved_sha = ?`,
		`state = ? AND policy_moved_sha = ''`, sha, id, PullCheckRunning)
}

// SetPullCheckMovesPending records whether the check id's judgement of the base
// moves while it ran is owed (MovesPending).
func (db *DB) SetPullCheckMovesPending(ctx context.Context, id string, pending bool) error {
	v := 0
	if pending {
		v = 1
	}
	return db.updatePullCheck(ctx, id, `moves_pending = ?`, v)
}

// markPullCheck sets set to value on the check id when cond holds (with condArg),
// and reports whether it did.
func (db *DB) markPullCheck(ctx context.Context, what, set, cond, value, id, condArg string) (bool, error) {
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE pull_checks SET `+set+`, updated_at = ? WHERE id = ? AND `+cond),
		value, toMillis(time.Now()), id, condArg)
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	return n == 1, nil
}
