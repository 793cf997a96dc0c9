package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func TestSQLiteConnectionSettings(t *testing.T) {
	db := storetest.SQLite(t)
	ctx := context.Background()
	cases := map[string]struct {
		pragma string
		want   string
	}{
		"write-ahead log lets readers run beside the writer": {"journal_mode", "wal"},
		"foreign keys are enforced":                          {"foreign_keys", "1"},
		"writers of other processes are waited for":          {"busy_timeout", "5000"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got string
			if err := db.GetContext(ctx, &got, "PRAGMA "+tc.pragma); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("PRAGMA %s = %q, want %q", tc.pragma, got, tc.want)
			}
		})
	}
	t.Run("one connection, so writers queue instead of sleeping in the busy handler", func(t *testing.T) {
		if n := db.Stats().MaxOpenConnections; n != 1 {
			t.Fatalf("MaxOpenConnections = %d, want 1", n)
		}
	})
}

func TestForeignKeysAreEnforced(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		if _, _, err := db.CreateAPIToken(context.Background(), "no-such-team", "x"); err == nil {
			t.Fatal("token for a team that does not exist was stored")
		}
	})
}

// Read-then-write transactions are what SQLite turns into SQLITE_BUSY when two of them
// upgrade their read locks at once; every one must succeed here, on both databases.
func TestConcurrentReadThenWriteTransactionsAllCommit(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		team, err := db.CreateTeam(ctx, "payments")
		if err != nil {
			t.Fatal(err)
		}
		const workers, perWorker = 16, 10
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range perWorker {
					err := db.InTx(ctx, func(tx *sqlx.Tx) error {
						var n int
						if err := tx.GetContext(ctx, &n, tx.Rebind(`SELECT COUNT(*) FROM audit_events WHERE team_id = ?`), team.ID); err != nil {
							return err
						}
						_, err := store.RecordAuditEventTx(ctx, tx, store.AuditEvent{
							TeamID: team.ID, Actor: "test", Action: "count.seen",
							SubjectID: fmt.Sprintf("%d-%d", w, i), Detail: []byte(fmt.Sprintf(`{"seen":%d}`, n)),
						})
						return err
					})
					if err != nil {
						t.Errorf("worker %d transaction %d: %v", w, i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		events, err := db.ListAuditEvents(ctx, store.AuditFilter{TeamID: team.ID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != workers*perWorker {
			t.Fatalf("%d audit events, want %d", len(events), workers*perWorker)
		}
	})
}
