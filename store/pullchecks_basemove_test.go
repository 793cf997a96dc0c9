package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestCurrentPullChecksOnBase: a push of base1 to main may have made stale the
// current checks of pull requests into main computed against another base: the
// completed ones whose render run is not marked yet, and the running ones not yet
// told of base1, newest first and at most the limit; a superseded check, a merge
// queue's, another branch's, one already against base1 and a marked one are not
// listed, and a check is marked once.
func TestCurrentPullChecksOnBase(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		superseded := beginCheck(t, db, pullCheck("pull/1", "old"), true)
		first := beginCheck(t, db, pullCheck("pull/1", "head1"), true)
		second := beginCheck(t, db, pullCheck("pull/2", "head2"), true)
		running := beginCheck(t, db, pullCheck("pull/3", "head3"), false)
		beginCheck(t, db, pullCheck("merge_group/gh-readonly-queue/main/pr-4", "head4"), true)
		release := pullCheck("pull/5", "head5")
		release.BaseBranch = "release"
		beginCheck(t, db, release, true)
		current := pullCheck("pull/6", "head6")
		current.BaseSHA = "base1"
		beginCheck(t, db, current, true)
		marked := beginCheck(t, db, pullCheck("pull/7", "head7"), true)
		if ok, err := db.MarkPullCheckBaseMoved(ctx, marked.ID, "base1"); err != nil || !ok {
			t.Fatalf("mark: %v %v", ok, err)
		}
		if ok, err := db.MarkPullCheckBaseMoved(ctx, marked.ID, "base2"); err != nil || ok {
			t.Fatalf("second mark: %v %v, want not marked again", ok, err)
		}
		if ok, err := db.MarkPullCheckBaseMoved(ctx, running.ID, "base1"); err != nil || ok {
			t.Fatalf("render mark of a running check: %v %v, want none", ok, err)
		}

		got, err := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base1", false, 10)
		if err != nil {
			t.Fatal(err)
		}
		if ids := idsOf(got); len(got) != 3 || got[0].ID != running.ID || got[1].ID != second.ID || got[2].ID != first.ID {
			t.Fatalf("listed %v, want pull/3 (running), pull/2 then pull/1 (not %s)", ids, superseded.ID)
		}
		if got, err := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base1", false, 1); err != nil || len(got) != 1 || got[0].ID != running.ID {
			t.Fatalf("with a limit of 1: %v %v", got, err)
		}
		if c, err := db.PullCheckByID(ctx, marked.ID); err != nil || c.BaseMovedSHA != "base1" {
			t.Fatalf("marked check %+v %v, want moved to base1", c, err)
		}
		if got, _ := db.CurrentPullChecksOnBase(ctx, "acme/other", "main", "base1", false, 10); len(got) != 0 {
			t.Errorf("another repository's checks: %v", got)
		}

		// The running check told of base1 is not listed for it again, but is for
		// a later push, which replaces the commit; once it completed it is told
		// nothing more while running, and is listed as completed.
		if ok, err := db.MarkPullCheckMovedWhileRunning(ctx, running.ID, "base1"); err != nil || !ok {
			t.Fatalf("mark the running check: %v %v", ok, err)
		}
		if got, _ := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base1", false, 10); len(got) != 2 {
			t.Fatalf("after the running check was told: %v, want pull/2 and pull/1", idsOf(got))
		}
		if ok, err := db.MarkPullCheckMovedWhileRunning(ctx, running.ID, "base2"); err != nil || !ok {
			t.Fatalf("mark the running check for a later push: %v %v", ok, err)
		}
		if c, err := db.PullCheckByID(ctx, running.ID); err != nil || c.MovedWhileRunningSHA != "base2" || c.BaseMovedSHA != "" {
			t.Fatalf("running check %+v %v, want moved to base2 while running, not marked", c, err)
		}
		if err := db.FinishPullCheck(ctx, running.ID, store.PullCheckCompleted, "success", "", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if ok, err := db.MarkPullCheckMovedWhileRunning(ctx, running.ID, "base3"); err != nil || ok {
			t.Fatalf("mark the completed check as running: %v %v, want not marked", ok, err)
		}
		if got, _ := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base3", false, 10); len(got) != 4 || got[0].ID != running.ID {
			t.Fatalf("after the running check completed: %v, want it first, then pull/6, pull/2 and pull/1", idsOf(got))
		}
	})
}

