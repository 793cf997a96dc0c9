package store_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// hexCodec stores payloads hex-encoded behind the plan code, so a test sees both
// that the column holds the codec's form and that reads undo it.
type hexCodec struct{ failOpen bool }

func (hexCodec) SealPayload(code string, payload []byte) ([]byte, error) {
	return []byte(`"` + code + ":" + hex.EncodeToString(payload) + `"`), nil
}

func (c hexCodec) OpenPayload(code string, stored []byte) ([]byte, error) {
	if c.failOpen {
		return nil, errors.New("wrong key")
	}
	body, ok := strings.CutPrefix(strings.Trim(string(stored), `"`), code+":")
	if !ok {
		return nil, errors.New("sealed for another plan")
	}
	return hex.DecodeString(body)
}

func TestPlanPayloadsGoThroughTheCodec(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		team, err := db.CreateTeam(ctx, "shop")
		if err != nil {
			t.Fatal(err)
		}
		db.SealPlanPayloads(hexCodec{})
		p := newPlan(team.ID, "sealed1", "k1")
		p.Payload = []byte(`{"edits":[{"path":"a.yaml","new":"c2VjcmV0"}]}`)
		created, _, err := db.CreatePlan(ctx, p, store.PlanEvent{Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		var column string
		if err := db.GetContext(ctx, &column, db.Rebind(`SELECT payload FROM plans WHERE code = ?`), "sealed1"); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(column, "c2VjcmV0") || !strings.HasPrefix(column, `"sealed1:`) {
			t.Fatalf("stored payload %s is not the codec's form", column)
		}
		created.Payload = []byte(`{"edits":[{"path":"a.yaml","new":"bmV3"}]}`)
		if _, err := db.UpdatePlan(ctx, created, store.PlanEvent{Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		for name, read := range map[string]func() (store.Plan, error){
			"by code": func() (store.Plan, error) { return db.PlanByCode(ctx, "sealed1") },
			"by key":  func() (store.Plan, error) { return db.PlanByIdempotencyKey(ctx, team.ID, "k1") },
			"listed": func() (store.Plan, error) {
				l, err := db.ListPlans(ctx, store.PlanFilter{TeamID: team.ID})
				if err != nil || len(l) != 1 {
					return store.Plan{}, errors.Join(err, errors.New("want one plan"))
				}
				return l[0], nil
			},
		} {
			got, err := read()
			if err != nil || string(got.Payload) != `{"edits":[{"path":"a.yaml","new":"bmV3"}]}` {
				t.Errorf("read %s: payload %s (%v), want the updated one in clear", name, got.Payload, err)
			}
		}
		// A payload that does not open is an error, never an empty plan.
		db.SealPlanPayloads(hexCodec{failOpen: true})
		if _, err := db.PlanByCode(ctx, "sealed1"); err == nil || !strings.Contains(err.Error(), "wrong key") {
			t.Errorf("read with a failing codec: %v, want its error", err)
		}
		if _, err := db.ListPlans(ctx, store.PlanFilter{TeamID: team.ID}); err == nil {
			t.Error("list with a failing codec succeeded")
		}
	})
}
