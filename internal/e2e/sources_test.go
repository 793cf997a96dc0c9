package e2e_test

import (
	"net/http"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/kube/kubetest"
	"github.com/kukie/kukie-gitops/store"
	"github.com/kukie/kukie-gitops/store/storetest"
)

// deployTracked creates an Application with the given spec.source options and
// status.sourceType, and a live Deployment (decoded from manifest, renamed to name)
// that the Application tracks, as Argo CD would have after its first sync.
func (s *service) deployTracked(app, appPath, sourceType string, options map[string]any, annotations map[string]string, manifest, name, image string) {
	s.t.Helper()
	var dep unstructured.Unstructured
	if err := yamlDecode(manifest, &dep.Object); err != nil {
		s.t.Fatal(err)
	}
	dep.SetName(name)
	dep.SetNamespace(s.shopNS)
	dep.SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": app + ":apps/Deployment:" + s.shopNS + "/" + name})
	if image != "" {
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		containers[0].(map[string]any)["image"] = image
		if err := unstructured.SetNestedSlice(dep.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			s.t.Fatal(err)
		}
	}
	a := kubetest.Application(kubetest.App{Namespace: s.appNS, Name: app, DestinationNamespace: s.shopNS,
		RepoURL: s.repoURL, Path: appPath, TargetRevision: "main", Automated: true,
		Resources: []kubetest.AppResource{{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: s.shopNS, Name: name}}})
	for field, v := range options {
		if err := unstructured.SetNestedField(a.Object, v, "spec", "source", field); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedField(a.Object, sourceType, "status", "sourceType"); err != nil {
		s.t.Fatal(err)
	}
	a.SetAnnotations(annotations)
	s.kube.Create(s.t, &dep, a)
}

func (s *service) submit(target, name string, chg map[string]any) change {
	s.t.Helper()
	var c change
	s.mustJSON("POST", "/api/v1/changes", map[string]any{
		"cluster": s.cluster,
		"target":  map[string]any{"apiVersion": "apps/v1", "kind": target, "namespace": s.shopNS, "name": name},
		"change":  chg, "reason": "capacity review", "requested_by": "dana",
	}, http.StatusAccepted, &c)
	return c
}

// checkRunSummary returns the summary of the plan's check run on its head.
func (s *service) checkRunSummary(c change) string {
	s.t.Helper()
	runs := s.runsNamed(c.HeadSHA, "kukie/render")
	if len(runs) == 0 {
		s.t.Fatalf("no check run on %s", c.HeadSHA)
	}
	return runs[len(runs)-1].GetOutput().GetSummary()
}

// The changed objects of a Kustomize app's after-render go to the API server as a
// server-side dry-run: a change the API server refuses (a CPU request above the
// container's limit, which renders fine) refuses the plan with the API server's
// message and opens no pull request; an accepted one is reported as checked against
// the cluster. The second plan on the same commit renders its before-state from the
// render cache.
func TestKustomizeChangeCheckedAgainstTheCluster(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployAPI()

		c := s.submit("Deployment", "api", map[string]any{"resources": map[string]any{"container": "api", "requests": map[string]any{"cpu": "2"}}})
		c = s.waitStatus(c.Code, "refused")
		const apiServerSays = `spec.template.spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`
		if c.Problem == nil || c.Problem.Error != "cluster_rejected" || !strings.Contains(c.Problem.Reason, apiServerSays) {
			t.Fatalf("problem %+v, want cluster_rejected with the API server's message %q", c.Problem, apiServerSays)
		}
		if prs := s.gh.PullRequests(t, s.repo); len(prs) != 0 {
			t.Fatalf("%d pull requests opened for a change the cluster rejects", len(prs))
		}
		before := s.renderCacheHits()

		c = s.submit("Deployment", "api", map[string]any{"resources": map[string]any{"container": "api", "requests": map[string]any{"cpu": "500m"}}})
		c = s.waitStatus(c.Code, "pr_open")
		if c.ClusterCheck != "passed" || c.CheckRun == nil || c.CheckRun.Conclusion != "success" {
			t.Fatalf("cluster check %q, check run %+v", c.ClusterCheck, c.CheckRun)
		}
		if summary := s.checkRunSummary(c); !strings.Contains(summary, "checked against the cluster") || strings.Contains(summary, "not checked") {
			t.Fatalf("check run summary does not say the change was checked against the cluster:\n%s", summary)
		}
		if after := s.renderCacheHits(); after <= before {
			t.Fatalf("the second plan on commit %s rendered its before-state again (render cache hits %v, before %v)", c.BaseSHA, after, before)
		}
	})
}

