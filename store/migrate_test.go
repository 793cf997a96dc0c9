package store_test

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// schemaDump describes a database's schema (tables, columns, indexes, constraints)
// and which migrations it records, in a form two databases can be compared by.
func schemaDump(t *testing.T, db *store.DB) []string {
	t.Helper()
	ctx := context.Background()
	var queries []string
	if db.Dialect() == store.Postgres {
		queries = []string{
			`SELECT table_name || '.' || column_name || ' ' || data_type || ' null=' || is_nullable || ' default=' || COALESCE(column_default, '')
			   FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`,
			`SELECT tablename || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY tablename, indexname`,
			`SELECT conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
			   FROM pg_constraint WHERE connamespace = current_schema()::regnamespace ORDER BY 1`,
		}
	} else {
		queries = []string{
			`SELECT type || ' ' || name || ' ' || tbl_name || ' ' || COALESCE(sql, '')
			   FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name`,
		}
	}
	queries = append(queries, `SELECT CAST(version AS TEXT) || ' ' || name || ' ' || checksum FROM schema_migrations ORDER BY version`)
	var out []string
	for _, q := range queries {
		var rows []string
		if err := db.SelectContext(ctx, &rows, q); err != nil {
			t.Fatalf("dump schema: %v", err)
		}
		out = append(out, rows...)
	}
	return out
}

// testMigrations exercises what later migrations do: add tables, columns and indexes
// to tables earlier migrations made.
var testMigrations = fstest.MapFS{
	"m/0001_one.sql":   {Data: []byte("CREATE TABLE widgets (id TEXT NOT NULL PRIMARY KEY, name TEXT NOT NULL);\nCREATE INDEX widgets_name ON widgets (name);")},
	"m/0002_two.sql":   {Data: []byte("ALTER TABLE widgets ADD COLUMN size BIGINT NOT NULL DEFAULT 0;\nCREATE TABLE parts (id TEXT NOT NULL PRIMARY KEY, widget_id TEXT NOT NULL REFERENCES widgets (id));")},
	"m/0003_three.sql": {Data: []byte("CREATE UNIQUE INDEX parts_widget ON parts (widget_id);")},
}

func TestMigrateStepByStepEqualsAtOnce(t *testing.T) {
	embedded, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		latest  int
		migrate func(ctx context.Context, db *store.DB, target int) ([]int, error)
	}{
		"embedded migrations": {
			latest:  len(embedded),
			migrate: func(ctx context.Context, db *store.DB, target int) ([]int, error) { return db.MigrateTo(ctx, target) },
		},
		"three-step test set": {
			latest: 3,
			migrate: func(ctx context.Context, db *store.DB, target int) ([]int, error) {
				return db.MigrateFS(ctx, testMigrations, "m", target)
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			storetest.ForEachEmpty(t, func(t *testing.T, atOnce *store.DB) {
				ctx := context.Background()
				applied, err := tc.migrate(ctx, atOnce, -1)
				if err != nil {
					t.Fatalf("migrate at once: %v", err)
				}
				if len(applied) != tc.latest {
					t.Fatalf("applied %v at once, want %d migrations", applied, tc.latest)
				}

				stepURL := storetest.EmptyURL(t, atOnce.Dialect())
				for v := 1; v <= tc.latest; v++ {
					// A new connection per step, as separate deploys would have.
					step := storetest.OpenURL(t, stepURL)
					applied, err := tc.migrate(ctx, step, v)
					if err != nil {
						t.Fatalf("migrate to %d: %v", v, err)
					}
					if !reflect.DeepEqual(applied, []int{v}) {
						t.Fatalf("migrate to %d applied %v", v, applied)
					}
					_ = step.Close()
				}
				stepByStep := storetest.OpenURL(t, stepURL)

				want, got := schemaDump(t, atOnce), schemaDump(t, stepByStep)
				if len(want) == 0 {
					t.Fatal("schema dump is empty: the comparison would prove nothing")
				}
				if !reflect.DeepEqual(want, got) {
					t.Fatalf("schemas differ\nat once:\n%s\n\nstep by step:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
				}
			})
		})
	}
}

func TestMigrateIsIdempotentAndSchemaIsCurrent(t *testing.T) {
	storetest.ForEachEmpty(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if err := db.CheckSchema(ctx); err == nil {
			t.Fatal("CheckSchema on an empty database: want an error naming pending migrations")
		}
		first, err := db.Migrate(ctx)
		if err != nil || len(first) == 0 {
			t.Fatalf("first migrate: applied %v, err %v", first, err)
		}
		again, err := db.Migrate(ctx)
		if err != nil || len(again) != 0 {
			t.Fatalf("second migrate: applied %v, err %v; want nothing", again, err)
		}
		if err := db.CheckSchema(ctx); err != nil {
			t.Fatalf("CheckSchema after migrate: %v", err)
		}
		statuses, err := db.MigrationStatuses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range statuses {
			if !s.Applied || s.AppliedAt.IsZero() {
				t.Errorf("migration %04d_%s not recorded as applied: %+v", s.Version, s.Name, s)
			}
		}
	})
}

