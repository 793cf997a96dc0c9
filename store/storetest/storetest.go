// Package storetest gives tests real databases: every test gets a fresh, migrated
// database on SQLite (a temporary file) and on PostgreSQL (a uniquely named database
// created on the server named by KUKIE_TEST_POSTGRES_URL and dropped afterwards).
//
// Without KUKIE_TEST_POSTGRES_URL the PostgreSQL case is skipped with a loud message,
// except when CI=true, where it fails: a store test that ran on one database only must
// not pass as if it ran on both. `make test` starts a throwaway PostgreSQL and sets
// the variable.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/kukie/kukie-gitops/store"
)

// PostgresURLEnv names the variable holding an admin URL of a PostgreSQL server that
// tests may create and drop databases on.
const PostgresURLEnv = "KUKIE_TEST_POSTGRES_URL"

// ForEach runs fn once per database, as subtests "sqlite" and "postgres", each with
// a fresh database migrated to the latest version.
func ForEach(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	forEach(t, true, fn)
}

// ForEachEmpty is ForEach with databases that have not been migrated, for tests of
// the migrations themselves.
func ForEachEmpty(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	forEach(t, false, fn)
}

func forEach(t *testing.T, migrate bool, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	t.Run(string(store.SQLite), func(t *testing.T) {
		fn(t, open(t, SQLiteURL(t), migrate))
	})
	t.Run(string(store.Postgres), func(t *testing.T) {
		fn(t, open(t, PostgresURL(t), migrate))
	})
}

// SQLite returns a fresh migrated SQLite database that lives until the test ends.
func SQLite(t testing.TB) *store.DB { return open(t, SQLiteURL(t), true) }

// Postgres returns a fresh migrated PostgreSQL database (or skips/fails as described
// in the package documentation).
func Postgres(t testing.TB) *store.DB { return open(t, PostgresURL(t), true) }

// SQLiteURL returns the URL of a new SQLite file in the test's temporary directory.
func SQLiteURL(t testing.TB) string {
	t.Helper()
	return "sqlite:" + filepath.Join(t.TempDir(), "kukie-test.db")
}

var warnOnce sync.Once

// PostgresURL creates an empty database for this test and returns its URL; the
// database is dropped when the test ends.
func PostgresURL(t testing.TB) string {
	t.Helper()
	admin := os.Getenv(PostgresURLEnv)
	if admin == "" {
		msg := "PostgreSQL store tests SKIPPED: " + PostgresURLEnv + " is not set. " +
			"Run `make test`, which starts a throwaway PostgreSQL, to test both databases."
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " CI=true: refusing to pass with PostgreSQL untested.")
		}
		warnOnce.Do(func() { fmt.Fprintln(os.Stderr, "\n*** "+msg+" ***\n") })
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adminDB, err := store.Open(ctx, admin)
	if err != nil {
		t.Fatalf("connect to test PostgreSQL from %s: %v", PostgresURLEnv, err)
	}
	defer adminDB.Close()

	name := "kukie_test_" + randomSuffix(t)
	if _, err := adminDB.ExecContext(ctx, "CREATE DATABASE "+pq.QuoteIdentifier(name)); err != nil {
		t.Fatalf("create test database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adminDB, err := store.Open(ctx, admin)
		if err != nil {
			t.Errorf("connect to drop test database %s: %v", name, err)
			return
		}
		defer adminDB.Close()
		// FORCE ends connections a test leaked, so the drop cannot hang or fail.
		if _, err := adminDB.ExecContext(ctx, "DROP DATABASE IF EXISTS "+pq.QuoteIdentifier(name)+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("parse %s: %v", PostgresURLEnv, err)
	}
	u.Path = "/" + name
	return u.String()
}

func open(t testing.TB, rawURL string, migrate bool) *store.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := store.Open(ctx, rawURL)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	// Registered after PostgresURL's drop, so it runs before it (cleanups are LIFO).
	t.Cleanup(func() { _ = db.Close() })
	if migrate {
		if _, err := db.Migrate(ctx); err != nil {
			t.Fatalf("migrate test database: %v", err)
		}
	}
	return db
}

func randomSuffix(t testing.TB) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("random database name: %v", err)
	}
	return strings.ToLower(hex.EncodeToString(b))
}

// EmptyURL returns the URL of a new, empty database of the given dialect.
func EmptyURL(t testing.TB, d store.Dialect) string {
	t.Helper()
	if d == store.Postgres {
		return PostgresURL(t)
	}
	return SQLiteURL(t)
}

// OpenURL opens rawURL for the rest of the test without migrating it.
func OpenURL(t testing.TB, rawURL string) *store.DB { return open(t, rawURL, false) }

// ExpirePlanClaim makes the claim on a plan run out now, as it does when its holder
// stalls for longer than the claim's lifetime (a paused process, a worker cut off
// from the database): another worker may then take the plan over.
func ExpirePlanClaim(t testing.TB, db *store.DB, code string) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), db.Rebind(`UPDATE plans SET claim_expires_at = ? WHERE code = ?`),
		time.Now().Add(-time.Second).UnixMilli(), code); err != nil {
		t.Fatalf("expire claim on plan %s: %v", code, err)
	}
}

// ExpireWebhookLease makes the lease on a claimed webhook delivery run out now, as it
// does when its worker dies or stalls past it: another worker may then claim it.
func ExpireWebhookLease(t testing.TB, db *store.DB, id string) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), db.Rebind(`UPDATE webhook_deliveries SET lease_expires_at = ? WHERE delivery_id = ? AND state = ?`),
		time.Now().Add(-time.Second).UnixMilli(), id, store.DeliveryProcessing); err != nil {
		t.Fatalf("expire lease on webhook delivery %s: %v", id, err)
	}
}

// TwoPools returns two connection pools on one new, migrated database of the given
// dialect, as two processes of the service sharing it have.
func TwoPools(t testing.TB, d store.Dialect) (*store.DB, *store.DB) {
	t.Helper()
	rawURL := EmptyURL(t, d)
	db := OpenURL(t, rawURL)
	if _, err := db.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db, OpenURL(t, rawURL)
}
