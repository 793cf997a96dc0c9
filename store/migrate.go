package store

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
)

//go:embed migrations/*.sql
var embeddedMigrations embed.FS

// migrationLockKey is the PostgreSQL advisory lock that serialises migrators, so
// replicas starting together apply each migration once. Any fixed number works; this
// one spells "kukie" in ASCII.
const migrationLockKey = 0x6b756b6965

// Migration is one versioned schema change.
type Migration struct {
	Version  int
	Name     string
	SQL      string
	Checksum string
}

// MigrationStatus is a migration with whether, and when, it was applied.
type MigrationStatus struct {
	Migration
	Applied   bool
	AppliedAt time.Time
}

var migrationFile = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// Migrations returns the migrations embedded in the binary, in order.
func Migrations() ([]Migration, error) {
	return loadMigrations(embeddedMigrations, "migrations")
}

func loadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil || e.IsDir() {
			return nil, fmt.Errorf("migration file %s: name must look like 0001_name.sql", e.Name())
		}
		version, _ := strconv.Atoi(m[1])
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, e.Name(), version)
		}
		seen[version] = e.Name()
		body, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(body)
		out = append(out, Migration{Version: version, Name: m[2], SQL: string(body), Checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration versions must be 1, 2, 3, … without gaps; found %04d at position %d", m.Version, i+1)
		}
	}
	return out, nil
}

// Migrate applies every embedded migration not yet applied and returns the versions
// it applied.
func (db *DB) Migrate(ctx context.Context) ([]int, error) {
	return db.MigrateTo(ctx, -1)
}

// MigrateTo applies pending embedded migrations up to and including version target
// (-1 for all) and returns the versions it applied.
func (db *DB) MigrateTo(ctx context.Context, target int) ([]int, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	return db.migrate(ctx, all, target)
}

func (db *DB) migrate(ctx context.Context, all []Migration, target int) ([]int, error) {
	if target > len(all) {
		return nil, fmt.Errorf("migrate to version %d: this binary knows versions up to %d", target, len(all))
	}
	if target < 0 {
		target = len(all)
	}
	// One connection for the whole run: PostgreSQL's advisory lock belongs to a session.
	conn, err := db.Connx(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: get connection: %w", err)
	}
	defer conn.Close()
	if db.dialect == Postgres {
		if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
			return nil, fmt.Errorf("migrate: take lock: %w", err)
		}
		defer func() {
			// Use a fresh context: the caller's may be cancelled, and a session lock
			// left behind would block the next migrator until this connection closes.
			unlockCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = conn.ExecContext(unlockCtx, "SELECT pg_advisory_unlock($1)", migrationLockKey)
		}()
	}
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT NOT NULL,
		checksum   TEXT NOT NULL,
		applied_at BIGINT NOT NULL
	)`); err != nil {
		return nil, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	applied, err := appliedMigrations(ctx, conn, db)
	if err != nil {
		return nil, err
	}
	if err := checkApplied(all, applied); err != nil {
		return nil, err
	}
	var done []int
	for _, m := range all[:target] {
		if _, ok := applied[m.Version]; ok {
			continue
		}
		if err := applyMigration(ctx, conn, db, m); err != nil {
			return done, err
		}
		done = append(done, m.Version)
	}
	return done, nil
}

type appliedRow struct {
	Version   int    `db:"version"`
	Name      string `db:"name"`
	Checksum  string `db:"checksum"`
	AppliedAt int64  `db:"applied_at"`
}

func appliedMigrations(ctx context.Context, q sqlx.QueryerContext, db *DB) (map[int]appliedRow, error) {
	var rows []appliedRow
	if err := sqlx.SelectContext(ctx, q, &rows, "SELECT version, name, checksum, applied_at FROM schema_migrations"); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	out := make(map[int]appliedRow, len(rows))
	for _, r := range rows {
		out[r.Version] = r
	}
	return out, nil
}

// checkApplied refuses a database that has diverged from this binary: a migration
// edited after it was applied, or migrations from a newer binary.
func checkApplied(all []Migration, applied map[int]appliedRow) error {
	var problems []error
	for v, row := range applied {
		if v > len(all) {
			problems = append(problems, fmt.Errorf("database has migration %04d_%s, which this binary does not know (is it older than the last one that ran?)", v, row.Name))
			continue
		}
		if m := all[v-1]; m.Checksum != row.Checksum {
			problems = append(problems, fmt.Errorf("migration %04d_%s was changed after it was applied (checksum %s, database has %s); add a new migration instead", v, m.Name, m.Checksum[:12], shortSum(row.Checksum)))
		}
	}
	return errors.Join(problems...)
}

func shortSum(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func applyMigration(ctx context.Context, conn *sqlx.Conn, db *DB, m Migration) error {
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %04d_%s: begin: %w", m.Version, m.Name, err)
	}
	defer func() { _ = tx.Rollback() }()
	// Another SQLite process may have applied it between our read and our write lock.
	var n int
	if err := tx.GetContext(ctx, &n, db.Rebind("SELECT COUNT(*) FROM schema_migrations WHERE version = ?"), m.Version); err != nil {
		return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, db.Rebind("INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)"),
		m.Version, m.Name, m.Checksum, toMillis(time.Now())); err != nil {
		return fmt.Errorf("migration %04d_%s: record: %w", m.Version, m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %04d_%s: commit: %w", m.Version, m.Name, err)
	}
	return nil
}

// MigrationStatuses lists every embedded migration and whether it was applied.
func (db *DB) MigrationStatuses(ctx context.Context) ([]MigrationStatus, error) {
	all, err := Migrations()
	if err != nil {
		return nil, err
	}
	applied := map[int]appliedRow{}
	exists, err := db.tableExists(ctx, "schema_migrations")
	if err != nil {
		return nil, err
	}
	if exists {
		if applied, err = appliedMigrations(ctx, db, db); err != nil {
			return nil, err
		}
		if err := checkApplied(all, applied); err != nil {
			return nil, err
		}
	}
	out := make([]MigrationStatus, 0, len(all))
	for _, m := range all {
		row, ok := applied[m.Version]
		s := MigrationStatus{Migration: m, Applied: ok}
		if ok {
			s.AppliedAt = fromMillis(row.AppliedAt)
		}
		out = append(out, s)
	}
	return out, nil
}

// CheckSchema returns an error unless every embedded migration has been applied and
// none has diverged. Readiness uses it: an instance must not serve an old schema.
func (db *DB) CheckSchema(ctx context.Context) error {
	statuses, err := db.MigrationStatuses(ctx)
	if err != nil {
		return err
	}
	var pending []string
	for _, s := range statuses {
		if !s.Applied {
			pending = append(pending, fmt.Sprintf("%04d_%s", s.Version, s.Name))
		}
	}
	if len(pending) > 0 {
		return fmt.Errorf("migrations not applied: %v", pending)
	}
	return nil
}

func (db *DB) tableExists(ctx context.Context, table string) (bool, error) {
	query := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
	if db.dialect == Postgres {
		query = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
	}
	var n int
	if err := db.GetContext(ctx, &n, db.Rebind(query), table); err != nil {
		return false, fmt.Errorf("look up table %s: %w", table, err)
	}
	return n > 0, nil
}
