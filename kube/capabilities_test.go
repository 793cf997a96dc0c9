package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"

	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
	"github.com/kukie/kukie-gitops/render"
)

// probeCRD serves kind Probe of capabilities.kukie.example/v1.
func probeCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "probes.capabilities.kukie.example"},
		"spec": map[string]any{
			"group": "capabilities.kukie.example", "scope": "Namespaced",
			"names": map[string]any{"plural": "probes", "singular": "probe", "kind": "Probe", "listKind": "ProbeList"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
}

// capsChartFiles is a chart that renders its Probe only where the cluster serves
// Probes, and names the Kubernetes version it was rendered for.
var capsChartFiles = map[string]string{
	"Chart.yaml": "apiVersion: v2\nname: caps\nversion: 0.1.0\n",
	"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: caps
data:
  kubeVersion: {{ .Capabilities.KubeVersion.Version | quote }}
  deployments: {{ .Capabilities.APIVersions.Has "apps/v1/Deployment" | quote }}
`,
	"templates/probe.yaml": `{{- if .Capabilities.APIVersions.Has "capabilities.kukie.example/v1/Probe" }}
apiVersion: capabilities.kukie.example/v1
kind: Probe
metadata:
  name: caps
{{- end }}
`,
}

// The capabilities are the API server's, as Argo CD computes them: its version
// without a vendor suffix, and group/version and group/version/Kind of every
// resource that can be listed and watched. A chart branching on them renders as
// for that cluster: its Probe appears once the cluster serves Probes.
func TestCapabilitiesAreTheAPIServers(t *testing.T) {
	env := kubetest.Start(t)
	c := clusterFor(t, env.Kubeconfig, kube.Options{})
	ctx := context.Background()

	disc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	info, err := disc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	served, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		t.Fatal(err)
	}

	repo := t.TempDir()
	for name, content := range capsChartFiles {
		p := filepath.Join(repo, "chart", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	renderFor := func(caps kube.Capabilities) map[string]map[string]any {
		t.Helper()
		app := render.Application{Name: "caps", Path: "chart", SourceType: render.SourceHelm, Namespace: "shop"}
		app.SetCluster(caps.KubeVersion, caps.APIVersions)
		objs, err := render.Render(ctx, repo, app)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]any{}
		for _, o := range objs {
			out[o.Manifest["kind"].(string)] = o.Manifest
		}
		return out
	}

	before, err := c.Capabilities(ctx, kube.Fresh)
	if err != nil {
		t.Fatal(err)
	}
	if before.KubeVersion != served.String() {
		t.Fatalf("kube version %q, the API server serves %q", before.KubeVersion, info.GitVersion)
	}
	if !slices.IsSorted(before.APIVersions) {
		t.Fatalf("API versions not sorted: %v", before.APIVersions)
	}
	for _, want := range []string{"v1", "v1/ConfigMap", "apps/v1", "apps/v1/Deployment", "argoproj.io/v1alpha1/Application"} {
		if !slices.Contains(before.APIVersions, want) {
			t.Errorf("API versions lack %s", want)
		}
	}
	// Argo CD's cluster cache holds only what it can list and watch.
	for _, absent := range []string{"authorization.k8s.io/v1/SelfSubjectAccessReview", "apps/v1/Scale", "capabilities.kukie.example/v1/Probe"} {
		if slices.Contains(before.APIVersions, absent) {
			t.Errorf("API versions hold %s", absent)
		}
	}
	objs := renderFor(before)
	if cm := objs["ConfigMap"]["data"].(map[string]any); cm["kubeVersion"] != "v"+served.String() || cm["deployments"] != "true" {
		t.Fatalf("chart rendered %v for a cluster of %s", cm, info.GitVersion)
	}
	if _, ok := objs["Probe"]; ok {
		t.Fatal("the chart rendered a Probe for a cluster that does not serve Probes")
	}

	env.Create(t, probeCRD())
	var after kube.Capabilities
	for deadline := time.Now().Add(30 * time.Second); ; {
		if after, err = c.Capabilities(ctx, kube.Fresh); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(after.APIVersions, "capabilities.kukie.example/v1/Probe") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Probe CRD is not served: %v", after.APIVersions)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !slices.Contains(after.APIVersions, "capabilities.kukie.example/v1") {
		t.Fatalf("API versions lack the group version of the Probe: %v", after.APIVersions)
	}
	if _, ok := renderFor(after)["Probe"]; !ok {
		t.Fatal("the chart did not render its Probe for a cluster that serves Probes")
	}
}
