//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/helmrepo"
	"github.com/kukie/kukie-gitops/render"
)

// chartApp is an Application deploying a chart from a Helm repository or an OCI
// registry, its values from Git through a ref source (the usual shape of a
// third-party chart in Argo CD).
type chartApp struct {
	// repo is the chart source's repository as Argo CD's repository secret for it
	// describes it.
	repo argocdharness.Repository
	// chart and ref are the Application's two sources; refSHA is the commit the
	// ref source's targetRevision resolves to.
	chart, ref map[string]any
	refSHA     string
}

// repoServerRender is what Argo CD's repo server renders of the chart source:
// it fetches the chart from its repository and the values files from Git.
func (s *suite) repoServerRender(ctx context.Context, a chartApp, caps capabilities) (argocdharness.ManifestResponse, []map[string]any, error) {
	resp, err := s.argo.GenerateManifest(ctx, argocdharness.ManifestRequest{
		Repo:               a.repo,
		Revision:           fmt.Sprint(a.chart["targetRevision"]),
		AppName:            "cache",
		Namespace:          "cache",
		ApplicationSource:  a.chart,
		KubeVersion:        caps.kubeVersion,
		APIVersions:        caps.apiVersions,
		NoCache:            true,
		HasMultipleSources: true,
		RefSources: map[string]argocdharness.RefTarget{
			"$" + fmt.Sprint(a.ref["ref"]): {Repo: argocdharness.Repository{Repo: fmt.Sprint(a.ref["repoURL"])}, TargetRevision: a.refSHA},
		},
		ProjectName:        "default",
		ProjectSourceRepos: []string{"*"},
	})
	if err != nil {
		return resp, nil, err
	}
	var objs []map[string]any
	for _, m := range resp.Manifests {
		var obj map[string]any
		if err := json.Unmarshal([]byte(m), &obj); err != nil {
			return resp, nil, fmt.Errorf("manifest is not JSON: %w", err)
		}
		objs = append(objs, obj)
	}
	return resp, objs, nil
}

// serviceRender is what the service renders of the chart source: the
// Application converted as the service converts it, the chart fetched through
// the fetcher it uses for every chart (here allowed the loopback interface and
// plain HTTP), the values read from valuesTree, the ref source's tree.
func serviceRender(ctx context.Context, a chartApp, sourceType, valuesTree string, caps capabilities) ([]map[string]any, error) {
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "cache", "namespace": argocdharness.Namespace},
		"spec": map[string]any{
			"project":     "default",
			"sources":     []any{a.chart, a.ref},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": "cache"},
		},
		"status": map[string]any{"sourceTypes": []any{sourceType}},
	}}
	model, err := argocd.ParseApplication(app.Object)
	if err != nil {
		return nil, fmt.Errorf("parse application: %w", err)
	}
	apps := render.FromArgoCD(model, nil)
	if len(apps) != 1 {
		return nil, fmt.Errorf("FromArgoCD made %d applications of the chart and its ref source, want 1", len(apps))
	}
	ra := apps[0]
	if ra.Unsupported != "" {
		return nil, fmt.Errorf("render calls %s unsupported: %s", ra.Name, ra.Unsupported)
	}
	ra.Helm.KubeVersion, ra.Helm.APIVersions = caps.kubeVersion, caps.apiVersions
	fetch := render.WithCharts(ctx, helmrepo.New(helmrepo.WithLoopback(), helmrepo.WithPlainHTTP()))
	objs, err := render.Render(fetch, valuesTree, ra)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	var out []map[string]any
	for _, o := range objs {
		out = append(out, o.Manifest)
	}
	return out, nil
}

// checkChartParity fails the test unless the repo server and the service render
// the chart source of a into the same objects, the chart's Deployment and
// Service.
func (s *suite) checkChartParity(t *testing.T, ctx context.Context, a chartApp, valuesTree string, caps capabilities) {
	t.Helper()
	resp, theirs, err := s.repoServerRender(ctx, a, caps)
	if err != nil {
		t.Fatalf("repo server: %v", err)
	}
	t.Logf("repo server: %s, %d objects, %v", resp.SourceType, len(theirs), resp.Commands)
	if len(theirs) != 2 {
		t.Fatalf("the repo server rendered %d objects, want the chart's Deployment and Service", len(theirs))
	}
	ours, err := serviceRender(ctx, a, resp.SourceType, valuesTree, caps)
	if err != nil {
		t.Fatal(err)
	}
	if diffs := compareObjects(theirs, ours); len(diffs) > 0 {
		t.Fatalf("render differs from Argo CD's repo server in %d of %d objects:\n%s", len(diffs), len(theirs), strings.Join(diffs, "\n"))
	}
	t.Logf("%d objects equal", len(theirs))
}
