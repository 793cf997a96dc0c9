package render

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// A change made in an Application manifest (app-of-apps) is rolled back by
// reverting that manifest once the cluster's Application carries the change:
// the parent's Application gets its parameter back, and nothing else renders
// differently.
func TestRevertOfAnApplicationManifestEdit(t *testing.T) {
	ctx := context.Background()
	files := map[string]string{}
	for p, data := range relSnapshot(t, filepath.Join(goldenRoot, "helm-app-of-apps-parameter", "input")) {
		files[p] = string(data)
	}
	apps := func(replicas string) []Application {
		return []Application{
			{Name: "web-prod", Path: "charts/web", SourceType: SourceHelm, Namespace: "prod", Helm: HelmOptions{ReleaseName: "web-prod",
				ValueFiles: []string{"../../envs/prod/values.yaml"}, Parameters: []HelmParameter{{Name: "image.tag", Value: "1.25.4"}, {Name: "replicaCount", Value: replicas}}}},
			{Name: "root", Path: "argocd/apps", SourceType: SourceDirectory, Namespace: "argocd"},
		}
	}
	origDir := testtree.Write(t, files)
	orig, err := Plan(ctx, Request{RepoDir: origDir, Apps: apps("4"), App: "web-prod",
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web-prod"}, Change: Change{Replicas: &Replicas{Count: 3}}})
	if err != nil {
		t.Fatalf("plan the change: %v", err)
	}
	const manifest = "argocd/apps/web.yaml"
	if len(orig.Edits) != 1 || orig.Edits[0].Path != manifest {
		t.Fatalf("the change edits %v, want %s alone", orig.Edits, manifest)
	}
	now := map[string]string{}
	for p, data := range files {
		now[p] = data
	}
	now[manifest] = string(orig.Edits[0].New)
	// Merged and synced: the cluster's Application has the new value.
	res, err := Revert(ctx, RevertRequest{RepoDir: testtree.Write(t, now), Apps: apps("3"), App: "web-prod", OriginalDir: origDir, Edits: orig.Edits})
	if err != nil {
		t.Fatalf("revert: %v", err)
	}
	if got, _ := reverted(t, res, manifest); got != files[manifest] {
		t.Fatalf("reverted %s:\n%s", manifest, got)
	}
	var diff []string
	for _, d := range res.ClusterDiff {
		diff = append(diff, d.App+" "+d.Kind+" "+d.Name)
		for _, c := range d.Changes {
			diff = append(diff, "  "+c.Path+": "+c.Before+" -> "+c.After)
		}
	}
	want := "root Application web-prod\n  spec.source.helm.parameters[name=replicaCount].value: 3 -> 4"
	if got := strings.Join(diff, "\n"); got != want {
		t.Fatalf("the revert's cluster diff:\n%s\nwant:\n%s", got, want)
	}
}
