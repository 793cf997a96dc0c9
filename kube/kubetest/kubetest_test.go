package kubetest_test

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kukie/kukie-gitops/kube/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

var applications = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// The fixtures must survive the API server unchanged: Argo CD writes status with
// ordinary updates because its CRD has no status subresource, and fields outside the
// schema are preserved.
func TestFixturesRoundTripThroughAPIServer(t *testing.T) {
	env := kubetest.Start(t)
	argoNS, appsNS, ns := env.Namespace(t, "argocd"), env.Namespace(t, "team-a"), env.Namespace(t, "shop")
	vars := map[string]string{"ARGOCD_NS": argoNS, "APPS_NS": appsNS, "NS": ns}
	env.Create(t, kubetest.Objects(t, "testdata/argocd/applications.yaml", vars)...)
	env.Create(t, kubetest.Objects(t, "testdata/argocd/resources.yaml", vars)...)

	ctx := context.Background()
	shop, err := env.Dynamic.Resource(applications).Namespace(argoNS).Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range [][]string{
		{"status", "sync", "revision"},
		{"status", "operationState", "phase"},
		{"status", "summary", "images"},                         // preserved unknown field
		{"spec", "source", "kustomize", "commonLabels", "tier"}, // preserved unknown field
	} {
		if _, found, err := unstructured.NestedFieldNoCopy(shop.Object, field...); !found || err != nil {
			t.Errorf("field %v lost in the API server (found=%v, err=%v)", field, found, err)
		}
	}
	resources, _, _ := unstructured.NestedSlice(shop.Object, "status", "resources")
	if len(resources) != 3 {
		t.Errorf("status.resources has %d entries, want 3", len(resources))
	}

	var crd apiextensionsv1.CustomResourceDefinition
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "applications.argoproj.io"}, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Subresources != nil && v.Subresources.Status != nil {
			t.Errorf("version %s has a status subresource; Argo CD's CRD has none", v.Name)
		}
	}
}

func TestPrivateServerWithoutCRD(t *testing.T) {
	env := kubetest.StartPrivate(t, kubetest.Options{WithoutApplicationCRD: true})
	_, err := env.Dynamic.Resource(applications).List(context.Background(), metav1.ListOptions{})
	if err == nil {
		t.Fatal("listing Applications succeeded on a server without the CRD")
	}
}

func TestAddUserHasNoRights(t *testing.T) {
	env := kubetest.Start(t)
	u := env.AddUser(t, "nobody", "no-rights")
	dyn, err := dynamic.NewForConfig(u.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dyn.Resource(applications).List(context.Background(), metav1.ListOptions{})
	if err == nil {
		t.Fatal("a user without rights listed Applications")
	}
	if len(u.Kubeconfig) == 0 {
		t.Error("user kubeconfig is empty")
	}
}

func TestExpandRejectsMissingPlaceholder(t *testing.T) {
	if _, err := kubetest.Expand([]byte("namespace: ${NS}"), map[string]string{}); err == nil {
		t.Fatal("Expand accepted a placeholder without a value")
	}
	out, err := kubetest.Expand([]byte("namespace: ${NS}"), map[string]string{"NS": "shop"})
	if err != nil || string(out) != "namespace: shop" {
		t.Fatalf("Expand = %q, %v", out, err)
	}
}
