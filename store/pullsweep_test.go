package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// TestPullSweepReadsEachPullRequestOncePerInterval: of replicas sweeping at once,
// one claims each plan's pull request read; nobody reads it again within the
// interval, everybody may after it; a plan that moved on since it was listed, and
// one without a pull request, are not read; and claiming a read leaves the plan's
// version alone, so no writer of the plan is told it went stale.
func TestPullSweepReadsEachPullRequestOncePerInterval(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		create := func(code, status string, pr int64) store.Plan {
			t.Helper()
			p := newPlan(team.ID, code, code)
			p.Status, p.PRNumber, p.Repo, p.Branch = status, pr, "acme/deploy", "kukie/"+code
			saved, _, err := db.CreatePlan(ctx, p, store.PlanEvent{Actor: "team:a"})
			if err != nil {
				t.Fatal(err)
			}
			return saved
		}
		open := create("open", "pr_open", 7)
		create("nopr", "pr_open", 0)
		create("merged", "merged", 8)
		const interval = 5 * time.Minute
		now := time.Now()
		due := func(at time.Time) []string {
			t.Helper()
			plans, err := db.PullSweepDue(ctx, []string{"pr_open"}, at.Add(-interval), 0)
			if err != nil {
				t.Fatal(err)
			}
			var codes []string
			for _, p := range plans {
				codes = append(codes, p.Code)
			}
			return codes
		}
		if got := due(now); len(got) != 1 || got[0] != open.Code {
			t.Fatalf("due %v, want only %s", got, open.Code)
		}
		claimAll := func(at time.Time) int64 {
			t.Helper()
			var won atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					ok, err := db.ClaimPullSweep(ctx, open.Code, "pr_open", at, at.Add(-interval))
					if err != nil {
						t.Error(err)
					}
					if ok {
						won.Add(1)
					}
				})
			}
			wg.Wait()
			return won.Load()
		}
		if n := claimAll(now); n != 1 {
			t.Fatalf("%d replicas claimed the read, want 1", n)
		}
		if got := due(now.Add(interval - time.Second)); len(got) != 0 {
			t.Fatalf("due %v within the interval of the read, want none", got)
		}
		if n := claimAll(now.Add(interval - time.Second)); n != 0 {
			t.Fatalf("%d replicas claimed the read again within the interval, want none", n)
		}
		if got := due(now.Add(interval)); len(got) != 1 {
			t.Fatalf("due %v an interval after the read, want %s", got, open.Code)
		}
		if n := claimAll(now.Add(interval)); n != 1 {
			t.Fatalf("%d replicas claimed the read an interval later, want 1", n)
		}
		cur, err := db.PlanByCode(ctx, open.Code)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Version != open.Version {
			t.Fatalf("version %d after the reads, want %d", cur.Version, open.Version)
		}
		cur.Status = "merged"
		if _, err := db.UpdatePlan(ctx, cur, store.PlanEvent{Step: "pull_request"}); err != nil {
			t.Fatal(err)
		}
		later := now.Add(3 * interval)
		if ok, err := db.ClaimPullSweep(ctx, open.Code, "pr_open", later, later.Add(-interval)); err != nil || ok {
			t.Fatalf("claim of a plan that moved on: %v %v, want not claimed", ok, err)
		}
	})
}
