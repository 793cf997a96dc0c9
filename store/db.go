package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Dialect names the database behind a DB.
type Dialect string

const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// DefaultURL is the database used when none is configured: a SQLite file in the
// working directory, good for a local run and never for production.
const DefaultURL = "sqlite:./kukie.db"

// sqliteBusyTimeout is how long a SQLite writer waits for a writer in another process
// (writers of this process queue for its single connection, see Open) before it fails
// with "database is locked".
const sqliteBusyTimeout = 5 * time.Second

// Errors callers can test with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
	// ErrLeaseLost: a worker tried to record the outcome of a webhook delivery it no
	// longer holds: its lease ran out and another worker claimed the delivery since,
	// or the delivery was finished already.
	ErrLeaseLost = errors.New("webhook delivery lease lost")
	// ErrClaimLost: a worker tried to renew or act under a plan claim it no longer
	// holds: the claim ran out (and may have been taken over) or was released.
	ErrClaimLost = errors.New("plan claim lost")
)

// DB is an open database with its dialect. It embeds *sqlx.DB, so Rebind, GetContext,
// SelectContext and the rest are available; queries are written with ? placeholders.
type DB struct {
	*sqlx.DB
	dialect Dialect
	// payloads, when set, transforms plan payloads on their way in and out (see
	// SealPlanPayloads).
	payloads PayloadCodec
	// health is a pool of one connection that only the readiness checks use
	// (health.go), so a pool busy with work is not taken for a database that does
	// not answer.
	health *sqlx.DB
	// waits is the pool's count of waits for a connection when PoolBusy last
	// looked.
	waits *atomic.Int64
}

// Dialect reports which database this is.
func (db *DB) Dialect() Dialect { return db.dialect }

// Open connects to the database named by rawURL ("sqlite:PATH" or
// "postgres://..."/"postgresql://...") and checks that it answers. It does not
// migrate; call Migrate for that.
func Open(ctx context.Context, rawURL string) (*DB, error) {
	dialect, driver, dsn, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	sqlDB, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s database: %w", dialect, err)
	}
	bind := sqlx.DOLLAR
	if dialect == SQLite {
		bind = sqlx.QUESTION
		// SQLite allows one writer at a time. With several connections, a writer that
		// finds the lock taken sleeps in SQLite's busy handler (1, 2, 5 … 100 ms
		// steps) and may lose the lock again to writers that did not sleep: the
		// slowest of concurrent writes took 130-250 ms (BenchmarkConcurrentWriters),
		// and a writer starved past busy_timeout fails with SQLITE_BUSY. One
		// connection makes writers queue in Go's pool instead, in order, and the
		// slowest write took 13-40 ms. Every transaction in this package uses only
		// its tx, so nothing holds the connection while waiting for another one.
		// busy_timeout still covers other processes (an admin command beside serve).
		sqlDB.SetMaxOpenConns(1)
	} else {
		sqlDB.SetMaxOpenConns(20)
		sqlDB.SetMaxIdleConns(20)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	}
	healthDB, err := sql.Open(driver, dsn)
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("open %s database for health checks: %w", dialect, err)
	}
	healthDB.SetMaxOpenConns(1)
	healthDB.SetMaxIdleConns(1)
	db := &DB{DB: sqlx.NewDb(sqlDB, bindDriverName(bind)), dialect: dialect,
		health: sqlx.NewDb(healthDB, bindDriverName(bind)), waits: &atomic.Int64{}}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pingCtx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to %s database %s: %w", dialect, describeURL(dialect, rawURL), err)
	}
	return db, nil
}

// describeURL names the database a URL points at for an error saying it could not
// be reached: a SQLite file (and a directory of it that does not exist, which
// SQLite reports only as "unable to open database file"), or a PostgreSQL
// database, server and user, never the password.
func describeURL(dialect Dialect, rawURL string) string {
	if dialect == SQLite {
		path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//")
		if _, err := os.Stat(filepath.Dir(path)); errors.Is(err, fs.ErrNotExist) {
			return fmt.Sprintf("%s (its directory %s does not exist)", path, filepath.Dir(path))
		}
		return path
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(malformed url)"
	}
	host := u.Host
	if host == "" {
		host = "the default host"
	}
	user := "the default user"
	if name := u.User.Username(); name != "" {
		user = fmt.Sprintf("user %q", name)
	}
	return fmt.Sprintf("%q on %s as %s", strings.TrimPrefix(u.Path, "/"), host, user)
}