func TestMigrateRefusesDivergedDatabase(t *testing.T) {
	cases := map[string]struct {
		later   fstest.MapFS
		wantErr string
	}{
		"applied migration edited": {
			later: fstest.MapFS{
				"m/0001_one.sql": {Data: []byte("CREATE TABLE widgets (id TEXT NOT NULL PRIMARY KEY, colour TEXT);")},
			},
			wantErr: "was changed after it was applied",
		},
		"database newer than binary": {
			later:   fstest.MapFS{},
			wantErr: "does not know",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			storetest.ForEachEmpty(t, func(t *testing.T, db *store.DB) {
				ctx := context.Background()
				if _, err := db.MigrateFS(ctx, testMigrations, "m", 1); err != nil {
					t.Fatal(err)
				}
				later := tc.later
				if len(later) == 0 {
					// A binary that knows no migrations at all sees version 1 as unknown.
					later = fstest.MapFS{"m": {Mode: fs.ModeDir | 0o755}}
				}
				_, err := db.MigrateFS(ctx, later, "m", -1)
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
				}
			})
		})
	}
}

func TestFailedMigrationLeavesNoTrace(t *testing.T) {
	broken := fstest.MapFS{
		"m/0001_one.sql": testMigrations["m/0001_one.sql"],
		"m/0002_broken.sql": {Data: []byte("CREATE TABLE half (id TEXT NOT NULL PRIMARY KEY);\n" +
			"INSERT INTO no_such_table (x) VALUES (1);")},
	}
	storetest.ForEachEmpty(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		applied, err := db.MigrateFS(ctx, broken, "m", -1)
		if err == nil || !strings.Contains(err.Error(), "migration 0002_broken") {
			t.Fatalf("got %v, want the error of migration 0002_broken", err)
		}
		if !reflect.DeepEqual(applied, []int{1}) {
			t.Fatalf("applied %v, want [1]", applied)
		}
		var n int
		if err := db.GetContext(ctx, &n, "SELECT COUNT(*) FROM schema_migrations"); err != nil || n != 1 {
			t.Fatalf("schema_migrations rows = %d (%v), want 1", n, err)
		}
		// The table created before the failing statement must have been rolled back.
		if _, err := db.ExecContext(ctx, "SELECT COUNT(*) FROM half"); err == nil {
			t.Fatal("table half exists: the failed migration was not rolled back")
		}
	})
}

func TestLoadMigrationsRejectsBadSets(t *testing.T) {
	cases := map[string]struct {
		fsys    fstest.MapFS
		wantErr string
	}{
		"bad name":  {fstest.MapFS{"m/1_x.sql": {Data: []byte("SELECT 1;")}}, "name must look like"},
		"gap":       {fstest.MapFS{"m/0001_a.sql": {Data: []byte("SELECT 1;")}, "m/0003_c.sql": {Data: []byte("SELECT 1;")}}, "without gaps"},
		"duplicate": {fstest.MapFS{"m/0001_a.sql": {Data: []byte("SELECT 1;")}, "m/0001_b.sql": {Data: []byte("SELECT 1;")}}, "share version"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			db := storetest.OpenURL(t, storetest.SQLiteURL(t))
			_, err := db.MigrateFS(context.Background(), tc.fsys, "m", -1)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestOpenRejectsBadURLs(t *testing.T) {
	cases := map[string]string{
		"empty":          "",
		"unknown scheme": "mysql://u:p@h/db",
		"sqlite no path": "sqlite:",
		"sqlite query":   "sqlite:./x.db?mode=ro",
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := store.Open(context.Background(), raw)
			if err == nil {
				t.Fatalf("Open(%q) succeeded", raw)
			}
			if strings.Contains(raw, "p@") && strings.Contains(err.Error(), "p@") {
				t.Fatalf("error repeats the url: %v", err)
			}
		})
	}
}

// TestOpenSaysWhichDatabaseItCouldNotReach: a database that cannot be reached is
// named in the error, a SQLite file with its directory when that does not exist,
// a PostgreSQL database with its server and user and never its password (failed
// before: "connect to sqlite database: unable to open database file (14)", and
// "connect to postgres database: pq: password authentication failed", naming
// neither).
func TestOpenSaysWhichDatabaseItCouldNotReach(t *testing.T) {
	missingDir := filepath.Join(t.TempDir(), "no-such-dir")
	cases := map[string]struct {
		url  string
		want []string
	}{
		"a SQLite file in a directory that does not exist": {
			url:  "sqlite:" + filepath.Join(missingDir, "k.db"),
			want: []string{filepath.Join(missingDir, "k.db"), "its directory " + missingDir + " does not exist"},
		},
		"a PostgreSQL server that refuses connections": {
			// Port 1 answers no PostgreSQL.
			url:  "postgres://alice:s3cret@127.0.0.1:1/kukie?sslmode=disable",
			want: []string{`database "kukie" on 127.0.0.1:1 as user "alice"`},
		},
		"a PostgreSQL URL without a user": {
			url:  "postgres://127.0.0.1:1/kukie?sslmode=disable",
			want: []string{`database "kukie" on 127.0.0.1:1 as the default user`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			db, err := store.Open(context.Background(), tc.url)
			if err == nil {
				_ = db.Close()
				t.Fatalf("Open(%q) succeeded", tc.url)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

func TestDialectOf(t *testing.T) {
	for raw, want := range map[string]store.Dialect{
		"sqlite:./kukie.db":           store.SQLite,
		"postgres://u@localhost/db":   store.Postgres,
		"postgresql://u@localhost/db": store.Postgres,
	} {
		t.Run(fmt.Sprint(raw), func(t *testing.T) {
			got, err := store.DialectOf(raw)
			if err != nil || got != want {
				t.Fatalf("DialectOf(%q) = %q, %v; want %q", raw, got, err, want)
			}
		})
	}
}
