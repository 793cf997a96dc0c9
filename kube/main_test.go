package kube_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// world is the cluster of testdata/argocd placed in namespaces of one test.
type world struct {
	env                *kubetest.Env
	argoNS, appsNS, ns string
}

func newWorld(t testing.TB, env *kubetest.Env, withApps bool) world {
	t.Helper()
	w := world{env: env, argoNS: env.Namespace(t, "argocd"), appsNS: env.Namespace(t, "team-a"), ns: env.Namespace(t, "shop")}
	vars := map[string]string{"ARGOCD_NS": w.argoNS, "APPS_NS": w.appsNS, "NS": w.ns}
	if withApps {
		env.Create(t, kubetest.Objects(t, "testdata/argocd/applications.yaml", vars)...)
	}
	env.Create(t, kubetest.Objects(t, "testdata/argocd/resources.yaml", vars)...)
	return w
}

func (w world) deployment(name string) argocd.ResourceRef {
	return argocd.ResourceRef{Group: "apps", Kind: "Deployment", Namespace: w.ns, Name: name}
}

func (w world) configMap(name string) argocd.ResourceRef {
	return argocd.ResourceRef{Kind: "ConfigMap", Namespace: w.ns, Name: name}
}

// clusterFor builds a Cluster the way the service does: from a kubeconfig document
// through the registry.
func clusterFor(t testing.TB, kubeconfig []byte, opts kube.Options) *kube.Cluster {
	t.Helper()
	c, err := kube.NewClusters(opts).Get("test", kube.Access{Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// requestCounter counts the HTTP requests a Cluster makes, by method and path.
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func newRequestCounter() *requestCounter { return &requestCounter{counts: map[string]int{}} }

func (rc *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		rc.mu.Lock()
		rc.counts[r.Method+" "+r.URL.Path]++
		rc.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

func (rc *requestCounter) count(method, path string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.counts[method+" "+path]
}

// appLists counts list calls of all Applications.
func (rc *requestCounter) appLists() int {
	return rc.count(http.MethodGet, "/apis/argoproj.io/v1alpha1/applications")
}

func (rc *requestCounter) total() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, c := range rc.counts {
		n += c
	}
	return n
}

func (rc *requestCounter) discovery() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for k, c := range rc.counts {
		if k == "GET /api" || k == "GET /apis" || strings.HasPrefix(k, "GET /api/v1") && !strings.Contains(k, "/namespaces/") {
			n += c
		}
	}
	return n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func mustDecide(t testing.TB, d argocd.Decision, path argocd.Path, known bool, level argocd.Level, failure argocd.FailureClass) {
	t.Helper()
	if d.Path != path || d.Known != known || d.Level != level || d.Failure != failure {
		t.Fatalf("decision = path %s known %v level %s failure %q\nreason: %s\nwant path %s known %v level %s failure %q",
			d.Path, d.Known, d.Level, d.Failure, d.Reason, path, known, level, failure)
	}
}

func deploymentObject(ns, name string, replicas any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": name, "image": "ghcr.io/kukie-demo/app:1.0.1",
				}}},
			},
		},
	}}
}
