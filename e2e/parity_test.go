//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/render"
)

const (
	// parityRepo holds the render parity corpus (testdata/parity/repo).
	parityRepo = "acme/parity"
	// parityRepoDir and parityAppsFile are the corpus: the repository and the
	// Applications that render from it.
	parityRepoDir  = "testdata/parity/repo"
	parityAppsFile = "testdata/parity/applications.yaml"
	// refusedAnnotation marks a corpus Application the service refuses to render,
	// with the refusal code it must give.
	refusedAnnotation = "parity.kukie.test/refused"
	// buildOptionsAnnotation is the argocd-cm "kustomize.buildOptions" of the
	// cluster a corpus Application runs in: the application controller passes it to
	// the repo server, the service reads it from argocd-cm (argocd.Settings).
	buildOptionsAnnotation = "parity.kukie.test/kustomize-build-options"
)

// testRenderParity is the proof that the service renders as Argo CD renders: every
// Application of the corpus is rendered by the real repo server (its gRPC
// GenerateManifest, the call the application controller makes) and by package
// render, and the two must hold the same objects, each equal as normalised JSON.
// An Application the service refuses must be refused with the stated code while the
// repo server renders it.
func (s *suite) testRenderParity(t *testing.T) {
	sha := s.github.CreateRepo(t, "acme", "parity", readTree(t, parityRepoDir), "main")
	s.github.SetPrivate(t, parityRepo, false)
	repoURL := s.github.CloneURL(parityRepo)
	apps := readParityApps(t, parityAppsFile, repoURL)
	if len(apps) < 10 {
		t.Fatalf("%s holds %d Applications; the corpus has more", parityAppsFile, len(apps))
	}
	caps := s.clusterCapabilities(t)
	for _, app := range apps {
		t.Run(app.GetName(), func(t *testing.T) { s.checkParity(t, app, repoURL, sha, caps) })
	}
}

// capabilities is what the application controller tells the repo server about the
// destination cluster, for Helm's .Capabilities.
type capabilities struct {
	kubeVersion string
	apiVersions []string
}

// clusterCapabilities reads the test cluster's version and API versions the way
// Argo CD's cluster cache does: the server's version as "major.minor.patch", every
// served group/version and group/version/Kind.
func (s *suite) clusterCapabilities(t *testing.T) capabilities {
	t.Helper()
	info, err := s.argo.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		t.Fatalf("parse server version %q: %v", info.GitVersion, err)
	}
	_, lists, err := s.argo.Kube.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discover api resources: %v", err)
	}
	set := map[string]bool{}
	for _, list := range lists {
		set[list.GroupVersion] = true
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				set[list.GroupVersion+"/"+r.Kind] = true
			}
		}
	}
	caps := capabilities{kubeVersion: v.String()}
	for gv := range set {
		caps.apiVersions = append(caps.apiVersions, gv)
	}
	sort.Strings(caps.apiVersions)
	return caps
}

