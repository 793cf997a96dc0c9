package store_test

import (
	"context"
	"errors"
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

// TestUpdatePlanLocksMovesLocksWithTheState: a plan's locks change in the
// transaction that moves it. Released locks are returned; a file held by another
// plan fails the whole update, which then changes neither the plan nor any lock.
func TestUpdatePlanLocksMovesLocksWithTheState(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.EnsureTeam(ctx, "locks")
		if err != nil {
			t.Fatal(err)
		}
		plans := map[string]store.Plan{}
		for _, code := range []string{"failing", "next"} {
			pl := newPlan(team.ID, code, "")
			pl.Repo = "acme/deploy"
			stored, _, err := db.CreatePlan(ctx, pl, store.PlanEvent{})
			if err != nil {
				t.Fatal(err)
			}
			plans[code] = stored
		}
		if holder, err := db.AcquireFileLocks(ctx, "failing", "acme/deploy", []string{"a.yaml"}); err != nil || holder != "" {
			t.Fatalf("acquire: holder %q, %v", holder, err)
		}

		failed := plans["failing"]
		failed.Status = "failed"
		failed, released, err := db.UpdatePlanLocks(ctx, failed, store.PlanEvent{Step: "commit"}, store.LockChange{ReleaseAll: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(released) != 1 || released[0].Path != "a.yaml" {
			t.Fatalf("released %+v, want a.yaml", released)
		}
		if locks, _ := db.FileLocks(ctx, "failing"); len(locks) != 0 {
			t.Fatalf("failed plan still holds %+v", locks)
		}

		next := plans["next"]
		next.Status = "committing"
		if _, _, err := db.UpdatePlanLocks(ctx, next, store.PlanEvent{Step: "prepare"}, store.LockChange{Take: []string{"a.yaml"}}); err != nil {
			t.Fatalf("take the released file: %v", err)
		}

		// The failed plan is retried at its commit: the file is taken, so nothing
		// moves.
		retried := failed
		retried.Status = "committing"
		_, _, err = db.UpdatePlanLocks(ctx, retried, store.PlanEvent{Step: "retry"}, store.LockChange{Take: []string{"b.yaml", "a.yaml"}})
		var held *store.LockHeldError
		if !errors.As(err, &held) || held.Holder != "next" {
			t.Fatalf("retry onto a held file: %v, want a LockHeldError naming next", err)
		}
		stored, err := db.PlanByCode(ctx, "failing")
		if err != nil {
			t.Fatal(err)
		}
		if stored.Status != "failed" || stored.Version != failed.Version {
			t.Errorf("refused update changed the plan: %s v%d, want failed v%d", stored.Status, stored.Version, failed.Version)
		}
		if locks, _ := db.FileLocks(ctx, "failing"); len(locks) != 0 {
			t.Errorf("refused update left locks %+v", locks)
		}
		events, err := db.PlanEvents(ctx, "failing")
		if err != nil {
			t.Fatal(err)
		}
		if last := events[len(events)-1]; last.Step != "commit" {
			t.Errorf("refused update recorded event %+v", last)
		}
	})
}
