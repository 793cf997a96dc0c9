package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// PullSweepDue lists the plans in one of statuses with a pull request that the
// periodic check of open pull requests has not read since before (or never), least
// recently read first, at most limit (default 100, at most 1000) of them.
func (db *DB) PullSweepDue(ctx context.Context, statuses []string, before time.Time, limit int) ([]Plan, error) {
	if len(statuses) == 0 {
		return nil, nil
	}
	if limit <= 0 {
		limit = 100
	}
	query := `SELECT ` + planColumns + ` FROM plans
		WHERE status IN (?` + strings.Repeat(`, ?`, len(statuses)-1) + `) AND pr_number <> 0
		AND (pull_swept_at IS NULL OR pull_swept_at <= ?)
		ORDER BY COALESCE(pull_swept_at, 0), code LIMIT ?`
	args := make([]any, 0, len(statuses)+2)
	for _, s := range statuses {
		args = append(args, s)
	}
	args = append(args, toMillis(before), min(limit, 1000))
	var rows []planRow
	if err := db.SelectContext(ctx, &rows, db.Rebind(query), args...); err != nil {
		return nil, fmt.Errorf("list plans due a pull request read: %w", err)
	}
	return db.plansOf(rows)
}

// ClaimPullSweep records that the periodic check reads the pull request of plan code
// at now, and reports whether this caller is the one to: the plan is still in status
// and nobody read it since before. One statement decides, so of the replicas sweeping
// at once exactly one gets each plan, and the read counts across restarts. The plan's
// version is left alone: recording a read changes nothing a writer of the plan must
// see.
func (db *DB) ClaimPullSweep(ctx context.Context, code, status string, now, before time.Time) (bool, error) {
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE plans SET pull_swept_at = ?
		WHERE code = ? AND status = ? AND (pull_swept_at IS NULL OR pull_swept_at <= ?)`),
		toMillis(now), code, status, toMillis(before))
	if err != nil {
		return false, fmt.Errorf("claim the pull request read of plan %s: %w", code, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("claim the pull request read of plan %s: %w", code, err)
	}
	return n == 1, nil
}
