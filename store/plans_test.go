package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

func newPlan(teamID, code, key string) store.Plan {
	return store.Plan{
		Code: code, TeamID: teamID, IdempotencyKey: key, Cluster: "prod",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "web", Name: "api"},
		Change: []byte(`{"replicas":{"count":4}}`), Reason: "load", RequestedBy: "alice", Status: "deciding",
	}
}

func TestCreatePlanIsIdempotentPerTeamKey(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		teamA, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		teamB, err := db.CreateTeam(ctx, "team-b")
		if err != nil {
			t.Fatal(err)
		}

		const racers = 30
		codes := make(chan string, racers)
		var created sync.WaitGroup
		var createdCount int
		var mu sync.Mutex
		for i := range racers {
			created.Add(1)
			go func() {
				defer created.Done()
				p, ok, err := db.CreatePlan(ctx, newPlan(teamA.ID, fmt.Sprintf("code%02d", i), "key-1"), store.PlanEvent{Actor: "team:a"})
				if err != nil {
					t.Errorf("create plan %d: %v", i, err)
					return
				}
				if ok {
					mu.Lock()
					createdCount++
					mu.Unlock()
				}
				codes <- p.Code
			}()
		}
		created.Wait()
		close(codes)
		seen := map[string]bool{}
		for c := range codes {
			seen[c] = true
		}
		if createdCount != 1 || len(seen) != 1 {
			t.Fatalf("created %d plans, callers saw codes %v; want exactly one", createdCount, seen)
		}

		// The same key in another team is another plan.
		p, ok, err := db.CreatePlan(ctx, newPlan(teamB.ID, "other", "key-1"), store.PlanEvent{})
		if err != nil || !ok || p.Code != "other" {
			t.Fatalf("team B plan with the same key: %+v created=%v err=%v", p.Code, ok, err)
		}
		// No key: never deduplicated.
		for _, code := range []string{"nokey1", "nokey2"} {
			if _, ok, err := db.CreatePlan(ctx, newPlan(teamA.ID, code, ""), store.PlanEvent{}); err != nil || !ok {
				t.Fatalf("plan without key %s: created=%v err=%v", code, ok, err)
			}
		}
		list, err := db.ListPlans(ctx, store.PlanFilter{TeamID: teamA.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 3 {
			t.Fatalf("team A has %d plans, want 3", len(list))
		}
		if _, err := db.TeamPlan(ctx, teamB.ID, list[0].Code); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("team B read team A's plan: err=%v, want ErrNotFound", err)
		}
	})
}

func TestUpdatePlanOptimisticAndRecorded(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		p, _, err := db.CreatePlan(ctx, newPlan(team.ID, "abc", ""), store.PlanEvent{Actor: "team:team-a", Message: "requested"})
		if err != nil {
			t.Fatal(err)
		}
		stale := p

		p.Status, p.Repo, p.Payload = "preparing", "org/repo", []byte(`{"warnings":["x"]}`)
		p, err = db.UpdatePlan(ctx, p, store.PlanEvent{Actor: "system", Step: "decide", Message: "git path"})
		if err != nil {
			t.Fatal(err)
		}
		if p.Version != 2 {
			t.Fatalf("version %d after one update, want 2", p.Version)
		}
		stale.Status = "refused"
		if _, err := db.UpdatePlan(ctx, stale, store.PlanEvent{}); !errors.Is(err, store.ErrStale) {
			t.Fatalf("update from a stale read: err=%v, want ErrStale", err)
		}
		// A step recorded without a transition is an event but no audit row.
		p.CommitSHA = "0123456789012345678901234567890123456789"
		if p, err = db.UpdatePlan(ctx, p, store.PlanEvent{Step: "commit"}); err != nil {
			t.Fatal(err)
		}

		got, err := db.PlanByCode(ctx, "abc")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != "preparing" || got.Repo != "org/repo" || string(got.Payload) != `{"warnings":["x"]}` || got.CommitSHA != p.CommitSHA {
			t.Fatalf("stored plan %+v", got)
		}
		events, err := db.PlanEvents(ctx, "abc")
		if err != nil {
			t.Fatal(err)
		}
		want := []struct{ from, to, step string }{{"", "deciding", ""}, {"deciding", "preparing", "decide"}, {"preparing", "preparing", "commit"}}
		if len(events) != len(want) {
			t.Fatalf("%d events, want %d: %+v", len(events), len(want), events)
		}
		for i, w := range want {
			if events[i].FromStatus != w.from || events[i].ToStatus != w.to || events[i].Step != w.step || events[i].Seq != int64(i+1) {
				t.Errorf("event %d = %+v, want %+v", i, events[i], w)
			}
		}
		audit, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "plan", SubjectID: "abc"})
		if err != nil {
			t.Fatal(err)
		}
		if len(audit) != 2 {
			t.Fatalf("%d audit rows, want one per transition (2): %+v", len(audit), audit)
		}
	})
}

