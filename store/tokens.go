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

// Scope is one thing an API token may do. Scopes are independent: a token has
// exactly the ones it was made with, and none implies another.
type Scope string

// The scopes. Which routes each allows is declared where the routes are mounted.
const (
	// ScopeRead reads: Argo CD apps, path decisions, changes, the repository view.
	ScopeRead Scope = "read"
	// ScopeChange requests, cancels, retries and rolls back changes.
	ScopeChange Scope = "change"
	// ScopeAdmin manages the team's clusters, repository connections, installations
	// and repository tokens.
	ScopeAdmin Scope = "admin"
)

// AllScopes are every scope in their canonical order; a token made without naming
// scopes has them all, as tokens made before scopes existed do.
var AllScopes = []Scope{ScopeRead, ScopeChange, ScopeAdmin}

// Scopes is a token's set of scopes.
type Scopes []Scope

// Has reports whether want is among s.
func (s Scopes) Has(want Scope) bool {
	for _, sc := range s {
		if sc == want {
			return true
		}
	}
	return false
}

// String is the stored and displayed form: canonical order, comma-separated.
func (s Scopes) String() string {
	parts := make([]string, 0, len(s))
	for _, sc := range AllScopes {
		if s.Has(sc) {
			parts = append(parts, string(sc))
		}
	}
	return strings.Join(parts, ",")
}

// ParseScopes reads a comma-separated list such as "read,change". Unknown names and
// an empty list are errors, so a typo never makes a token with fewer (or more)
// rights than meant.
func ParseScopes(raw string) (Scopes, error) {
	var names []Scope
	for _, part := range strings.Split(raw, ",") {
		if name := strings.TrimSpace(part); name != "" {
			names = append(names, Scope(name))
		}
	}
	return checkScopes(names)
}

// checkScopes refuses unknown and missing scopes and returns the set in canonical
// order without repeats.
func checkScopes(names []Scope) (Scopes, error) {
	for _, name := range names {
		if !Scopes(AllScopes).Has(name) {
			return nil, fmt.Errorf("unknown scope %q (want read, change or admin)", name)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no scope given (want one or more of read, change, admin)")
	}
	return canonical(names), nil
}

func canonical(s Scopes) Scopes {
	out := make(Scopes, 0, len(s))
	for _, sc := range AllScopes {
		if s.Has(sc) {
			out = append(out, sc)
		}
	}
	return out
}

// APIToken describes a stored token. The clear text is never stored.
type APIToken struct {
	ID        string
	TeamID    string
	Name      string
	Scopes    Scopes
	CreatedAt time.Time
	RevokedAt time.Time // zero while the token is valid
}

// APITokenAuth is what a valid token proves: the team it acts for and what it may do.
type APITokenAuth struct {
	Team    Team
	TokenID string
	Scopes  Scopes
}

type apiTokenRow struct {
	ID        string        `db:"id"`
	TeamID    string        `db:"team_id"`
	Name      string        `db:"name"`
	Scopes    string        `db:"scopes"`
	TokenHash string        `db:"token_hash"`
	CreatedAt int64         `db:"created_at"`
	RevokedAt sql.NullInt64 `db:"revoked_at"`
}

func (r apiTokenRow) token() APIToken {
	return APIToken{ID: r.ID, TeamID: r.TeamID, Name: r.Name, Scopes: storedScopes(r.Scopes), CreatedAt: fromMillis(r.CreatedAt), RevokedAt: nullMillis(r.RevokedAt)}
}

// storedScopes reads the scopes column. Only this package writes it, through
// Scopes.String; a name it does not know (written by a newer version) is dropped,
// which can only take rights away.
func storedScopes(raw string) Scopes {
	var names Scopes
	for _, part := range strings.Split(raw, ",") {
		names = append(names, Scope(part))
	}
	return canonical(names)
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

// CreateAPIToken makes a new token for the team with the given scopes (all of them
// when none are given) and returns its clear text, which exists only in this return
// value: show it once, then drop it.
func (db *DB) CreateAPIToken(ctx context.Context, teamID, name string, scopes ...Scope) (APIToken, secret.Secret, error) {
	if len(scopes) == 0 {
		scopes = AllScopes
	}
	set, err := checkScopes(scopes)
	if err != nil {
		return APIToken{}, "", fmt.Errorf("create api token for team %s: %w", teamID, err)
	}
	token, err := newAPIToken()
	if err != nil {
		return APIToken{}, "", err
	}
	row := apiTokenRow{ID: NewID(), TeamID: teamID, Name: name, Scopes: set.String(), TokenHash: HashAPIToken(token), CreatedAt: toMillis(time.Now())}
	if _, err := db.NamedExecContext(ctx, `INSERT INTO api_tokens (id, team_id, name, scopes, token_hash, created_at)
		VALUES (:id, :team_id, :name, :scopes, :token_hash, :created_at)`, row); err != nil {
		return APIToken{}, "", fmt.Errorf("create api token for team %s: %w", teamID, err)
	}
	return row.token(), token, nil
}

// AuthenticateAPIToken returns the team a valid (not revoked) token belongs to and
// the token's scopes, or ErrNotFound. Malformed tokens are ErrNotFound too, without
// a database round trip.
func (db *DB) AuthenticateAPIToken(ctx context.Context, token secret.Secret) (APITokenAuth, error) {
	if !strings.HasPrefix(token.Reveal(), APITokenPrefix) {
		return APITokenAuth{}, fmt.Errorf("api token: %w", ErrNotFound)
	}
	var row struct {
		teamRow
		TokenID string `db:"token_id"`
		Scopes  string `db:"scopes"`
	}
	err := db.GetContext(ctx, &row, db.Rebind(`SELECT t.id, t.name, t.created_at, k.id AS token_id, k.scopes
		FROM api_tokens k JOIN teams t ON t.id = k.team_id
		WHERE k.token_hash = ? AND k.revoked_at IS NULL`), HashAPIToken(token))
	if errors.Is(err, sql.ErrNoRows) {
		return APITokenAuth{}, fmt.Errorf("api token: %w", ErrNotFound)
	}
	if err != nil {
		return APITokenAuth{}, fmt.Errorf("look up api token: %w", err)
	}
	return APITokenAuth{Team: row.team(), TokenID: row.TokenID, Scopes: storedScopes(row.Scopes)}, nil
}

// TeamForAPIToken is AuthenticateAPIToken for callers that need only the team.
func (db *DB) TeamForAPIToken(ctx context.Context, token secret.Secret) (Team, error) {
	auth, err := db.AuthenticateAPIToken(ctx, token)
	return auth.Team, err
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
		err := tx.GetContext(ctx, &row, db.Rebind(`SELECT id, team_id, name, scopes, token_hash, created_at, revoked_at FROM api_tokens WHERE id = ?`), id)
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
	if err := db.SelectContext(ctx, &rows, db.Rebind(`SELECT id, team_id, name, scopes, token_hash, created_at, revoked_at
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
