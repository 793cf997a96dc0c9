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
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/kukie/kukie-gitops/secret"
)

// APITokenPrefix starts every team API token, so a leaked token is recognisable by
// secret scanners and by people.
const APITokenPrefix = "kuk_"

// apiTokenBytes is the token's entropy. 32 random bytes cannot be guessed, which is
// why a plain SHA-256 (not a slow password hash such as bcrypt) is the right way to
// store them: the hash must be computable on every request and usable as an index
// key, and a slow hash only helps against guessing low-entropy passwords.
const apiTokenBytes = 32

// APIToken describes a stored token. The clear text is never stored.
type APIToken struct {
	ID        string
	TeamID    string
	Name      string
	CreatedAt time.Time
	RevokedAt time.Time // zero while the token is valid
}

type apiTokenRow struct {
	ID        string        `db:"id"`
	TeamID    string        `db:"team_id"`
	Name      string        `db:"name"`
	TokenHash string        `db:"token_hash"`
	CreatedAt int64         `db:"created_at"`
	RevokedAt sql.NullInt64 `db:"revoked_at"`
}

func (r apiTokenRow) token() APIToken {
	return APIToken{ID: r.ID, TeamID: r.TeamID, Name: r.Name, CreatedAt: fromMillis(r.CreatedAt), RevokedAt: nullMillis(r.RevokedAt)}
}

// HashAPIToken returns the stored form of a token.
func HashAPIToken(token secret.Secret) string {
	sum := sha256.Sum256([]byte(token.Reveal()))
	return hex.EncodeToString(sum[:])
}

func newAPIToken() (secret.Secret, error) {
	b := make([]byte, apiTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return secret.New(APITokenPrefix + base64.RawURLEncoding.EncodeToString(b)), nil
}

// CreateAPIToken makes a new token for the team and returns its clear text, which
// exists only in this return value: show it once, then drop it.
func (db *DB) CreateAPIToken(ctx context.Context, teamID, name string) (APIToken, secret.Secret, error) {
	token, err := newAPIToken()
	if err != nil {
		return APIToken{}, "", err
	}
	row := apiTokenRow{ID: NewID(), TeamID: teamID, Name: name, TokenHash: HashAPIToken(token), CreatedAt: toMillis(time.Now())}
	if _, err := db.NamedExecContext(ctx, `INSERT INTO api_tokens (id, team_id, name, token_hash, created_at)
		VALUES (:id, :team_id, :name, :token_hash, :created_at)`, row); err != nil {
		return APIToken{}, "", fmt.Errorf("create api token for team %s: %w", teamID, err)
	}
	return row.token(), token, nil
}

// TeamForAPIToken returns the team a valid (not revoked) token belongs to, or
// ErrNotFound. Malformed tokens are ErrNotFound too, without a database round trip.
func (db *DB) TeamForAPIToken(ctx context.Context, token secret.Secret) (Team, error) {
	if !strings.HasPrefix(token.Reveal(), APITokenPrefix) {
		return Team{}, fmt.Errorf("api token: %w", ErrNotFound)
	}
	var row teamRow
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT t.id, t.name, t.created_at
		FROM api_tokens k JOIN teams t ON t.id = k.team_id
		WHERE k.token_hash = ? AND k.revoked_at IS NULL`), HashAPIToken(token))
	if errors.Is(err, sql.ErrNoRows) {
		return Team{}, fmt.Errorf("api token: %w", ErrNotFound)
	}
	if err != nil {
		return Team{}, fmt.Errorf("look up api token: %w", err)
	}
	return row.team(), nil
}

// RevokeAPIToken makes a token unusable from now on. Revoking an unknown token is
// ErrNotFound; revoking twice keeps the first revocation time.
func (db *DB) RevokeAPIToken(ctx context.Context, id string) (APIToken, error) {
	var out APIToken
	err := db.InTx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, db.Rebind(`UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`),
			toMillis(time.Now()), id); err != nil {
			return fmt.Errorf("revoke api token %s: %w", id, err)
		}
		var row apiTokenRow
		err := tx.GetContext(ctx, &row, db.Rebind(`SELECT id, team_id, name, token_hash, created_at, revoked_at FROM api_tokens WHERE id = ?`), id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("api token %s: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("read api token %s: %w", id, err)
		}
		out = row.token()
		return nil
	})
	return out, err
}

// ListAPITokens returns the team's tokens, newest first, revoked ones included.
func (db *DB) ListAPITokens(ctx context.Context, teamID string) ([]APIToken, error) {
	var rows []apiTokenRow
	if err := db.SelectContext(ctx, &rows, db.Rebind(`SELECT id, team_id, name, token_hash, created_at, revoked_at
		FROM api_tokens WHERE team_id = ? ORDER BY created_at DESC, id DESC`), teamID); err != nil {
		return nil, fmt.Errorf("list api tokens of team %s: %w", teamID, err)
	}
	out := make([]APIToken, len(rows))
	for i, r := range rows {
		out[i] = r.token()
	}
	return out, nil
}

// CountActiveAPITokens counts tokens that can still authenticate, across all teams.
func (db *DB) CountActiveAPITokens(ctx context.Context) (int, error) {
	var n int
	if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM api_tokens WHERE revoked_at IS NULL`); err != nil {
		return 0, fmt.Errorf("count api tokens: %w", err)
	}
	return n, nil
}
