package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestPrunePullChecks: finished checks superseded before the cutoff go; a recent
// one stays until a later cutoff, and the key's current check stays whatever its age.
func TestPrunePullChecks(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		begin := func(sha string) store.PullCheck {
			c, err := db.BeginPullCheck(ctx, store.PullCheck{InstallationID: 1, Repo: "acme/deploy", Key: "pull/1",
				BaseBranch: "main", BaseSHA: "base", HeadSHA: sha})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		finish := func(c store.PullCheck, state string) {
			if err := db.FinishPullCheck(ctx, c.ID, state, "", "", nil); err != nil {
				t.Fatal(err)
			}
		}
		first := begin("a")
		second := begin("b")
		finish(first, store.PullCheckSuperseded)
		time.Sleep(2 * time.Millisecond) // timestamps are milliseconds: the cutoff comes after first's
		cutoff := time.Now()
		time.Sleep(2 * time.Millisecond)
		current := begin("c")
		finish(second, store.PullCheckSuperseded)
		finish(current, store.PullCheckCompleted)

		if n, err := db.PrunePullChecks(ctx, cutoff); err != nil || n != 1 {
			t.Fatalf("prune at the cutoff: %d, %v, want 1", n, err)
		}
		if n, err := db.PrunePullChecks(ctx, time.Now().Add(time.Hour)); err != nil || n != 1 {
			t.Fatalf("prune of everything finished: %d, %v, want 1", n, err)
		}
		history, err := db.PullChecksOf(ctx, "acme/deploy", "pull/1")
		if err != nil {
			t.Fatal(err)
		}
		if len(history) != 1 || history[0].ID != current.ID {
			t.Fatalf("history %+v, want the current check alone", history)
		}
	})
}
