package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestReplaceFileLocks: a plan re-prepared on other files ends up holding exactly the
// new files; when another plan holds one of them, nothing changes at all.
func TestReplaceFileLocks(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.EnsureTeam(ctx, "locks")
		if err != nil {
			t.Fatal(err)
		}
		for _, code := range []string{"mover", "other"} {
			if _, _, err := db.CreatePlan(ctx, newPlan(team.ID, code, ""), store.PlanEvent{}); err != nil {
				t.Fatal(err)
			}
		}
		held := func(code string) string {
			t.Helper()
			locks, err := db.FileLocks(ctx, code)
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, l := range locks {
				paths = append(paths, l.Repo+":"+l.Path)
			}
			return strings.Join(paths, " ")
		}
		if holder, err := db.AcquireFileLocks(ctx, "mover", "acme/deploy", []string{"a.yaml", "b.yaml"}); err != nil || holder != "" {
			t.Fatalf("acquire: holder %q, %v", holder, err)
		}
		if holder, err := db.AcquireFileLocks(ctx, "other", "acme/deploy", []string{"c.yaml"}); err != nil || holder != "" {
			t.Fatalf("acquire other: holder %q, %v", holder, err)
		}

		holder, released, err := db.ReplaceFileLocks(ctx, "mover", "acme/deploy", []string{"b.yaml", "d.yaml"})
		if err != nil || holder != "" {
			t.Fatalf("replace: holder %q, %v", holder, err)
		}
		if len(released) != 1 || released[0].Path != "a.yaml" {
			t.Errorf("released %+v, want a.yaml only", released)
		}
		if got, want := held("mover"), "acme/deploy:b.yaml acme/deploy:d.yaml"; got != want {
			t.Errorf("mover holds %q, want %q", got, want)
		}
		// The released file is free for another plan.
		if holder, err := db.AcquireFileLocks(ctx, "other", "acme/deploy", []string{"a.yaml"}); err != nil || holder != "" {
			t.Fatalf("a.yaml after release: holder %q, %v", holder, err)
		}

		// A file held by another plan: refused as a whole, the old locks stay.
		holder, released, err = db.ReplaceFileLocks(ctx, "mover", "acme/deploy", []string{"c.yaml", "e.yaml"})
		if err != nil || holder != "other" || len(released) != 0 {
			t.Fatalf("replace onto a held file: holder %q released %+v, %v; want holder other and nothing released", holder, released, err)
		}
		if got, want := held("mover"), "acme/deploy:b.yaml acme/deploy:d.yaml"; got != want {
			t.Errorf("after a refused replace mover holds %q, want %q unchanged", got, want)
		}
	})
}
