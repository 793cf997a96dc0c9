package store_test

import (
	"context"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// An administrative command's action is recorded as the operator's, with its
// details as a JSON object, for a team or for none.
func TestRecordOperatorAction(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "ops")
		if err != nil {
			t.Fatal(err)
		}
		if err := db.RecordOperatorAction(ctx, team.ID, "team.create", "team", team.ID, map[string]string{"name": "ops"}); err != nil {
			t.Fatal(err)
		}
		if err := db.RecordOperatorAction(ctx, "", "webhook.replay", "webhook_delivery", "d1", nil); err != nil {
			t.Fatal(err)
		}
		got, err := db.ListAuditEvents(ctx, store.AuditFilter{TeamID: team.ID})
		if err != nil || len(got) != 1 {
			t.Fatalf("team events = %+v, %v", got, err)
		}
		if e := got[0]; e.Actor != store.OperatorActor || e.Action != "team.create" || e.SubjectType != "team" || e.SubjectID != team.ID || string(e.Detail) != `{"name":"ops"}` {
			t.Fatalf("team event = %+v", e)
		}
		all, err := db.ListAuditEvents(ctx, store.AuditFilter{SubjectType: "webhook_delivery"})
		if err != nil || len(all) != 1 || all[0].TeamID != "" || all[0].Actor != store.OperatorActor || string(all[0].Detail) != "{}" {
			t.Fatalf("delivery events = %+v, %v", all, err)
		}
	})
}
