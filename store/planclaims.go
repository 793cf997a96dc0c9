package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// PlanClaim is one worker's exclusive hold on a plan, as ClaimPlan returned it. Every
// claim of a plan gets the next epoch, so a worker whose claim ran out and was taken
// over is told apart from the new holder even when both use the same owner name:
// renewals and fenced updates (UpdateClaimedPlan) succeed only for the current epoch,
// and only before the claim expires.
type PlanClaim struct {
	Code  string
	Owner string
	Epoch int64
	// ExpiresAt is when the claim ends unless renewed, by the clock of the worker
	// that took or last renewed it.
	ExpiresAt time.Time
}

func (c PlanClaim) String() string {
	return fmt.Sprintf("claim %d of plan %s by %s", c.Epoch, c.Code, c.Owner)
}

// planClaimRow is the part of a plan row that says who may act on it.
type planClaimRow struct {
	Status         string        `db:"status"`
	Version        int64         `db:"version"`
	ClaimedBy      string        `db:"claimed_by"`
	ClaimEpoch     int64         `db:"claim_epoch"`
	ClaimExpiresAt sql.NullInt64 `db:"claim_expires_at"`
}

// heldIn reports, as ErrClaimLost with what holds the plan now, when c no longer
// holds the plan whose claim columns are cur.
func (c PlanClaim) heldIn(cur planClaimRow, now time.Time) error {
	switch {
	case cur.ClaimedBy != c.Owner || cur.ClaimEpoch != c.Epoch:
		holder := cur.ClaimedBy
		if holder == "" {
			holder = "nobody"
		}
		return fmt.Errorf("%s: the plan is held by %s at epoch %d: %w", c, holder, cur.ClaimEpoch, ErrClaimLost)
	case !cur.ClaimExpiresAt.Valid || cur.ClaimExpiresAt.Int64 < toMillis(now):
		return fmt.Errorf("%s: the claim ran out at %s: %w", c, nullMillis(cur.ClaimExpiresAt).Format(time.RFC3339Nano), ErrClaimLost)
	}
	return nil
}

// ClaimPlan gives owner exclusive work on a plan until the claim expires, so that two
// workers (or two replicas) never run the same plan's steps at once. It reports
// whether the claim was taken: a plan that nobody holds, or whose claim expired, may
// be claimed; a live claim is never granted again, not even to its own owner (it is
// extended with RenewPlanClaim), so one epoch has exactly one holder.
func (db *DB) ClaimPlan(ctx context.Context, code, owner string, ttl time.Duration) (PlanClaim, bool, error) {
	if owner == "" {
		return PlanClaim{}, false, fmt.Errorf("claim plan %s: an owner is required", code)
	}
	now := time.Now()
	expires := now.Add(ttl)
	var epoch int64
	err := db.QueryRowxContext(ctx, db.Rebind(`UPDATE plans SET claimed_by = ?, claim_expires_at = ?, claim_epoch = claim_epoch + 1
		WHERE code = ? AND (claimed_by = '' OR claim_expires_at IS NULL OR claim_expires_at < ?)
		RETURNING claim_epoch`),
		owner, toMillis(expires), code, toMillis(now)).Scan(&epoch)
	if errors.Is(err, sql.ErrNoRows) {
		return PlanClaim{}, false, nil
	}
	if err != nil {
		return PlanClaim{}, false, fmt.Errorf("claim plan %s: %w", code, err)
	}
	return PlanClaim{Code: code, Owner: owner, Epoch: epoch, ExpiresAt: fromMillis(toMillis(expires))}, true, nil
}

// RenewPlanClaim extends a live claim to ttl from now and returns it with its new
// expiry. ErrClaimLost when the claim ran out, was released or was taken over: the
// worker must stop working on the plan, since another may already be running it.
func (db *DB) RenewPlanClaim(ctx context.Context, c PlanClaim, ttl time.Duration) (PlanClaim, error) {
	now := time.Now()
	expires := now.Add(ttl)
	res, err := db.ExecContext(ctx, db.Rebind(`UPDATE plans SET claim_expires_at = ?
		WHERE code = ? AND claimed_by = ? AND claim_epoch = ? AND claim_expires_at >= ?`),
		toMillis(expires), c.Code, c.Owner, c.Epoch, toMillis(now))
	if err != nil {
		return c, fmt.Errorf("renew %s: %w", c, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return c, fmt.Errorf("renew %s: %w", c, err)
	}
	if n == 1 {
		c.ExpiresAt = fromMillis(toMillis(expires))
		return c, nil
	}
	var cur planClaimRow
	err = db.GetContext(ctx, &cur, db.Rebind(`SELECT status, version, claimed_by, claim_epoch, claim_expires_at
		FROM plans WHERE code = ?`), c.Code)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("renew %s: %w", c, ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("renew %s: %w", c, err)
	}
	if err := c.heldIn(cur, now); err != nil {
		return c, err
	}
	// Held at the read but not at the update: it expired in between.
	return c, fmt.Errorf("%s: the claim ran out: %w", c, ErrClaimLost)
}

// ReleasePlanClaim ends a claim, if it still holds the plan; a claim already lost
// is left to its new holder.
func (db *DB) ReleasePlanClaim(ctx context.Context, c PlanClaim) error {
	if _, err := db.ExecContext(ctx, db.Rebind(`UPDATE plans SET claimed_by = '', claim_expires_at = NULL
		WHERE code = ? AND claimed_by = ? AND claim_epoch = ?`), c.Code, c.Owner, c.Epoch); err != nil {
		return fmt.Errorf("release %s: %w", c, err)
	}
	return nil
}
