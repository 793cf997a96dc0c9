package plan_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/render"
	"github.com/kukie/kukie-gitops/store"
)

// TestIdempotencyKeyOfAnotherChangeIsRefused: the same key with the same request
// is the same change (a retry after a lost answer), reworded or not; the key sent
// with another cluster, target or change is refused as a conflict naming the change
// that holds it, instead of answering that change as if the new request were it.
func TestIdempotencyKeyOfAnotherChangeIsRefused(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.pipeline(plan.Hooks{})

		first, created, err := p.Submit(ctx, e.team.ID, "team:shop", scale(4, "chat-7"))
		if err != nil || !created {
			t.Fatalf("first request: created=%v %v", created, err)
		}
		retry := scale(4, "chat-7")
		retry.Reason = "more traffic, as asked before"
		again, created, err := p.Submit(ctx, e.team.ID, "team:shop", retry)
		if err != nil || created || again.Code != first.Code {
			t.Fatalf("retry: plan %s created=%v %v, want plan %s again", again.Code, created, err, first.Code)
		}

		other := map[string]plan.Request{"change": scale(5, "chat-7"), "cluster": scale(4, "chat-7"), "target": scale(4, "chat-7")}
		other["cluster"] = func(r plan.Request) plan.Request { r.Cluster = "staging"; return r }(other["cluster"])
		other["target"] = func(r plan.Request) plan.Request { r.Target.Name = "api"; return r }(other["target"])
		for name, req := range other {
			t.Run(name, func(t *testing.T) {
				got, created, err := p.Submit(ctx, e.team.ID, "team:shop", req)
				e, ok := plan.AsError(err)
				if !ok || e.Code != plan.CodeConflict {
					t.Fatalf("another %s under the key: plan %s created=%v err=%v, want %s", name, got.Code, created, err, plan.CodeConflict)
				}
				for _, want := range []string{"chat-7", first.Code} {
					if !strings.Contains(e.Reason, want) {
						t.Errorf("reason %q does not name %s", e.Reason, want)
					}
				}
			})
		}
		plans, err := db.ListPlans(ctx, store.PlanFilter{TeamID: e.team.ID})
		if err != nil || len(plans) != 1 {
			t.Fatalf("%d plans (%v), want the first alone", len(plans), err)
		}
	})
}

// TestIdempotencyConflictOfASecretShowsNoValue: the key of a Secret's change sent
// again with other values is refused as a conflict that names the change holding
// the key but quotes neither change, since a view of the change shows none of its
// values either (failed before: the refusal quoted the stored change, the Secret's
// value in it).
func TestIdempotencyConflictOfASecretShowsNoValue(t *testing.T) {
	t.Parallel()
	forEachDBAtOnce(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db)
		ctx := context.Background()
		p := e.pipeline(plan.Hooks{})
		secret := func(value string) plan.Request {
			return plan.Request{Cluster: "prod", Target: objref.Target{APIVersion: "v1", Kind: "Secret", Namespace: "shop", Name: "db"},
				Change: render.Change{Patch: &render.Patch{Merge: map[string]any{"stringData": map[string]any{"password": value}}}},
				Reason: "rotate", RequestedBy: "alice", IdempotencyKey: "chat-9"}
		}
		first, created, err := p.Submit(ctx, e.team.ID, "team:shop", secret("stored-s3cret-1"))
		if err != nil || !created {
			t.Fatalf("first request: created=%v %v", created, err)
		}
		_, _, err = p.Submit(ctx, e.team.ID, "team:shop", secret("sent-s3cret-2"))
		pe, ok := plan.AsError(err)
		if !ok || pe.Code != plan.CodeConflict || !strings.Contains(pe.Reason, first.Code) {
			t.Fatalf("the key again with another value: %v, want a conflict naming %s", err, first.Code)
		}
		for _, v := range []string{"stored-s3cret-1", "sent-s3cret-2"} {
			if strings.Contains(pe.Reason, v) {
				t.Errorf("the conflict quotes %s: %s", v, pe.Reason)
			}
		}
	})
}