func TestFileLocksAllOrNothing(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"first", "second"} {
			if _, _, err := db.CreatePlan(ctx, newPlan(team.ID, c, ""), store.PlanEvent{}); err != nil {
				t.Fatal(err)
			}
		}
		holder, err := db.AcquireFileLocks(ctx, "first", "org/repo", []string{"apps/web/deploy.yaml"})
		if err != nil || holder != "" {
			t.Fatalf("first lock: holder=%q err=%v", holder, err)
		}
		// Re-acquiring what one holds is fine (a resumed step).
		if holder, err := db.AcquireFileLocks(ctx, "first", "org/repo", []string{"apps/web/deploy.yaml"}); err != nil || holder != "" {
			t.Fatalf("re-acquire: holder=%q err=%v", holder, err)
		}
		holder, err = db.AcquireFileLocks(ctx, "second", "org/repo", []string{"apps/web/other.yaml", "apps/web/deploy.yaml"})
		if err != nil || holder != "first" {
			t.Fatalf("second lock: holder=%q err=%v, want first", holder, err)
		}
		if locks, _ := db.FileLocks(ctx, "second"); len(locks) != 0 {
			t.Fatalf("second plan kept %d locks after a refused acquire", len(locks))
		}
		// The same path in another repository is another lock.
		if holder, err := db.AcquireFileLocks(ctx, "second", "org/other", []string{"apps/web/deploy.yaml"}); err != nil || holder != "" {
			t.Fatalf("other repo: holder=%q err=%v", holder, err)
		}
		released, err := db.ReleaseFileLocks(ctx, "first")
		if err != nil || len(released) != 1 {
			t.Fatalf("release: %v %v", released, err)
		}
		if holder, err := db.AcquireFileLocks(ctx, "second", "org/repo", []string{"apps/web/deploy.yaml"}); err != nil || holder != "" {
			t.Fatalf("after release: holder=%q err=%v", holder, err)
		}
	})
}

func TestClaimPlanIsExclusive(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := db.CreatePlan(ctx, newPlan(team.ID, "abc", ""), store.PlanEvent{}); err != nil {
			t.Fatal(err)
		}
		w1, ok, err := db.ClaimPlan(ctx, "abc", "w1", time.Minute)
		if err != nil || !ok {
			t.Fatalf("w1 claim: %v %v", ok, err)
		}
		if _, ok, err := db.ClaimPlan(ctx, "abc", "w2", time.Minute); err != nil || ok {
			t.Fatalf("w2 took a live claim: %v %v", ok, err)
		}
		// A live claim is extended by renewal, never granted twice, not even to its
		// owner: one epoch has one holder.
		if _, ok, err := db.ClaimPlan(ctx, "abc", "w1", time.Minute); err != nil || ok {
			t.Fatalf("w1 was granted its own live claim again: %v %v", ok, err)
		}
		if err := db.ReleasePlanClaim(ctx, w1); err != nil {
			t.Fatal(err)
		}
		w2, ok, err := db.ClaimPlan(ctx, "abc", "w2", -time.Second)
		if err != nil || !ok {
			t.Fatalf("w2 after release: %v %v", ok, err)
		}
		if w2.Epoch != w1.Epoch+1 {
			t.Fatalf("epochs %d then %d, want consecutive", w1.Epoch, w2.Epoch)
		}
		// w2's claim has already expired: w1 may take it over.
		if _, ok, err := db.ClaimPlan(ctx, "abc", "w1", time.Minute); err != nil || !ok {
			t.Fatalf("w1 over an expired claim: %v %v", ok, err)
		}
	})
}