// Argo CD applies spec.source.kustomize at render time: a replicas change on the
// prefixed Deployment of an Application with namePrefix and images is verified
// against that render, and an image change the Application's images override would
// undo is refused.
func TestApplicationKustomizeOptionsAreRendered(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployAPI()
		const overlay = "apps/api/overlays/canary"
		s.deployTracked("api-canary", overlay, "Kustomize", map[string]any{"kustomize": map[string]any{
			"namePrefix": "canary-", "images": []any{"registry.example/api:2.0.0-rc1"},
		}}, nil, repoFiles(t)["apps/api/base/deployment.yaml"], "canary-api", "registry.example/api:2.0.0-rc1")

		c := s.submit("Deployment", "canary-api", map[string]any{"replicas": map[string]any{"count": 3}})
		c = s.waitStatus(c.Code, "pr_open")
		if c.CheckRun == nil || c.CheckRun.Conclusion != "success" || c.ClusterCheck != "passed" {
			t.Fatalf("check run %+v, cluster check %q", c.CheckRun, c.ClusterCheck)
		}
		if !strings.Contains(c.GitDiff, overlay+"/kustomization.yaml") || strings.Contains(c.GitDiff, "apps/api/base/") {
			t.Fatalf("the replicas change is not confined to the canary overlay:\n%s", c.GitDiff)
		}

		img := s.submit("Deployment", "canary-api", map[string]any{"image": map[string]any{"container": "api", "tag": "2.0.0"}})
		img = s.waitStatus(img.Code, "refused")
		if img.Problem == nil || !strings.Contains(img.Problem.Reason, "spec.source.kustomize.images") {
			t.Fatalf("an image change the Application overrides was not refused: %+v", img.Problem)
		}
	})
}

// A Directory Application with recurse and include reads only prod/ of its folder:
// the Deployment in prod/ is found (recurse) and the staging copy of it is not read
// (include), so the change is verified and no duplicate is reported. The
// manifest-generate-paths annotation is passed on: one that does not name the
// folder is warned about.
func TestApplicationDirectoryOptionsAreRendered(t *testing.T) {
	storetest.ForEach(t, func(t *testing.T, db *store.DB) {
		s := newService(t, db)
		s.deployTracked("flags", "apps/flags", "Directory", map[string]any{"directory": map[string]any{
			"recurse": true, "include": "prod/*.yaml",
		}}, map[string]string{"argocd.argoproj.io/manifest-generate-paths": "/apps/shared"},
			repoFiles(t)["apps/flags/prod/worker.yaml"], "flags-worker", "")

		c := s.submit("Deployment", "flags-worker", map[string]any{"replicas": map[string]any{"count": 4}})
		c = s.waitStatus(c.Code, "pr_open")
		if c.CheckRun == nil || c.CheckRun.Conclusion != "success" || c.ClusterCheck != "passed" {
			t.Fatalf("check run %+v, cluster check %q", c.CheckRun, c.ClusterCheck)
		}
		removed, added := diffLines(c.GitDiff)
		if !strings.Contains(c.GitDiff, "apps/flags/prod/worker.yaml") || len(removed) != 1 || len(added) != 1 || strings.TrimSpace(added[0]) != "replicas: 4" {
			t.Fatalf("git diff:\n%s", c.GitDiff)
		}
		if !strings.Contains(strings.Join(c.Warnings, "\n"), "manifest-generate-paths") {
			t.Fatalf("no warning that the annotation does not name the edited file: %q", c.Warnings)
		}
	})
}