// TestPolicyMarkIsApartFromTheRenderMark: a check whose render run is marked is
// listed again only for a push that may change the policy file, and only when it
// recorded its kukie/policy run; the policy mark is made once and lists it no more.
func TestPolicyMarkIsApartFromTheRenderMark(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		withRun := beginCheck(t, db, pullCheck("pull/1", "head1"), false)
		if err := db.SetPullCheckPolicyRun(ctx, withRun.ID, 42); err != nil {
			t.Fatal(err)
		}
		if err := db.FinishPullCheck(ctx, withRun.ID, store.PullCheckCompleted, "success", "", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		noRun := beginCheck(t, db, pullCheck("pull/2", "head2"), true)
		for _, c := range []store.PullCheck{withRun, noRun} {
			if ok, err := db.MarkPullCheckBaseMoved(ctx, c.ID, "base1"); err != nil || !ok {
				t.Fatalf("render mark: %v %v", ok, err)
			}
		}
		if got, _ := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base2", false, 10); len(got) != 0 {
			t.Fatalf("a push that leaves the policy alone lists %v, want nothing", idsOf(got))
		}
		got, err := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base2", true, 10)
		if err != nil || len(got) != 1 || got[0].ID != withRun.ID || got[0].PolicyCheckRunID != 42 {
			t.Fatalf("a push that may change the policy lists %+v (%v), want pull/1 with its policy run", got, err)
		}
		if ok, err := db.MarkPullCheckPolicyMoved(ctx, withRun.ID, "base2"); err != nil || !ok {
			t.Fatalf("policy mark: %v %v", ok, err)
		}
		if ok, err := db.MarkPullCheckPolicyMoved(ctx, withRun.ID, "base3"); err != nil || ok {
			t.Fatalf("second policy mark: %v %v, want not marked again", ok, err)
		}
		if got, _ := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base3", true, 10); len(got) != 0 {
			t.Fatalf("after both marks: %v, want nothing", idsOf(got))
		}
		if c, err := db.PullCheckByID(ctx, withRun.ID); err != nil || c.PolicyMovedSHA != "base2" || c.BaseMovedSHA != "base1" {
			t.Fatalf("check %+v %v, want its render marked at base1 and its policy at base2", c, err)
		}
		if c, err := db.PullCheckMarks(ctx, withRun.ID); err != nil || c.PolicyMovedSHA != "base2" || c.BaseMovedSHA != "base1" || c.PolicyCheckRunID != 42 || c.Result != nil {
			t.Fatalf("marks of the check %+v %v, want both marks and the policy run, without the result", c, err)
		}
	})
}

func beginCheck(t *testing.T, db *store.DB, c store.PullCheck, finish bool) store.PullCheck {
	t.Helper()
	ctx := context.Background()
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

func idsOf(checks []store.PullCheck) []string {
	var ids []string
	for _, c := range checks {
		ids = append(ids, c.Key+" "+c.HeadSHA)
	}
	return ids
}

// TestCurrentPullChecksOffBase: a push of the policy file to main, the default
// branch, may have made stale the kukie/policy runs of the current checks of pull
// requests into other branches: the completed ones with a policy run not marked,
// and the running ones not yet told, once each; with no policy change, only those
// whose judgement of their base moves is owed. Checks into main, superseded ones
// and merge queues' are not listed.
func TestCurrentPullChecksOffBase(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		into := func(key, head string) store.PullCheck {
			c := pullCheck(key, head)
			c.BaseBranch = "release"
			return c
		}
		beginCheck(t, db, into("pull/1", "old"), true)
		completed := beginCheck(t, db, into("pull/1", "head1"), true)
		noPolicyRun := beginCheck(t, db, into("pull/2", "head2"), true)
		running := beginCheck(t, db, into("pull/3", "head3"), false)
		onMain := beginCheck(t, db, pullCheck("pull/4", "head4"), true)
		group := beginCheck(t, db, into("merge_group/gh-readonly-queue/release/pr-5", "head5"), true)
		for _, c := range []store.PullCheck{completed, onMain, group} {
			if err := db.SetPullCheckPolicyRun(ctx, c.ID, 42); err != nil {
				t.Fatal(err)
			}
		}
		list := func(policy bool) []string {
			t.Helper()
			got, err := db.CurrentPullChecksOffBase(ctx, "acme/deploy", "main", policy, 10)
			if err != nil {
				t.Fatal(err)
			}
			ids := idsOf(got)
			slices.Sort(ids)
			return ids
		}
		if got := list(true); !slices.Equal(got, []string{"pull/1 head1", "pull/3 head3"}) {
			t.Fatalf("listed %v, want pull/1 (completed) and pull/3 (running)", got)
		}
		if got := list(false); len(got) != 0 {
			t.Fatalf("listed %v for a push that leaves the policy, want none", got)
		}

		if ok, err := db.MarkPullCheckPolicyMovedWhileRunning(ctx, running.ID, "main1"); err != nil || !ok {
			t.Fatalf("tell the running check: %v %v", ok, err)
		}
		if ok, err := db.MarkPullCheckPolicyMovedWhileRunning(ctx, running.ID, "main2"); err != nil || ok {
			t.Fatalf("tell the running check again: %v %v, want told once", ok, err)
		}
		if ok, err := db.MarkPullCheckPolicyMovedWhileRunning(ctx, completed.ID, "main1"); err != nil || ok {
			t.Fatalf("tell a completed check as running: %v %v, want not told", ok, err)
		}
		if ok, err := db.MarkPullCheckPolicyMoved(ctx, completed.ID, "main1"); err != nil || !ok {
			t.Fatalf("mark: %v %v", ok, err)
		}
		if got := list(true); len(got) != 0 {
			t.Fatalf("listed %v once every policy run was told or marked, want none", got)
		}
		if c, err := db.PullCheckByID(ctx, running.ID); err != nil || c.PolicyMovedSHA != "main1" || c.State != store.PullCheckRunning {
			t.Fatalf("running check %+v %v, want running, its policy moved to main1", c, err)
		}

		// An owed judgement is listed whatever the push, until it is made.
		if err := db.SetPullCheckMovesPending(ctx, noPolicyRun.ID, true); err != nil {
			t.Fatal(err)
		}
		if got := list(false); !slices.Equal(got, []string{"pull/2 head2"}) {
			t.Fatalf("listed %v, want pull/2, owed", got)
		}
		if c, err := db.PullCheckMarks(ctx, noPolicyRun.ID); err != nil || !c.MovesPending {
			t.Fatalf("owed check %+v %v, want its moves pending", c, err)
		}
		if err := db.SetPullCheckMovesPending(ctx, noPolicyRun.ID, false); err != nil {
			t.Fatal(err)
		}
		if got := list(false); len(got) != 0 {
			t.Fatalf("listed %v once nothing is owed, want none", got)
		}
	})
}