// TestPlanClaimFencing takes a plan over from a worker whose claim ran out, the way
// a second replica does when the first stalls in a slow GitHub call: the first
// worker can no longer renew, record a step or release the claim, whatever it
// believes; the new holder can.
func TestPlanClaimFencing(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		pl, _, err := db.CreatePlan(ctx, newPlan(team.ID, "abc", ""), store.PlanEvent{})
		if err != nil {
			t.Fatal(err)
		}
		stale, ok, err := db.ClaimPlan(ctx, "abc", "w1", -time.Second)
		if err != nil || !ok {
			t.Fatalf("w1 claim: %v %v", ok, err)
		}
		if _, err := db.RenewPlanClaim(ctx, stale, time.Minute); !errors.Is(err, store.ErrClaimLost) {
			t.Fatalf("renewal of a claim that ran out: %v, want ErrClaimLost", err)
		}
		pl.Status = "preparing"
		if _, _, err := db.UpdateClaimedPlan(ctx, stale, pl, store.PlanEvent{Step: "decide"}, store.LockChange{}); !errors.Is(err, store.ErrClaimLost) {
			t.Fatalf("update under a claim that ran out: %v, want ErrClaimLost", err)
		}

		current, ok, err := db.ClaimPlan(ctx, "abc", "w2", time.Minute)
		if err != nil || !ok {
			t.Fatalf("w2 over the expired claim: %v %v", ok, err)
		}
		// The same owner name at an old epoch is not the holder either (a process
		// that lost its claim and took it again runs under the new epoch only).
		for _, c := range []store.PlanClaim{stale, {Code: "abc", Owner: "w2", Epoch: stale.Epoch}} {
			if _, err := db.RenewPlanClaim(ctx, c, time.Minute); !errors.Is(err, store.ErrClaimLost) {
				t.Fatalf("renewal by %s: %v, want ErrClaimLost", c, err)
			}
			if _, _, err := db.UpdateClaimedPlan(ctx, c, pl, store.PlanEvent{Step: "decide"}, store.LockChange{}); !errors.Is(err, store.ErrClaimLost) {
				t.Fatalf("update by %s: %v, want ErrClaimLost", c, err)
			}
			if err := db.ReleasePlanClaim(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := db.PlanByCode(ctx, "abc"); err != nil || got.Status != "deciding" || got.ClaimedBy != "w2" || got.ClaimEpoch != current.Epoch {
			t.Fatalf("after the stale worker's attempts: %+v %v", got, err)
		}

		renewed, err := db.RenewPlanClaim(ctx, current, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if !renewed.ExpiresAt.After(current.ExpiresAt) {
			t.Fatalf("renewal moved the expiry from %s to %s", current.ExpiresAt, renewed.ExpiresAt)
		}
		if _, _, err := db.UpdateClaimedPlan(ctx, current, pl, store.PlanEvent{Step: "decide"}, store.LockChange{}); err != nil {
			t.Fatalf("update by the holder: %v", err)
		}
		events, err := db.PlanEvents(ctx, "abc")
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 2 || events[0].Worker != "" || events[1].Step != "decide" || events[1].Worker != "w2" {
			t.Fatalf("events %+v, want the request and w2's decide", events)
		}
		if err := db.ReleasePlanClaim(ctx, current); err != nil {
			t.Fatal(err)
		}
		if _, err := db.RenewPlanClaim(ctx, current, time.Minute); !errors.Is(err, store.ErrClaimLost) {
			t.Fatalf("renewal of a released claim: %v, want ErrClaimLost", err)
		}
	})
}

// TestUpdatePlanKeepsTheClaim saves a plan from copies read before and during a
// worker's claim (a webhook recording a merge while the worker runs the plan): the
// claim is neither dropped nor brought back, since only ClaimPlan, RenewPlanClaim and
// ReleasePlanClaim move it.
func TestUpdatePlanKeepsTheClaim(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		unclaimed, _, err := db.CreatePlan(ctx, newPlan(team.ID, "abc", ""), store.PlanEvent{})
		if err != nil {
			t.Fatal(err)
		}
		w1, ok, err := db.ClaimPlan(ctx, "abc", "w1", time.Minute)
		if err != nil || !ok {
			t.Fatalf("w1 claim: %v %v", ok, err)
		}
		unclaimed.StatusReason = "saved from a copy read before the claim"
		claimed, err := db.UpdatePlan(ctx, unclaimed, store.PlanEvent{Step: "webhook"})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := db.PlanByCode(ctx, "abc"); err != nil || got.ClaimedBy != "w1" {
			t.Fatalf("claim after an update from an unclaimed copy: %q %v, want w1", got.ClaimedBy, err)
		}
		if _, ok, err := db.ClaimPlan(ctx, "abc", "w2", time.Minute); err != nil || ok {
			t.Fatalf("w2 took the claim an update dropped: %v %v", ok, err)
		}
		if err := db.ReleasePlanClaim(ctx, w1); err != nil {
			t.Fatal(err)
		}
		fresh, err := db.PlanByCode(ctx, "abc")
		if err != nil {
			t.Fatal(err)
		}
		fresh.ClaimedBy = "w1" // a copy read while w1 held it
		fresh.Version = claimed.Version
		if _, err := db.UpdatePlan(ctx, fresh, store.PlanEvent{Step: "webhook"}); err != nil {
			t.Fatal(err)
		}
		if got, err := db.PlanByCode(ctx, "abc"); err != nil || got.ClaimedBy != "" {
			t.Fatalf("released claim brought back by an update: %q %v", got.ClaimedBy, err)
		}
	})
}