// bindDriverName returns a driver name sqlx maps to the wanted placeholder style.
func bindDriverName(bind int) string {
	if bind == sqlx.QUESTION {
		return "sqlite3"
	}
	return "postgres"
}

// DialectOf reports the dialect a database URL names, without connecting.
func DialectOf(rawURL string) (Dialect, error) {
	d, _, _, err := parseURL(rawURL)
	return d, err
}

// parseURL turns a configured database URL into a dialect, a database/sql driver
// name and that driver's DSN. Error messages never repeat the URL, which may carry a
// password.
func parseURL(rawURL string) (Dialect, string, string, error) {
	switch {
	case strings.HasPrefix(rawURL, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(rawURL, "sqlite:"), "//")
		if path == "" {
			return "", "", "", errors.New("database url: sqlite: needs a file path, as in sqlite:./kukie.db")
		}
		if strings.ContainsAny(path, "?#") {
			return "", "", "", errors.New("database url: the sqlite file path must not contain '?' or '#'")
		}
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		// Take the write lock when a transaction begins, not at its first write, so
		// two read-then-write transactions cannot deadlock into SQLITE_BUSY.
		q.Set("_txlock", "immediate")
		return SQLite, "sqlite", path + "?" + q.Encode(), nil
	case strings.HasPrefix(rawURL, "postgres://"), strings.HasPrefix(rawURL, "postgresql://"):
		if _, err := url.Parse(rawURL); err != nil {
			return "", "", "", errors.New("database url: malformed postgres url")
		}
		return Postgres, "postgres", rawURL, nil
	case rawURL == "":
		return "", "", "", errors.New("database url is empty")
	default:
		return "", "", "", errors.New(`database url: unsupported scheme, want "sqlite:PATH" or "postgres://..."`)
	}
}

// InTx runs fn in a transaction and commits it when fn returns nil; otherwise it
// rolls back and returns fn's error.
func (db *DB) InTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}

// IsUniqueViolation reports whether err is a unique or primary key violation from
// either driver.
func IsUniqueViolation(err error) bool {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return pqErr.Code == "23505"
	}
	var liteErr *sqlite.Error
	if errors.As(err, &liteErr) {
		return liteErr.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE ||
			liteErr.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// NewID returns a new primary key: a UUIDv7, so ids sort by creation time.
func NewID() string {
	id, err := uuid.NewV7()
	if err != nil {
		// NewV7 fails only when the system's random source does; fall back to v4
		// from crypto/rand rather than hand out a predictable id.
		return uuid.Must(uuid.NewRandomFromReader(rand.Reader)).String()
	}
	return id.String()
}

// toMillis converts a time to the stored representation (see package doc).
// getRow reads the one row query selects and converts it with conv; no row is
// ErrNotFound. Errors name what was read.
func getRow[R, T any](ctx context.Context, db *DB, what string, conv func(R) T, query string, args ...any) (T, error) {
	var row R
	err := db.GetContext(ctx, &row, db.Rebind(query), args...)
	if errors.Is(err, sql.ErrNoRows) {
		var none T
		return none, fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	if err != nil {
		var none T
		return none, fmt.Errorf("read %s: %w", what, err)
	}
	return conv(row), nil
}

// listRows reads the rows query selects and converts each with conv. Errors name
// what was listed.
func listRows[R, T any](ctx context.Context, db *DB, what string, conv func(R) T, query string, args ...any) ([]T, error) {
	var rows []R
	if err := db.SelectContext(ctx, &rows, db.Rebind(query), args...); err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = conv(r)
	}
	return out, nil
}

func toMillis(t time.Time) int64 { return t.UnixMilli() }

// fromMillis converts a stored time back, in UTC.
func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// nullMillis converts an optional stored time; NULL becomes the zero time.
func nullMillis(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMillis(v.Int64)
}

// optionalMillis stores the zero time as NULL.
func optionalMillis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: toMillis(t), Valid: true}
}
