package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func pullCheck(key, head string) store.PullCheck {
	return store.PullCheck{InstallationID: 7, Repo: "acme/deploy", RepoURL: "https://github.com/acme/deploy", Key: key,
		BaseBranch: "main", BaseSHA: "base0", HeadSHA: head}
}

// TestNewerPullCheckSupersedesTheRunningOne: the key passes to the newest check, the
// older learns which head took it, and a closed pull request's check learns it has
// no successor; another key and another repository's same key are untouched.
func TestNewerPullCheckSupersedesTheRunningOne(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		older, err := db.BeginPullCheck(ctx, pullCheck("pull/12", "head1"))
		if err != nil {
			t.Fatal(err)
		}
		otherKey, err := db.BeginPullCheck(ctx, pullCheck("pull/13", "head9"))
		if err != nil {
			t.Fatal(err)
		}
		otherRepo := pullCheck("pull/12", "head8")
		otherRepo.Repo = "acme/other"
		if otherRepo, err = db.BeginPullCheck(ctx, otherRepo); err != nil {
			t.Fatal(err)
		}
		if holds, _, err := db.PullCheckHolder(ctx, older.ID); err != nil || !holds {
			t.Fatalf("the only check of its key: holds %v, %v", holds, err)
		}
		newer, err := db.BeginPullCheck(ctx, pullCheck("pull/12", "head2"))
		if err != nil {
			t.Fatal(err)
		}
		if older.Generation != 1 || newer.Generation != 2 {
			t.Errorf("generations %d, %d, want 1, 2", older.Generation, newer.Generation)
		}
		if holds, by, err := db.PullCheckHolder(ctx, older.ID); err != nil || holds || by != "head2" {
			t.Errorf("older check: holds %v by %q (%v), want superseded by head2", holds, by, err)
		}
		for _, c := range []store.PullCheck{newer, otherKey, otherRepo} {
			if holds, _, err := db.PullCheckHolder(ctx, c.ID); err != nil || !holds {
				t.Errorf("check of %s %s: holds %v, %v", c.Repo, c.Key, holds, err)
			}
		}
		if err := db.ReleasePullCheckKey(ctx, "acme/deploy", "pull/12"); err != nil {
			t.Fatal(err)
		}
		if holds, by, err := db.PullCheckHolder(ctx, newer.ID); err != nil || holds || by != "" {
			t.Errorf("check of a closed pull request: holds %v by %q (%v), want released", holds, by, err)
		}
		if _, _, err := db.PullCheckHolder(ctx, "no-such-check"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("holder of an unknown check: %v, want ErrNotFound", err)
		}
	})
}

func TestPullCheckResultAndHistory(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		older, err := db.BeginPullCheck(ctx, pullCheck("pull/12", "head1"))
		if err != nil {
			t.Fatal(err)
		}
		newer, err := db.BeginPullCheck(ctx, pullCheck("pull/12", "head2"))
		if err != nil {
			t.Fatal(err)
		}
		if err := db.FinishPullCheck(ctx, older.ID, store.PullCheckSuperseded, "cancelled", "superseded by head2", nil); err != nil {
			t.Fatal(err)
		}
		if err := db.SetPullCheckRun(ctx, newer.ID, 99); err != nil {
			t.Fatal(err)
		}
		result := json.RawMessage(`{"apps":[{"name":"web","diffs":[]}]}`)
		if err := db.FinishPullCheck(ctx, newer.ID, store.PullCheckCompleted, "success", "", result); err != nil {
			t.Fatal(err)
		}
		got, err := db.PullCheckByID(ctx, newer.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != store.PullCheckCompleted || got.Conclusion != "success" || got.CheckRunID != 99 || string(got.Result) != string(result) ||
			got.HeadSHA != "head2" || got.RepoURL != "https://github.com/acme/deploy" || got.Generation != 2 {
			t.Errorf("read back %+v", got)
		}
		history, err := db.PullChecksOf(ctx, "acme/deploy", "pull/12")
		if err != nil {
			t.Fatal(err)
		}
		if len(history) != 2 || history[0].ID != newer.ID || history[1].ID != older.ID ||
			history[1].State != store.PullCheckSuperseded || history[1].Note != "superseded by head2" || history[0].Result != nil {
			t.Errorf("history %+v, want the newer then the superseded older, without results", history)
		}
		if err := db.FinishPullCheck(ctx, newer.ID, store.PullCheckRunning, "", "", nil); err == nil {
			t.Error("running accepted as a final state")
		}
		if err := db.FinishPullCheck(ctx, newer.ID, store.PullCheckCompleted, "success", "", json.RawMessage("{")); err == nil {
			t.Error("a result that is not JSON was stored")
		}
		if err := db.SetPullCheckRun(ctx, "no-such-check", 1); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("update of an unknown check: %v, want ErrNotFound", err)
		}
		if _, err := db.PullCheckByID(ctx, "no-such-check"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("read of an unknown check: %v, want ErrNotFound", err)
		}
	})
}

// TestConcurrentPullChecksTakeDistinctGenerations: checks of one key beginning at
// once (replicas handling two pushes) each get their own generation, and exactly the
// last one holds the key.
func TestConcurrentPullChecksTakeDistinctGenerations(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const n = 8
		checks := make([]store.PullCheck, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { checks[i], errs[i] = db.BeginPullCheck(ctx, pullCheck("pull/1", "head"+string(rune('a'+i)))) })
		}
		wg.Wait()
		var gens []int
		holders := 0
		var last store.PullCheck
		for i, c := range checks {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			gens = append(gens, int(c.Generation))
			if c.Generation > last.Generation {
				last = c
			}
			if holds, _, err := db.PullCheckHolder(ctx, c.ID); err != nil {
				t.Fatal(err)
			} else if holds {
				holders++
			}
		}
		sort.Ints(gens)
		for i, g := range gens {
			if g != i+1 {
				t.Fatalf("generations %v, want 1..%d", gens, n)
			}
		}
		if holds, _, _ := db.PullCheckHolder(ctx, last.ID); holders != 1 || !holds {
			t.Errorf("%d checks hold the key, want only the last (generation %d)", holders, last.Generation)
		}
	})
}
