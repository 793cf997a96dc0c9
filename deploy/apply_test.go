package deploy_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// installServiceMonitorCRD serves ServiceMonitors on env (testdata's minimal CRD,
// since envtest has no Prometheus Operator), once per API server.
func installServiceMonitorCRD(t *testing.T, env *kubetest.Env) {
	t.Helper()
	raw, err := os.ReadFile("testdata/servicemonitor-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatalf("servicemonitor-crd.yaml: %v", err)
	}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create the ServiceMonitor CRD: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var got apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(ctx, types.NamespacedName{Name: crd.Name}, &got); err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the ServiceMonitor CRD is not established: %v", err)
	}
}

// dryRunApplier applies objects to an API server as a server-side apply with
// dryRun=All and strict field validation: the server checks each against its schema
// (unknown and misplaced fields, types, required fields, admission) and stores
// nothing.
type dryRunApplier struct {
	env    *kubetest.Env
	mapper meta.RESTMapper
}

func newDryRunApplier(t *testing.T, env *kubetest.Env) dryRunApplier {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dryRunApplier{env: env, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

func (a dryRunApplier) apply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s is not served: %w", gvk, err)
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	res := a.env.Dynamic.Resource(m.Resource)
	opts := metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "kukie-chart-test", FieldValidation: "Strict", Force: ptr.To(true)}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		_, err = res.Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
	} else {
		_, err = res.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
	}
	return err
}

