package render

import (
	"context"
	"testing"

	"github.com/kukie/kukie-gitops/internal/testtree"
	"github.com/kukie/kukie-gitops/objref"
)

// A value only a subchart archive under charts/ holds by default (as helm
// dependency build leaves it) is set under the subchart's alias in the app's
// values file.
func TestHelmSetsASubchartArchiveDefaultUnderItsKey(t *testing.T) {
	repo := testtree.Write(t, map[string]string{
		"charts/platform/Chart.yaml":  "apiVersion: v2\nname: platform\nversion: 0.3.0\ndependencies:\n  - name: kv\n    version: 1.2.0\n    repository: https://charts.example.com\n    alias: cache\n",
		"charts/platform/values.yaml": "greeting: hello\n",
		"charts/platform/charts/kv-1.2.0.tgz": chartArchiveWith(t, "kv", map[string]string{
			"Chart.yaml":  "apiVersion: v2\nname: kv\nversion: 1.2.0\n",
			"values.yaml": "replicas: 1\nimage: redis:7.2\n",
			"templates/sts.yaml": "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: {{ .Release.Name }}-cache\nspec:\n  replicas: {{ .Values.replicas }}\n" +
				"  selector:\n    matchLabels: {app: cache}\n  template:\n    metadata:\n      labels: {app: cache}\n    spec:\n      containers:\n        - name: kv\n          image: {{ .Values.image }}\n",
		}),
		"envs/prod-values.yaml": "# prod\ncache:\n  replicas: 3   # one per zone\n",
	})
	app := Application{Name: "platform-prod", Path: "charts/platform", SourceType: SourceHelm, Namespace: "prod",
		Helm: HelmOptions{ReleaseName: "platform", ValueFiles: []string{"../../envs/prod-values.yaml"}}}
	res, err := Plan(context.Background(), Request{RepoDir: repo, Apps: []Application{app},
		Target: objref.Target{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "platform-cache"},
		Change: Change{Image: &Image{Container: "kv", Name: "redis", Tag: "7.4"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Edits) != 1 || res.Edits[0].Path != "envs/prod-values.yaml" {
		t.Fatalf("edits %+v, want envs/prod-values.yaml alone", res.Edits)
	}
	want := "# prod\ncache:\n  replicas: 3   # one per zone\n  image: redis:7.4\n"
	if got := string(res.Edits[0].New); got != want {
		t.Fatalf("envs/prod-values.yaml:\n%s\nwant:\n%s", got, want)
	}
}
