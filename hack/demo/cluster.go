package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kukie/kukie-gitops/kube"
)

var (
	crdGVR         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	namespaceGVR   = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	deploymentGVR  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	applicationCRD = "applications.argoproj.io"
)

// clusterSetup is what prepareCluster did: the kubeconfig the service is given, what
// it created, or why the demo runs without the cluster.
type clusterSetup struct {
	kubeconfig []byte
	created    []string
	offline    string
}

// prepareCluster reads the user's kubeconfig and creates in that cluster what Argo
// CD would have after syncing the sample app: namespace kukie-demo, the Deployment
// web carrying Argo CD's tracking annotation, and the Application web recording the
// sync. Nothing else in the cluster is touched; Argo CD itself, if installed, does not
// watch that namespace, so it leaves the Application alone.
func prepareCluster(ctx context.Context, opts options, repoURL, revision string) (clusterSetup, error) {
	var out clusterSetup
	cfg, err := clientcmd.LoadFromFile(opts.kubeconfig)
	if err != nil {
		return out, fmt.Errorf("read kubeconfig: %w", err)
	}
	// The service takes inline credentials only: keep the current context and put the
	// files it names (minikube's certificates) into the document.
	if err := clientcmdapi.MinifyConfig(cfg); err != nil {
		return out, fmt.Errorf("kubeconfig %s: %w", opts.kubeconfig, err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return out, fmt.Errorf("kubeconfig %s: %w", opts.kubeconfig, err)
	}
	if out.kubeconfig, err = clientcmd.Write(*cfg); err != nil {
		return out, err
	}
	if _, err := kube.LoadKubeconfig(out.kubeconfig); err != nil {
		return out, fmt.Errorf("the service cannot use this kubeconfig (%w); it takes inline credentials only, as kind, k3d and minikube write them, not the exec plugins of cloud clusters", err)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(out.kubeconfig)
	if err != nil {
		return out, err
	}
	rc.Timeout = 10 * time.Second
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return out, err
	}

	_, err = dyn.Resource(crdGVR).Get(ctx, applicationCRD, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && !opts.installCRD:
		out.offline = "the cluster has no Argo CD (no " + applicationCRD + " type): install Argo CD, or run again with -install-crd to add just the Application type"
		return out, nil
	case apierrors.IsNotFound(err):
		if err := installApplicationCRD(ctx, dyn); err != nil {
			return out, err
		}
		out.created = append(out.created, "CustomResourceDefinition "+applicationCRD+" (kubectl delete crd "+applicationCRD+")")
	case err != nil:
		return out, fmt.Errorf("read the cluster %s: %w", rc.Host, err)
	}

	var dep unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(sampleRepo[appPath+"/deployment.yaml"]), &dep.Object); err != nil {
		return out, err
	}
	dep.SetAnnotations(map[string]string{"argocd.argoproj.io/tracking-id": appName + ":apps/Deployment:" + namespace + "/web"})
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}}
	for _, o := range []struct {
		gvr schema.GroupVersionResource
		obj *unstructured.Unstructured
	}{
		{namespaceGVR, ns},
		{deploymentGVR, &dep},
		{kube.ApplicationResource, application(repoURL, revision)},
	} {
		if err := apply(ctx, dyn, o.gvr, o.obj); err != nil {
			return out, err
		}
	}
	out.created = append(out.created, "namespace "+namespace+" with the Deployment and the Application web (kubectl delete namespace "+namespace+")")
	return out, nil
}

// apply creates or updates obj with a server-side apply.
func apply(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	res := dynamic.ResourceInterface(dyn.Resource(gvr))
	if obj.GetNamespace() != "" {
		res = dyn.Resource(gvr).Namespace(obj.GetNamespace())
	}
	if _, err := res.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kukie-demo", Force: ptr.To(true)}); err != nil {
		return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// application is the Application web as Argo CD shows it after syncing revision: a
// Directory source, automated with self-heal, managing the Deployment.
func application(repoURL, revision string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": appName, "namespace": namespace},
		"spec": map[string]any{
			"project":     "default",
			"source":      map[string]any{"repoURL": repoURL, "path": appPath, "targetRevision": "main"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": namespace},
			"syncPolicy":  map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}},
		},
		"status": map[string]any{
			"controllerNamespace": namespace,
			"sourceType":          "Directory",
			"sync":                map[string]any{"status": "Synced", "revision": revision},
			"health":              map[string]any{"status": "Healthy"},
			"resources": []any{
				map[string]any{"group": "apps", "version": "v1", "kind": "Deployment", "namespace": namespace, "name": "web", "status": "Synced"},
				map[string]any{"version": "v1", "kind": "Service", "namespace": namespace, "name": "web", "status": "Synced"},
			},
			"operationState": map[string]any{
				"phase": "Succeeded", "message": "successfully synced (all tasks run)",
				"operation":  map[string]any{"sync": map[string]any{"revision": revision}},
				"syncResult": map[string]any{"revision": revision},
			},
		},
	}}
}

// installApplicationCRD installs the project's copy of Argo CD's Application CRD
// (testdata/crds) and waits until it is served.
func installApplicationCRD(ctx context.Context, dyn dynamic.Interface) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(root, "testdata", "crds", applicationCRD+".yaml"))
	if err != nil {
		return fmt.Errorf("read the Application CRD: %w", err)
	}
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal(raw, &crd.Object); err != nil {
		return fmt.Errorf("the Application CRD: %w", err)
	}
	if err := apply(ctx, dyn, crdGVR, &crd); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdGVR).Get(ctx, applicationCRD, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// moduleRoot is the directory of go.mod above the working directory (the demo runs
// with go run from the repository).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s: run the demo from the repository", dir)
		}
		dir = parent
	}
}
