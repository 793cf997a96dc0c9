package store_test

import (
	"context"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestCurrentPullChecksOnBase: a push of base1 to main may have made stale the
// current, completed checks of pull requests into main computed against another
// base and not marked yet, newest first and at most the limit; a running check, a
// superseded one, a merge queue's, another branch's, one already against base1 and
// a marked one are not listed, and a check is marked once.
func TestCurrentPullChecksOnBase(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		begin := func(c store.PullCheck, finish bool) store.PullCheck {
			t.Helper()
			c, err := db.BeginPullCheck(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if finish {
				if err := db.FinishPullCheck(ctx, c.ID, store.PullCheckCompleted, "success", "", []byte(`{}`)); err != nil {
					t.Fatal(err)
				}
			}
			return c
		}
		superseded := begin(pullCheck("pull/1", "old"), true)
		first := begin(pullCheck("pull/1", "head1"), true)
		second := begin(pullCheck("pull/2", "head2"), true)
		begin(pullCheck("pull/3", "head3"), false)
		begin(pullCheck("merge_group/gh-readonly-queue/main/pr-4", "head4"), true)
		release := pullCheck("pull/5", "head5")
		release.BaseBranch = "release"
		begin(release, true)
		current := pullCheck("pull/6", "head6")
		current.BaseSHA = "base1"
		begin(current, true)
		marked := begin(pullCheck("pull/7", "head7"), true)
		if ok, err := db.MarkPullCheckBaseMoved(ctx, marked.ID, "base1"); err != nil || !ok {
			t.Fatalf("mark: %v %v", ok, err)
		}
		if ok, err := db.MarkPullCheckBaseMoved(ctx, marked.ID, "base2"); err != nil || ok {
			t.Fatalf("second mark: %v %v, want not marked again", ok, err)
		}

		got, err := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base1", 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range got {
			ids = append(ids, c.Key+" "+c.HeadSHA)
		}
		if len(got) != 2 || got[0].ID != second.ID || got[1].ID != first.ID {
			t.Fatalf("listed %v, want pull/2 then pull/1 (not %s)", ids, superseded.ID)
		}
		if got, err := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base1", 1); err != nil || len(got) != 1 || got[0].ID != second.ID {
			t.Fatalf("with a limit of 1: %v %v", got, err)
		}
		if c, err := db.PullCheckByID(ctx, marked.ID); err != nil || c.BaseMovedSHA != "base1" {
			t.Fatalf("marked check %+v %v, want moved to base1", c, err)
		}
		if got, _ := db.CurrentPullChecksOnBase(ctx, "acme/other", "main", "base1", 10); len(got) != 0 {
			t.Errorf("another repository's checks: %v", got)
		}
	})
}