// checkParity renders app both ways at revision and fails with a diff per object
// that differs.
func (s *suite) checkParity(t *testing.T, app *unstructured.Unstructured, repoURL, revision string, caps capabilities) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sources, multi := appSources(t, app)
	refs := map[string]argocdharness.RefTarget{}
	for _, src := range sources {
		if ref, _ := src["ref"].(string); ref != "" {
			refs["$"+ref] = argocdharness.RefTarget{Repo: argocdharness.Repository{Repo: repoURL}, TargetRevision: revision}
		}
	}
	destination, _, _ := unstructured.NestedString(app.Object, "spec", "destination", "namespace")
	var kustomizeOptions *argocdharness.KustomizeOptions
	var settings *argocd.Settings
	if opts := app.GetAnnotations()[buildOptionsAnnotation]; opts != "" {
		kustomizeOptions = &argocdharness.KustomizeOptions{BuildOptions: opts}
		parsed := argocd.ParseSettings(map[string]string{"kustomize.buildOptions": opts})
		settings = &parsed
	}

	// Argo CD's side, source by source as the application controller asks for it.
	var theirs []map[string]any
	sourceTypes := make([]any, len(sources))
	for i, src := range sources {
		resp, err := s.argo.GenerateManifest(ctx, argocdharness.ManifestRequest{
			Repo:               argocdharness.Repository{Repo: repoURL},
			Revision:           revision,
			AppName:            app.GetName(),
			Namespace:          destination,
			ApplicationSource:  src,
			KubeVersion:        caps.kubeVersion,
			APIVersions:        caps.apiVersions,
			NoCache:            true,
			HasMultipleSources: multi,
			RefSources:         refs,
			ProjectName:        "default",
			ProjectSourceRepos: []string{"*"},
			KustomizeOptions:   kustomizeOptions,
		})
		if err != nil {
			t.Fatalf("repo server, source %d: %v", i+1, err)
		}
		if resp.Revision != "" && resp.Revision != revision {
			t.Fatalf("repo server rendered revision %s, asked for %s", resp.Revision, revision)
		}
		sourceTypes[i] = resp.SourceType
		for _, m := range resp.Manifests {
			var obj map[string]any
			if err := json.Unmarshal([]byte(m), &obj); err != nil {
				t.Fatalf("repo server, source %d: manifest is not JSON: %v", i+1, err)
			}
			theirs = append(theirs, obj)
		}
		t.Logf("repo server, source %d: %s, %d objects, %v", i+1, resp.SourceType, len(resp.Manifests), resp.Commands)
	}

	// The service's side: the Application as the controller leaves it (the source
	// types in its status), converted and rendered the way the pipeline does.
	withStatus := app.DeepCopy()
	if multi {
		_ = unstructured.SetNestedSlice(withStatus.Object, sourceTypes, "status", "sourceTypes")
	} else {
		_ = unstructured.SetNestedField(withStatus.Object, sourceTypes[0], "status", "sourceType")
	}
	model, err := argocd.ParseApplication(withStatus.Object)
	if err != nil {
		t.Fatalf("parse application: %v", err)
	}
	// As clusteraccess attaches the argocd-cm it read to every Application.
	model.Settings = settings
	var ours []map[string]any
	var refusal error
	for _, ra := range render.FromArgoCD(model, nil) {
		if ra.Unsupported != "" {
			t.Fatalf("render calls %s unsupported: %s", ra.Name, ra.Unsupported)
		}
		// The destination cluster's capabilities, unless the Application sets its
		// own, as Argo CD uses them (and as the pipeline hands them to render).
		if ra.Helm.KubeVersion == "" {
			ra.Helm.KubeVersion = caps.kubeVersion
		}
		if len(ra.Helm.APIVersions) == 0 {
			ra.Helm.APIVersions = caps.apiVersions
		}
		objs, err := render.Render(ctx, parityRepoDir, ra)
		if err != nil {
			refusal = err
			break
		}
		for _, o := range objs {
			ours = append(ours, o.Manifest)
		}
	}

	if want := app.GetAnnotations()[refusedAnnotation]; want != "" {
		var r *render.Refusal
		if !errors.As(refusal, &r) || r.Code != want {
			t.Fatalf("render gave %v, want a refusal %s", refusal, want)
		}
		if len(theirs) == 0 {
			t.Fatalf("the repo server rendered nothing either: the corpus does not show what the refusal refuses")
		}
		t.Logf("refused as expected (%s: %s); the repo server renders %d objects", r.Code, r.Reason, len(theirs))
		return
	}
	if refusal != nil {
		t.Fatalf("render: %v", refusal)
	}
	if len(theirs) == 0 {
		t.Fatal("the repo server rendered no object: nothing to compare")
	}
	if diffs := compareObjects(theirs, ours); len(diffs) > 0 {
		t.Fatalf("render differs from Argo CD's repo server in %d of %d objects:\n%s", len(diffs), len(theirs), strings.Join(diffs, "\n"))
	}
	t.Logf("%d objects equal", len(theirs))
}

