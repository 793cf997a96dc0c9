package kube_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

var deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

func TestGetResourceAndStatus(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	clock := clocktesting.NewFakeClock(time.Now())
	c := clusterFor(t, env.Kubeconfig, kube.Options{Clock: clock})
	ctx := context.Background()

	obj, err := c.GetResource(ctx, w.deployment("web"), kube.Cached)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := kube.ReadinessOf(obj); err != nil || r.State != kube.ReadinessInProgress {
		t.Errorf("readiness before any controller = %+v (%v), want InProgress", r, err)
	}

	// What the Deployment controller would write after a rollout.
	obj.Object["status"] = map[string]any{
		"observedGeneration": int64(1),
		"replicas":           int64(2),
		"updatedReplicas":    int64(2),
		"readyReplicas":      int64(2),
		"availableReplicas":  int64(2),
		"conditions": []any{
			map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
			map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": `ReplicaSet "web-5d8f" has successfully progressed.`},
		},
	}
	if _, err := env.Dynamic.Resource(deployments).Namespace(w.ns).UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The modification above must not have touched the cache.
	cached, err := c.GetResource(ctx, w.deployment("web"), kube.Cached)
	if err != nil {
		t.Fatal(err)
	}
	if _, found := cached.Object["status"].(map[string]any)["observedGeneration"]; found {
		t.Fatal("a caller's change to a returned object leaked into the cache")
	}
	clock.Step(3 * time.Second)
	obj, err = c.GetResource(ctx, w.deployment("web"), kube.Refresh)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := kube.ReadinessOf(obj); err != nil || r.State != kube.ReadinessCurrent {
		t.Errorf("readiness after the rollout = %+v (%v), want Current", r, err)
	}
}

func TestGetResourceErrors(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, false)
	c := clusterFor(t, env.Kubeconfig, kube.Options{})
	ctx := context.Background()

	tests := map[string]struct {
		ref  argocd.ResourceRef
		want argocd.FailureClass
	}{
		"missing object":           {ref: w.deployment("nope"), want: argocd.FailureNotFound},
		"missing namespace":        {ref: argocd.ResourceRef{Group: "apps", Kind: "Deployment", Namespace: "gone", Name: "web"}, want: argocd.FailureNotFound},
		"kind not served":          {ref: argocd.ResourceRef{Group: "example.com", Kind: "Widget", Namespace: w.ns, Name: "w"}, want: argocd.FailureNotFound},
		"version not served":       {ref: argocd.ResourceRef{Group: "apps", Version: "v1beta1", Kind: "Deployment", Namespace: w.ns, Name: "web"}, want: argocd.FailureNotFound},
		"namespaced, no namespace": {ref: argocd.ResourceRef{Group: "apps", Kind: "Deployment", Name: "web"}, want: argocd.FailureOther},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := c.GetResource(ctx, tc.ref, kube.Cached)
			if got := kube.ClassOf(err); got != tc.want {
				t.Errorf("class = %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}

func TestDryRun(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, false)
	c := clusterFor(t, env.Kubeconfig, kube.Options{})
	ctx := context.Background()

	t.Run("valid change is accepted and not stored", func(t *testing.T) {
		if err := c.DryRun(ctx, []*unstructured.Unstructured{deploymentObject(w.ns, "web", int64(5))}); err != nil {
			t.Fatal(err)
		}
		live, err := env.Dynamic.Resource(deployments).Namespace(w.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas"); r != 2 {
			t.Errorf("replicas = %d after a dry run, want 2", r)
		}
	})

	t.Run("rejections carry the API server's message verbatim", func(t *testing.T) {
		bad := deploymentObject(w.ns, "web", int64(-3))
		var noName unstructured.Unstructured
		noName.SetAPIVersion("v1")
		noName.SetKind("ConfigMap")
		noName.SetNamespace(w.ns)
		widget := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget", "metadata": map[string]any{"name": "w", "namespace": w.ns},
		}}
		ok := deploymentObject(w.ns, "plain", int64(1))
		err := c.DryRun(ctx, []*unstructured.Unstructured{bad, &noName, ok, widget})
		rejected := kube.DryRunErrors(err)
		if len(rejected) != 3 {
			t.Fatalf("rejections = %v, want 3", err)
		}

		// The same request made directly yields the message the user must see.
		_, direct := env.Dynamic.Resource(deployments).Namespace(w.ns).Apply(ctx, "web", bad, metav1.ApplyOptions{
			FieldManager: "direct", Force: true, DryRun: []string{metav1.DryRunAll},
		})
		var status apierrors.APIStatus
		if !errors.As(direct, &status) {
			t.Fatalf("direct dry run: %v", direct)
		}
		if rejected[0].Message != status.Status().Message {
			t.Errorf("message = %q\nwant the API server's %q", rejected[0].Message, status.Status().Message)
		}
		if !strings.Contains(rejected[0].Message, "spec.replicas") || rejected[0].Ref.Name != "web" {
			t.Errorf("rejection = %+v", rejected[0])
		}
		if rejected[1].Class != argocd.FailureOther || !strings.Contains(rejected[1].Message, "metadata.name") {
			t.Errorf("rejection of a nameless object = %+v", rejected[1])
		}
		if rejected[2].Class != argocd.FailureNotFound || !strings.Contains(rejected[2].Message, "Widget") {
			t.Errorf("rejection of an unserved kind = %+v", rejected[2])
		}
	})

	t.Run("rejections name their object and the fields at fault", func(t *testing.T) {
		ok := deploymentObject(w.ns, "plain", int64(1))
		bad := deploymentObject(w.ns, "web", int64(-3))
		nowhere := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "no-such-namespace"},
		}}
		rejected := kube.DryRunErrors(c.DryRun(ctx, []*unstructured.Unstructured{ok, bad, nowhere}))
		if len(rejected) != 2 {
			t.Fatalf("rejections = %+v, want 2", rejected)
		}
		if r := rejected[0]; r.Index != 1 || !slices.Equal(r.Fields, []string{"spec.replicas"}) {
			t.Errorf("rejection of a negative replica count = %+v, want object 1 at spec.replicas", r)
		}
		if r := rejected[1]; r.Index != 2 || r.Class != argocd.FailureNotFound || !slices.Equal(r.Fields, []string{"metadata.namespace"}) {
			t.Errorf("rejection of a missing namespace = %+v, want object 2 at metadata.namespace", r)
		}
	})
}