func TestChartManifestsPassAServerSideDryRun(t *testing.T) {
	env := kubetest.Start(t)
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := dc.ServerVersion(); err != nil || v.GitVersion != kubeVersion {
		t.Fatalf("the API server is %v (%v); render and lint the chart for it: kubeVersion = %q", v, err, kubeVersion)
	}
	installServiceMonitorCRD(t, env)
	a := newDryRunApplier(t, env)
	ctx := context.Background()
	// The chart's Roles for argocd-cm go into Argo CD's namespace, which exists
	// wherever Argo CD runs. (A namespace is never really deleted here: no
	// namespace controller runs, so it is created once and kept.)
	argocdNS := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "argocd"}}}
	if err := env.Client.Create(ctx, argocdNS); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for name, tc := range chartCases {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t, "chart")
			r := mustRender(t, "kukie-gitops", ns, tc.values)
			for _, obj := range r.objects {
				if err := a.apply(ctx, obj); err != nil {
					t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
				}
			}
		})
	}
	// The committed plain YAML itself, moved to a namespace of its own.
	t.Run("plain YAML", func(t *testing.T) {
		ns := env.Namespace(t, "chart-plain")
		raw, err := os.ReadFile(plainFile)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeObjects(string(raw))
		if err != nil {
			t.Fatalf("%s: %v", plainFile, err)
		}
		if len(objs) == 0 {
			t.Fatalf("%s holds no objects", plainFile)
		}
		for _, obj := range objs {
			if obj.GetNamespace() != "" {
				obj.SetNamespace(ns)
			}
			if err := a.apply(ctx, obj); err != nil {
				t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	})

	// The dry run would catch what the chart gets wrong: a misplaced field of a
	// Deployment, a value of the wrong type, a field the ServiceMonitor schema does
	// not have.
	ns := env.Namespace(t, "chart-broken")
	r := mustRender(t, "kukie-gitops", ns, chartCases["production with every option"].values)
	broken := map[string]func(*unstructured.Unstructured) bool{
		"Deployment": func(o *unstructured.Unstructured) bool {
			return unstructured.SetNestedField(o.Object, "/readyz", "spec", "template", "spec", "readinessPath") == nil
		},
		"Service": func(o *unstructured.Unstructured) bool {
			return setFirst(o, "spec", "ports", "port", "eighty")
		},
		"ServiceMonitor": func(o *unstructured.Unstructured) bool {
			return setFirst(o, "spec", "endpoints", "intervall", "30s")
		},
	}
	for _, obj := range r.objects {
		breakIt, ok := broken[obj.GetKind()]
		if !ok {
			continue
		}
		o := obj.DeepCopy()
		if !breakIt(o) {
			t.Fatalf("could not break %s", obj.GetKind())
		}
		if err := a.apply(ctx, o); err == nil {
			t.Errorf("the dry run accepted a broken %s", obj.GetKind())
		} else {
			t.Logf("broken %s refused: %v", obj.GetKind(), err)
		}
		delete(broken, obj.GetKind())
	}
	if len(broken) > 0 {
		t.Errorf("nothing rendered to break for %v", broken)
	}
}

// setFirst sets field on the first item of the list at path.
func setFirst(o *unstructured.Unstructured, path0, path1, field string, v any) bool {
	items, ok, _ := unstructured.NestedSlice(o.Object, path0, path1)
	if !ok || len(items) == 0 {
		return false
	}
	items[0].(map[string]any)[field] = v
	return unstructured.SetNestedSlice(o.Object, items, path0, path1) == nil
}

// TestChartServiceAccountMayOnlyReadApplications installs the chart's service
// account and RBAC for real and asks the API server what the account may do: read
// Argo CD Applications in every namespace and the argocd-cm ConfigMap of the Argo CD
// namespaces it is given, and nothing else, unless more rules are given.
func TestChartServiceAccountMayOnlyReadApplications(t *testing.T) {
	env := kubetest.Start(t)
	ctx := context.Background()
	type access struct {
		verb, group, resource, namespace, name string
	}
	// The Argo CD namespace of each case is one of its own: Roles live in it.
	argocdNS := env.Namespace(t, "argocd")
	allowed := []access{
		{"list", "argoproj.io", "applications", "", ""},
		{"watch", "argoproj.io", "applications", "", ""},
		{"get", "argoproj.io", "applications", "argocd", ""},
		{"list", "argoproj.io", "applications", "team-a", ""},
		{"get", "", "configmaps", argocdNS, "argocd-cm"},
	}
	denied := []access{
		{"patch", "argoproj.io", "applications", "argocd", ""},
		{"delete", "argoproj.io", "applications", "argocd", ""},
		{"list", "argoproj.io", "appprojects", "", ""},
		{"get", "", "secrets", "argocd", ""},
		{"get", "", "secrets", argocdNS, "argocd-secret"},
		{"list", "", "secrets", "", ""},
		{"get", "", "configmaps", argocdNS, "argocd-rbac-cm"},
		{"list", "", "configmaps", argocdNS, ""},
		{"update", "", "configmaps", argocdNS, "argocd-cm"},
		{"get", "", "configmaps", "shop", "argocd-cm"},
		{"get", "apps", "deployments", "shop", ""},
		{"create", "", "pods", "", ""},
	}
	settings := map[string]any{"argocdNamespaces": []any{argocdNS}}
	tests := map[string]struct {
		release         string // of its own per case: the ClusterRole is cluster-wide
		values          map[string]any
		allowed, denied []access
	}{
		"defaults": {release: "kukie-gitops-rbac", values: map[string]any{"rbac": settings}, allowed: allowed, denied: denied},
		"with a rule for Deployments": {
			release: "kukie-gitops-rbac-extra",
			values: map[string]any{"rbac": map[string]any{"argocdNamespaces": settings["argocdNamespaces"],
				"extraRules": []any{map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments"}, "verbs": []any{"get"}}}}},
			allowed: append(allowed[:len(allowed):len(allowed)], access{"get", "apps", "deployments", "shop", ""}),
			denied:  denied[:len(denied)-2],
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ns := env.Namespace(t, "chart-rbac")
			r := mustRender(t, tc.release, ns, tc.values)
			var sa string
			for _, obj := range r.objects {
				switch obj.GetKind() {
				case "ServiceAccount":
					sa = obj.GetName()
					env.Create(t, obj)
				case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
					env.Create(t, obj)
				}
			}
			if sa == "" {
				t.Fatalf("no ServiceAccount in %v", r.kinds())
			}
			user := "system:serviceaccount:" + ns + ":" + sa
			groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
			// RBAC caches take a moment to see a new binding: wait until every rule
			// the case grants is in force, then ask each question once.
			err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				for _, a := range tc.allowed {
					if ok, err := may(ctx, env, user, groups, a.verb, a.group, a.resource, a.namespace, a.name); !ok || err != nil {
						return false, err
					}
				}
				return true, nil
			})
			if err != nil {
				t.Fatalf("%s never may %v: %v", user, tc.allowed[0], err)
			}
			for _, want := range []struct {
				list []access
				ok   bool
			}{{tc.allowed, true}, {tc.denied, false}} {
				for _, a := range want.list {
					ok, err := may(ctx, env, user, groups, a.verb, a.group, a.resource, a.namespace, a.name)
					if err != nil {
						t.Fatal(err)
					}
					if ok != want.ok {
						t.Errorf("%s %s %s.%s %q in %q: allowed %v, want %v", sa, a.verb, a.resource, a.group, a.name, a.namespace, ok, want.ok)
					}
				}
			}
		})
	}
}

// may asks the API server whether user may verb the resource (the object name, when
// one is given).
func may(ctx context.Context, env *kubetest.Env, user string, groups []string, verb, group, resource, namespace, name string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace, Name: name},
	}}
	if err := env.Client.Create(ctx, sar); err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	return sar.Status.Allowed, nil
}