// TestOwedPullCheckIsListedOnItsBase: a completed check whose runs are both marked
// is listed for a push to its base while its judgement of the moves is owed.
func TestOwedPullCheckIsListedOnItsBase(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		c := beginCheck(t, db, pullCheck("pull/1", "head1"), true)
		if ok, err := db.MarkPullCheckBaseMoved(ctx, c.ID, "base1"); err != nil || !ok {
			t.Fatalf("mark: %v %v", ok, err)
		}
		if got, err := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base2", true, 10); err != nil || len(got) != 0 {
			t.Fatalf("listed %v %v, want none: its run is marked", idsOf(got), err)
		}
		if err := db.SetPullCheckMovesPending(ctx, c.ID, true); err != nil {
			t.Fatal(err)
		}
		if got, err := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base2", false, 10); err != nil || len(got) != 1 || !got[0].MovesPending {
			t.Fatalf("listed %v %v, want the owed check", idsOf(got), err)
		}
	})
}

// TestPullCheckKeepsTheCommitItsPolicyWasReadFrom: a check begun with the commit
// its policy was read from keeps it, read back by id, in its key's history and in
// both listings of the checks a push may have made stale; one begun without it
// has none.
func TestPullCheckKeepsTheCommitItsPolicyWasReadFrom(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		onMain := pullCheck("pull/1", "head1")
		onMain.PolicySHA = "policy1"
		onMain = beginCheck(t, db, onMain, true)
		release := pullCheck("pull/2", "head2")
		release.BaseBranch, release.PolicySHA = "release", "policy2"
		release = beginCheck(t, db, release, false)
		unknown := beginCheck(t, db, pullCheck("pull/3", "head3"), true)

		if c, err := db.PullCheckByID(ctx, onMain.ID); err != nil || c.PolicySHA != "policy1" {
			t.Fatalf("check by id %+v %v, want its policy read from policy1", c, err)
		}
		if h, err := db.PullChecksOf(ctx, "acme/deploy", "pull/2"); err != nil || len(h) != 1 || h[0].PolicySHA != "policy2" {
			t.Fatalf("history %+v %v, want the one check, its policy read from policy2", h, err)
		}
		on, err := db.CurrentPullChecksOnBase(ctx, "acme/deploy", "main", "base1", true, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{onMain.ID: "policy1", unknown.ID: ""}
		if len(on) != 2 {
			t.Fatalf("listed on main %v, want pull/1 and pull/3", idsOf(on))
		}
		for _, c := range on {
			if w, ok := want[c.ID]; !ok || c.PolicySHA != w {
				t.Errorf("listed on main %s with its policy read from %q, want %q", c.Key, c.PolicySHA, w)
			}
		}
		off, err := db.CurrentPullChecksOffBase(ctx, "acme/deploy", "main", true, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(off) != 1 || off[0].ID != release.ID || off[0].PolicySHA != "policy2" {
			t.Fatalf("listed off main %+v, want pull/2, its policy read from policy2", off)
		}
	})
}
