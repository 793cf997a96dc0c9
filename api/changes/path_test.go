package changes

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/clusteraccess"
	"github.com/kukie/kukie-gitops/objref"
	"github.com/kukie/kukie-gitops/plan"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// directCluster decides that nothing is managed by Argo CD; the pipeline asks it
// nothing else before a path mismatch stops the request.
type directCluster struct{ plan.Cluster }

func (directCluster) Decide(_ context.Context, _ clusteraccess.Ref, t objref.Target) argocd.Decision {
	ref := argocd.ResourceRef{Group: "apps", Version: "v1", Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}
	reason := "No Argo CD Application tracks Deployment " + t.Namespace + "/" + t.Name + "."
	return argocd.Decision{Path: argocd.PathDirect, Known: true, Level: argocd.LevelNone, Reason: reason,
		Targets: []argocd.TargetDecision{{Ref: ref, Path: argocd.PathDirect, Known: true}}}
}

// TestChangeWithAnotherExpectedPathIsRefusedWithTheDecision: the code decides the
// path, not the caller. A request whose expected_path differs from the pipeline's
// decision is refused with the documented status and path_mismatch, and the body
// carries the current decision in details.decision.
func TestChangeWithAnotherExpectedPathIsRefusedWithTheDecision(t *testing.T) {
	doc := loadDoc(t)
	db := storetest.SQLite(t)
	p := plan.New(plan.Deps{Store: db, Clusters: directCluster{}}, plan.Config{})
	t.Cleanup(p.Close)
	srv, token := changesServer(t, db, p)

	body := `{"cluster":"prod","target":{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"},` +
		`"change":{"replicas":{"count":4}},"reason":"traffic","requested_by":"alice","expected_path":"git"}`
	status, answerBody := callAs(srv, token, "POST", "/api/v1/changes", body)

	if status != http.StatusUnprocessableEntity {
		t.Fatalf("POST with expected_path git on a direct resource = %d, want 422: %s", status, answerBody)
	}
	resp, ok := doc.Paths["/api/v1/changes"]["post"].Responses[fmt.Sprint(status)]
	if !ok || !strings.HasSuffix(resp.Content["application/json"].Schema.Ref, "/Error") {
		t.Errorf("status %d of POST /api/v1/changes is not documented as an Error", status)
	}
	if err := doc.conforms(resp.Content["application/json"].Schema, answerBody); err != nil {
		t.Errorf("answer does not match the document: %v\n%s", err, answerBody)
	}
	var answer struct {
		Error   string `json:"error"`
		Reason  string `json:"reason"`
		Details struct {
			Decision *plan.DecisionInfo `json:"decision"`
		} `json:"details"`
		Plan *ChangeView `json:"plan"`
	}
	if err := json.Unmarshal(answerBody, &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Error != plan.CodePathMismatch || !strings.Contains(answer.Reason, "expected the git path") {
		t.Errorf("error %q reason %q, want %s saying what was expected", answer.Error, answer.Reason, plan.CodePathMismatch)
	}
	d := answer.Details.Decision
	if d == nil || d.Path != argocd.PathDirect || !d.Known || !strings.Contains(d.Reason, "No Argo CD Application tracks") {
		t.Errorf("details.decision %+v, want the current decision: direct, known, with its reason", d)
	}
	if answer.Plan == nil || answer.Plan.Status != string(plan.StatusRefused) || answer.Plan.Path != string(argocd.PathDirect) {
		t.Errorf("plan in the answer %+v, want refused on the direct path", answer.Plan)
	}
}
