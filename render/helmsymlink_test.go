package render

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// linkedHelpersChart is a chart whose named templates are a symlink to a file
// shared by the repository's charts; the deployment includes them.
var linkedHelpersChart = map[string]string{
	"charts/web/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
	"charts/web/values.yaml": "replicaCount: 1\n",
	"charts/web/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "shared.name" . }}
  labels: {{ include "shared.labels" . | nindent 4 }}
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: ghcr.io/example/web:1.0.0
`,
	"shared/helm/_helpers.tpl": `{{- define "shared.name" -}}{{ .Chart.Name }}{{- end -}}
{{- define "shared.labels" -}}
team: storefront
{{- end -}}
`,
	"shared/helm/unused.tpl": "{{- define \"shared.unused\" -}}x{{- end -}}\n",
}

var linkedHelpersApp = Application{Name: "web", Path: "charts/web", SourceType: SourceHelm, Namespace: "web"}

// inflatedApp inflates the same chart with kustomize's helmCharts.
var inflatedApp = Application{Name: "inflated", Path: "apps/inflated", SourceType: SourceKustomize, Namespace: "inflated"}

// TestHelmChartReadsSymlinksInsideTheRepository plans a change to a chart whose
// templates/_helpers.tpl is a symlink to a file elsewhere in the repository:
// the chart renders with the linked templates, as helm reads the chart
// directory on disk.
func TestHelmChartReadsSymlinksInsideTheRepository(t *testing.T) {
	repo := testtree.Write(t, linkedHelpersChart)
	writeLinks(t, repo, map[string]string{"charts/web/templates/_helpers.tpl": "../../../shared/helm/_helpers.tpl"})
	res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{linkedHelpersApp},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Replicas: &Replicas{Count: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Edits) != 1 || res.Edits[0].Path != "charts/web/values.yaml" || string(res.Edits[0].New) != "replicaCount: 3\n" {
		t.Fatalf("edits = %+v, want charts/web/values.yaml set to 3", res.Edits)
	}
	objs, err := Render(context.Background(), repo, linkedHelpersApp)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("render = %v, want one Deployment", objs)
	}
	labels, _ := objs[0].Manifest["metadata"].(map[string]any)["labels"].(map[string]any)
	if labels["team"] != "storefront" {
		t.Fatalf("labels = %v, want those of the linked helpers", labels)
	}
}

// TestHelmChartSymlinkTargetAffectsTheApp: a file a chart reads through a
// symlink counts among the app's files under its own name, so an edit of the
// shared helpers is one of the app's, whether it deploys the chart or
// inflates it with kustomize's helmCharts; so is a file of a directory the
// chart links to; a file beside them the chart does not link is not.
func TestHelmChartSymlinkTargetAffectsTheApp(t *testing.T) {
	files := maps.Clone(linkedHelpersChart)
	files["apps/inflated/kustomization.yaml"] = "helmGlobals:\n  chartHome: ../../charts\nhelmCharts:\n  - name: web\n    releaseName: web\n"
	files["shared/crds/widgets.yaml"] = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
	repo := testtree.Write(t, files)
	writeLinks(t, repo, map[string]string{
		"charts/web/templates/_helpers.tpl": "../../../shared/helm/_helpers.tpl",
		"charts/web/crds":                   "../../shared/crds",
	})
	both := []string{"web", "inflated"}
	cases := map[string][]string{
		"shared/helm/_helpers.tpl":             both,
		"charts/web/templates/_helpers.tpl":    both,
		"charts/web/templates/deployment.yaml": both,
		"shared/crds/widgets.yaml":             both,
		"shared/helm/unused.tpl":               nil,
	}
	checkAffected(t, repo, []Application{linkedHelpersApp, inflatedApp}, cases)
}

// TestHelmChartSymlinkLeavingTheRepositoryIsRefused: a chart file linked to a
// file outside the repository is refused, naming the link.
func TestHelmChartSymlinkLeavingTheRepositoryIsRefused(t *testing.T) {
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "_helpers.tpl"), []byte(linkedHelpersChart["shared/helm/_helpers.tpl"]), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := testtree.Write(t, linkedHelpersChart)
	writeLinks(t, repo, map[string]string{"charts/web/templates/_helpers.tpl": filepath.Join(outside, "_helpers.tpl")})
	_, err := Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{linkedHelpersApp},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Change: Change{Replicas: &Replicas{Count: 3}}})
	var ref *Refusal
	if !errors.As(err, &ref) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	const want = "charts/web/templates/_helpers.tpl is a symlink to a path outside the repository"
	if ref.Code != CodeSymlinkEscape || !strings.Contains(ref.Reason, want) {
		t.Fatalf("refused (%s): %s\nwant (%s) with: %s", ref.Code, ref.Reason, CodeSymlinkEscape, want)
	}
}
