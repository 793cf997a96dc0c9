//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/kube"
)

var deploymentsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// cluster is the service's view of the test cluster, built the way the service builds
// it. The control-plane namespace is left for the code to learn from the Applications'
// status.controllerNamespace, which real Argo CD writes.
//
// The scenarios decide right after creating Applications, so reads are not shared
// across calls: with the default 10 s cache an Application created a moment ago would
// be missing from the cached list. Sharing itself is tested in package kube.
func (s *suite) cluster(t *testing.T) *kube.Cluster {
	t.Helper()
	c, err := kube.NewCluster("e2e", s.kube.Config, kube.Options{CacheTTL: time.Millisecond, RefreshFloor: time.Millisecond})
	if err != nil {
		t.Fatalf("cluster access: %v", err)
	}
	return c
}

// waitSynced waits until Argo CD reports the Application Synced to revision (any
// revision when empty) with its last operation succeeded, and returns the time that
// took.
func (s *suite) waitSynced(t *testing.T, namespace, name, revision string, timeout time.Duration) (*unstructured.Unstructured, time.Duration) {
	t.Helper()
	what := "successful sync"
	if revision != "" {
		what += " to " + revision
	}
	return s.argo.WaitApplication(t, namespace, name, timeout, what, func(app *unstructured.Unstructured) bool {
		sync := argocdharness.AppStatus(app).Sync
		// A multi-source Application reports a revision per source instead of one.
		return sync.Status == argocd.SyncSynced &&
			argocdharness.OperationPhase(app) == "Succeeded" &&
			(revision == "" || sync.Revision == revision || slices.Contains(sync.Revisions, revision))
	})
}

// deployApp creates an Application and waits for its first successful sync; manual
// apps are synced the way `argocd app sync` does.
func (s *suite) deployApp(t *testing.T, app argocdharness.Application) *unstructured.Unstructured {
	t.Helper()
	if app.Namespace == "" {
		app.Namespace = argocdharness.Namespace
	}
	if app.RepoURL == "" {
		app.RepoURL = s.repoURL
	}
	if app.TargetRevision == "" {
		app.TargetRevision = "main"
	}
	s.argo.CreateApplication(t, app)
	if !app.Automated {
		// A manual app compares first, then syncs on request.
		s.argo.WaitApplication(t, app.Namespace, app.Name, syncTimeout, "comparison", func(u *unstructured.Unstructured) bool {
			return argocdharness.AppStatus(u).Sync.Status == argocd.SyncOutOfSync
		})
		s.argo.Sync(t, app.Namespace, app.Name, app.TargetRevision)
	}
	synced, took := s.waitSynced(t, app.Namespace, app.Name, "", syncTimeout)
	t.Logf("e2e: application %s/%s synced %s after creation", app.Namespace, app.Name, took.Round(time.Millisecond))
	return synced
}

// parseApp converts a real Application into the service's model.
func parseApp(t *testing.T, u *unstructured.Unstructured) argocd.Application {
	t.Helper()
	app, err := argocd.ParseApplication(u.Object)
	if err != nil {
		t.Fatalf("parse application %s/%s as written by argo cd: %v", u.GetNamespace(), u.GetName(), err)
	}
	return app
}

// scale changes a Deployment's replicas through the scale subresource, as
// `kubectl scale` does.
func (s *suite) scale(t *testing.T, namespace, name string, replicas int64) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"replicas": replicas}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	scale, err := s.argo.Dynamic.Resource(deploymentsResource).Namespace(namespace).
		Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "scale")
	if err != nil {
		t.Fatalf("scale deployment %s/%s to %d: %v", namespace, name, replicas, err)
	}
	if got, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas"); got != replicas {
		t.Fatalf("scale deployment %s/%s: api server answered replicas %d, want %d", namespace, name, got, replicas)
	}
}

// replicas reads a Deployment's spec.replicas.
func (s *suite) replicas(ctx context.Context, namespace, name string) (int64, error) {
	d, err := s.argo.Dynamic.Resource(deploymentsResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("read deployment %s/%s: %w", namespace, name, err)
	}
	n, _, err := unstructured.NestedInt64(d.Object, "spec", "replicas")
	return n, err
}

func deploymentRef(namespace, name string) argocd.ResourceRef {
	return argocd.ResourceRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: namespace, Name: name}
}

// liveObject reads the object behind ref.
func (s *suite) liveObject(t *testing.T, ref argocd.ResourceRef) *unstructured.Unstructured {
	t.Helper()
	gvr, err := s.resourceOf(ref)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obj, err := s.argo.Dynamic.Resource(gvr).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", ref, err)
	}
	return obj
}

// resourceOf maps a ref's kind to its API resource through discovery.
func (s *suite) resourceOf(ref argocd.ResourceRef) (schema.GroupVersionResource, error) {
	lists, err := s.argo.Kube.Discovery().ServerPreferredResources()
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("discover resources: %w", err)
	}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil || gv.Group != ref.Group {
			continue
		}
		for _, r := range list.APIResources {
			if r.Kind == ref.Kind {
				return gv.WithResource(r.Name), nil
			}
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("kind %s/%s is not served", ref.Group, ref.Kind)
}