// appSources returns the Application's sources as it spells them and whether it
// has several (spec.sources).
func appSources(t *testing.T, app *unstructured.Unstructured) ([]map[string]any, bool) {
	t.Helper()
	if list, found, _ := unstructured.NestedSlice(app.Object, "spec", "sources"); found {
		out := make([]map[string]any, 0, len(list))
		for _, s := range list {
			m, ok := s.(map[string]any)
			if !ok {
				t.Fatalf("spec.sources entry %v is not an object", s)
			}
			out = append(out, m)
		}
		return out, true
	}
	src, found, _ := unstructured.NestedMap(app.Object, "spec", "source")
	if !found {
		t.Fatal("application has neither spec.source nor spec.sources")
	}
	return []map[string]any{src}, false
}

// readParityApps reads the corpus Applications, every source pointed at repoURL's
// main branch.
func readParityApps(t *testing.T, file, repoURL string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var apps []*unstructured.Unstructured
	names := map[string]bool{}
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if obj == nil {
			continue
		}
		app := &unstructured.Unstructured{Object: obj}
		app.SetNamespace(argocdharness.Namespace)
		if names[app.GetName()] {
			t.Fatalf("%s: application %s twice", file, app.GetName())
		}
		names[app.GetName()] = true
		_ = unstructured.SetNestedField(app.Object, "default", "spec", "project")
		_ = unstructured.SetNestedField(app.Object, argocdharness.InClusterServer, "spec", "destination", "server")
		point := func(src map[string]any) {
			src["repoURL"] = repoURL
			src["targetRevision"] = "main"
		}
		if list, found, _ := unstructured.NestedSlice(obj, "spec", "sources"); found {
			for _, s := range list {
				point(s.(map[string]any))
			}
			_ = unstructured.SetNestedSlice(obj, list, "spec", "sources")
		} else if src, found, _ := unstructured.NestedMap(obj, "spec", "source"); found {
			point(src)
			_ = unstructured.SetNestedMap(obj, src, "spec", "source")
		}
		apps = append(apps, app)
	}
	return apps
}

// compareObjects matches the objects of both renders by apiVersion, kind, namespace
// and name and returns one message per difference: an object only one side has,
// one rendered a different number of times by each side, or a unified diff of the
// normalised JSON of a pair. An object both render more than once (a subchart's
// CRD under two aliases) pairs its renderings in sorted order.
func compareObjects(theirs, ours []map[string]any) []string {
	index := func(objs []map[string]any) map[string][]string {
		out := map[string][]string{}
		for _, o := range objs {
			key := objectKey(o)
			out[key] = append(out[key], normalizedJSON(o))
		}
		for _, list := range out {
			sort.Strings(list)
		}
		return out
	}
	a, b := index(theirs), index(ours)
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var diffs []string
	for _, k := range keys {
		x, y := a[k], b[k]
		switch {
		case len(y) == 0:
			diffs = append(diffs, fmt.Sprintf("%s: only the repo server renders it:\n%s", k, x[0]))
			continue
		case len(x) == 0:
			diffs = append(diffs, fmt.Sprintf("%s: only render renders it:\n%s", k, y[0]))
			continue
		case len(x) != len(y):
			diffs = append(diffs, fmt.Sprintf("%s: the repo server renders it %d times, render %d times", k, len(x), len(y)))
			continue
		}
		for i := range x {
			if x[i] == y[i] {
				continue
			}
			d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
				A: difflib.SplitLines(x[i]), B: difflib.SplitLines(y[i]),
				FromFile: "argo cd repo server", ToFile: "render", Context: 3,
			})
			diffs = append(diffs, fmt.Sprintf("%s differs:\n%s", k, d))
		}
	}
	return diffs
}

func objectKey(o map[string]any) string {
	u := unstructured.Unstructured{Object: o}
	return fmt.Sprintf("%s %s %s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
}

// normalizedJSON is the object as indented JSON with sorted keys, numbers as JSON
// numbers: the two renders decode into different Go types for the same value.
func normalizedJSON(o map[string]any) string {
	raw, err := json.Marshal(o)
	if err != nil {
		return fmt.Sprintf("(not JSON: %v)", err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Sprintf("(not JSON: %v)", err)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("(not JSON: %v)", err)
	}
	return string(out) + "\n"
}
