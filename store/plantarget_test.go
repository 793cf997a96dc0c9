package store_test

import (
	"context"
	"testing"

	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// A plan's target is kept in four columns. Rows written before the target became
// objref.Target (inserted here by hand, in the columns migration 0003 made) read into
// it, are found by it, and are written back with the same column values.
func TestPlanTargetReadsAndKeepsTheRowsOfExistingPlans(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "team-a")
		if err != nil {
			t.Fatal(err)
		}
		rows := map[string]objref.Target{
			"namespaced": {APIVersion: "apps/v1", Kind: "Deployment", Namespace: "shop", Name: "web"},
			"cluster":    {APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "view"},
			// Kept as written: a malformed apiVersion is refused with its reason by the
			// pipeline, never rewritten by the store.
			"malformed": {APIVersion: "a/b/c", Kind: "Deployment", Namespace: "shop", Name: "odd"},
		}
		for code, tgt := range rows {
			if _, err := db.ExecContext(ctx, db.Rebind(`INSERT INTO plans (code, team_id, cluster, target_api_version, target_kind,
				target_namespace, target_name, change_json, status, payload, version, created_at, updated_at)
				VALUES (?, ?, 'prod', ?, ?, ?, ?, '{"replicas":{"count":2}}', 'refused', '{}', 1, 1000, 1000)`),
				code, team.ID, tgt.APIVersion, tgt.Kind, tgt.Namespace, tgt.Name); err != nil {
				t.Fatalf("insert plan %s in the existing row format: %v", code, err)
			}
		}
		for code, want := range rows {
			p, err := db.PlanByCode(ctx, code)
			if err != nil {
				t.Fatal(err)
			}
			if p.Target != want {
				t.Errorf("plan %s: target %+v, want %+v", code, p.Target, want)
			}
			found, err := db.ListPlans(ctx, store.PlanFilter{TeamID: team.ID, Target: &want})
			if err != nil {
				t.Fatal(err)
			}
			if len(found) != 1 || found[0].Code != code {
				t.Errorf("plans on %s: %d found, want plan %s alone", want, len(found), code)
			}
			p.Status = "failed"
			if _, err := db.UpdatePlan(ctx, p, store.PlanEvent{Actor: "system", FromStatus: "refused", ToStatus: "failed"}); err != nil {
				t.Fatal(err)
			}
			var col struct {
				APIVersion string `db:"target_api_version"`
				Kind       string `db:"target_kind"`
				Namespace  string `db:"target_namespace"`
				Name       string `db:"target_name"`
			}
			if err := db.GetContext(ctx, &col, db.Rebind(`SELECT target_api_version, target_kind, target_namespace, target_name
				FROM plans WHERE code = ?`), code); err != nil {
				t.Fatal(err)
			}
			if got := (objref.Target{APIVersion: col.APIVersion, Kind: col.Kind, Namespace: col.Namespace, Name: col.Name}); got != want {
				t.Errorf("plan %s written back with target columns %+v, want %+v", code, got, want)
			}
		}
	})
}
