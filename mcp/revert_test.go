package mcp_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/mcp"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store"
)

// TestGetChangeOfARevertSaysWhatItReverts: get_change of the revert a
// rollback_change opens showed the original request as the revert's change
// ({"replicas": {"count": 4}}), as if that change were asked for again; the
// revert's change now says it reverts the plan, which merge commit, and the change
// it undoes.
func TestGetChangeOfARevertSaysWhatItReverts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cs := e.connect(t, e.change)
	proposed := mustOK(t, cs, mcp.ToolProposeGitChange, map[string]any{"cluster": "prod", "target": webTarget,
		"change": map[string]any{"replicas": map[string]any{"count": 4}}, "reason": "traffic", "requested_by": "alice", "idempotency_key": "scale"})
	code, _ := proposed["code"].(string)
	p, err := e.db.PlanByCode(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	merge := strings.Repeat("c", 40)
	p.Status, p.MergeSHA = string(plan.StatusMerged), merge
	if _, err := e.db.UpdatePlan(ctx, p, store.PlanEvent{Actor: "system", Step: "pull_request"}); err != nil {
		t.Fatal(err)
	}
	rb := mustOK(t, cs, mcp.ToolRollbackChange, map[string]any{"code": code, "reason": "errors", "requested_by": "bob"})
	revert, _ := rb["code"].(string)

	got := mustOK(t, cs, mcp.ToolGetChange, map[string]any{"code": revert})
	view, _ := got["change"].(map[string]any)
	want := map[string]any{"revert": map[string]any{"plan": code, "merge_commit": merge,
		"undoes": map[string]any{"replicas": map[string]any{"count": float64(4)}}}}
	if !reflect.DeepEqual(view["change"], want) {
		t.Errorf("get_change of the revert: change %v, want %v", view["change"], want)
	}
	if view["rollback_of"] != code {
		t.Errorf("get_change of the revert: rollback_of %v, want %s", view["rollback_of"], code)
	}
}
