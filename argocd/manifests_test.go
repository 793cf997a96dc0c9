package argocd

import (
	"strings"
	"testing"
)

func TestDecodeApplicationsYAML(t *testing.T) {
	const manifests = `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
---
# the storefront
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: web, namespace: argocd}
spec:
  source: {repoURL: "https://github.com/example/deploy.git", path: apps/web, targetRevision: main}
  syncPolicy: {automated: {selfHeal: true}}
status: {sourceType: Kustomize}
---
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: worker, namespace: argocd}
spec:
  source: {repoURL: "git@github.com:example/deploy.git", path: plain/worker}
`
	apps, err := DecodeApplicationsYAML([]byte(manifests))
	if err != nil {
		t.Fatal(err)
	}
	if len(apps) != 2 {
		t.Fatalf("decoded %d applications, want web and worker: %+v", len(apps), apps)
	}
	web, worker := apps[0], apps[1]
	if web.Key().String() != "argocd/web" || web.Level() != LevelSelfHeal || web.SourceType() != "Kustomize" {
		t.Errorf("web decoded as %s, level %s, source type %q", web.Key(), web.Level(), web.SourceType())
	}
	if src, ok := web.PrimarySource(); !ok || src.Path != "apps/web" || src.TargetRevision != "main" {
		t.Errorf("web source %+v", src)
	}
	if src, ok := worker.PrimarySource(); worker.Name != "worker" || !ok || src.RepoURL != "git@github.com:example/deploy.git" {
		t.Errorf("worker decoded as %+v", worker)
	}

	json := `{"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": {"name": "api", "namespace": "argocd"}}`
	if apps, err := DecodeApplicationsYAML([]byte(json)); err != nil || len(apps) != 1 || apps[0].Name != "api" {
		t.Errorf("a JSON manifest: %+v, %v", apps, err)
	}
	if apps, err := DecodeApplicationsYAML([]byte("kind: ConfigMap\n")); err != nil || len(apps) != 0 {
		t.Errorf("no Application among the documents: %+v, %v; want none and no error", apps, err)
	}
}

func TestDecodeApplicationsYAMLErrors(t *testing.T) {
	cases := map[string]struct {
		manifest string
		want     string
	}{
		"not YAML":               {"kind: Application\nmetadata: [unclosed\n", "parse document 1"},
		"a wrong field type":     {"kind: ConfigMap\n---\nkind: Application\nmetadata: {name: web}\nspec: {syncPolicy: {automated: yes}}\n", "document 2: decode application"},
		"an Application unnamed": {"kind: Application\nmetadata: {namespace: argocd}\n", "metadata.name is empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			apps, err := DecodeApplicationsYAML([]byte(tc.manifest))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeApplicationsYAML = %+v, %v; want an error containing %q", apps, err, tc.want)
			}
		})
	}
}
