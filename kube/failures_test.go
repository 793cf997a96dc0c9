package kube_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

func TestApplicationTypeNotInstalled(t *testing.T) {
	env := kubetest.StartPrivate(t, kubetest.Options{WithoutApplicationCRD: true})
	w := newWorld(t, env, false)
	c := clusterFor(t, env.Kubeconfig, kube.Options{})
	ctx := context.Background()

	// An annotation is Argo CD's own mark even when Argo CD runs elsewhere.
	d := c.Decide(ctx, []argocd.ResourceRef{w.deployment("web")})
	mustDecide(t, d, argocd.PathGit, true, argocd.LevelUnknown, argocd.FailureNotInstalled)
	// A label can only be confirmed by an Application.
	d = c.Decide(ctx, []argocd.ResourceRef{w.deployment("billing-api")})
	mustDecide(t, d, argocd.PathDirect, false, argocd.LevelUnknown, argocd.FailureNotInstalled)
	if !strings.Contains(d.Reason, "applications.argoproj.io") {
		t.Errorf("reason = %q", d.Reason)
	}
	// No marks: nothing to confirm.
	d = c.Decide(ctx, []argocd.ResourceRef{w.deployment("plain")})
	mustDecide(t, d, argocd.PathDirect, true, argocd.LevelNone, "")

	_, err := c.ListApplications(ctx, kube.Cached)
	if got := kube.ClassOf(err); got != argocd.FailureNotInstalled {
		t.Errorf("ListApplications class = %q (%v), want not_installed", got, err)
	}
	_, err = c.AppList(ctx, kube.Cached)
	if got := kube.ClassOf(err); got != argocd.FailureNotInstalled {
		t.Errorf("AppList class = %q (%v), want not_installed", got, err)
	}
	_, err = c.GetApplication(ctx, w.argoNS, "shop", kube.Cached)
	if got := kube.ClassOf(err); got != argocd.FailureNotInstalled {
		t.Errorf("GetApplication class = %q (%v), want not_installed", got, err)
	}
}

func TestForbidden(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	ctx := context.Background()

	// reader may read the workloads of the namespace and nothing else.
	reader := env.AddUser(t, "kukie-reader", "kukie-readers")
	env.Create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": "workload-reader", "namespace": w.ns},
		"rules": []any{map[string]any{
			"apiGroups": []any{"", "apps"}, "resources": []any{"deployments", "configmaps"}, "verbs": []any{"get", "list"},
		}},
	}}, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": "workload-reader", "namespace": w.ns},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "workload-reader"},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "kukie-reader"}},
	}})
	c := clusterFor(t, reader.Kubeconfig, kube.Options{})

	_, err := c.ListApplications(ctx, kube.Cached)
	if got := kube.ClassOf(err); got != argocd.FailureForbidden {
		t.Fatalf("ListApplications class = %q (%v), want forbidden", got, err)
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("the API server's 403 is not kept in the error chain: %v", err)
	}
	d := c.Decide(ctx, []argocd.ResourceRef{w.deployment("web")})
	mustDecide(t, d, argocd.PathGit, true, argocd.LevelUnknown, argocd.FailureForbidden)
	d = c.Decide(ctx, []argocd.ResourceRef{w.deployment("billing-api")})
	mustDecide(t, d, argocd.PathDirect, false, argocd.LevelUnknown, argocd.FailureForbidden)
	if !strings.Contains(d.Reason, "grant them get and list") {
		t.Errorf("reason = %q", d.Reason)
	}

	// A user with no rights at all cannot read the target either.
	nobody := env.AddUser(t, "kukie-nobody", "kukie-nobodies")
	c = clusterFor(t, nobody.Kubeconfig, kube.Options{})
	d = c.Decide(ctx, []argocd.ResourceRef{w.deployment("plain")})
	mustDecide(t, d, argocd.PathDirect, false, argocd.LevelUnknown, argocd.FailureForbidden)
	if td := d.Targets[0]; td.Err == nil || td.Err.Class != argocd.FailureForbidden {
		t.Errorf("target error = %+v", td.Err)
	}
}

func TestUnreachableAfterAPIServerStops(t *testing.T) {
	env := kubetest.StartPrivate(t, kubetest.Options{})
	w := newWorld(t, env, true)
	clock := clocktesting.NewFakeClock(time.Now())
	c := clusterFor(t, env.Kubeconfig, kube.Options{Clock: clock})
	ctx := context.Background()
	targets := []argocd.ResourceRef{w.deployment("web")}

	mustDecide(t, c.Decide(ctx, targets), argocd.PathGit, true, argocd.LevelSelfHeal, "")
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	// Within the cache TTL the answer stands without the API server.
	mustDecide(t, c.Decide(ctx, targets), argocd.PathGit, true, argocd.LevelSelfHeal, "")

	clock.Step(kube.DefaultCacheTTL + time.Second)
	d := c.Decide(ctx, targets)
	mustDecide(t, d, argocd.PathDirect, false, argocd.LevelUnknown, argocd.FailureUnreachable)
	if !strings.Contains(d.Reason, "could not be reached") {
		t.Errorf("reason = %q", d.Reason)
	}
	_, err := c.ListApplications(ctx, kube.Refresh)
	if got := kube.ClassOf(err); got != argocd.FailureUnreachable {
		t.Errorf("ListApplications class = %q (%v), want unreachable", got, err)
	}
}

// hangingServer accepts connections and never answers, like an API server behind a
// black-holing load balancer.
func hangingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func TestDecisionWithinBudgetWhenAPIServerHangs(t *testing.T) {
	addr := hangingServer(t)
	c, err := kube.NewCluster("hanging", &rest.Config{Host: "https://" + addr, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref := argocd.ResourceRef{Group: "apps", Kind: "Deployment", Namespace: "shop", Name: "web"}

	done := make(chan argocd.Decision, 1)
	start := time.Now()
	go func() { done <- c.Decide(context.Background(), []argocd.ResourceRef{ref}) }()
	select {
	case d := <-done:
		// A functional bound, not a speed target: the budget is the contract, and the
		// slack only absorbs scheduling on a busy machine.
		if elapsed := time.Since(start); elapsed > kube.DefaultDecisionBudget+2*time.Second {
			t.Errorf("Decide returned after %v, beyond its %v budget", elapsed, kube.DefaultDecisionBudget)
		}
		mustDecide(t, d, argocd.PathDirect, false, argocd.LevelUnknown, argocd.FailureUnreachable)
		if td := d.Targets[0]; td.Err == nil || !strings.Contains(td.Err.Detail, context.DeadlineExceeded.Error()) {
			t.Errorf("target error = %+v; want the budget's deadline", td.Err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Decide did not return although its budget is 10 s")
	}
}

func TestClassifyRealFailures(t *testing.T) {
	env := kubetest.Start(t)
	ctx := context.Background()

	noCA := rest.CopyConfig(env.Config)
	noCA.TLSClientConfig = rest.TLSClientConfig{}
	badToken := rest.AnonymousClientConfig(env.Config)
	badToken.BearerToken = "not-a-token"

	tests := map[string]struct {
		cfg  *rest.Config
		want argocd.FailureClass
	}{
		"certificate signed by an unknown authority": {cfg: noCA, want: argocd.FailureUnreachable},
		"credentials rejected (401)":                 {cfg: badToken, want: argocd.FailureUnreachable},
		"connection refused":                         {cfg: &rest.Config{Host: "https://127.0.0.1:1"}, want: argocd.FailureUnreachable},
		// .invalid never resolves (RFC 2606).
		"host name that does not resolve": {cfg: &rest.Config{Host: "https://api.kukie-test.invalid"}, want: argocd.FailureUnreachable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := kube.NewCluster(name, tc.cfg, kube.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.ListApplications(ctx, kube.Cached)
			if err == nil {
				t.Fatal("ListApplications succeeded")
			}
			var ke *kube.Error
			if !errors.As(err, &ke) || ke.Class != tc.want {
				t.Fatalf("error %v has class %q, want %q", err, kube.ClassOf(err), tc.want)
			}
		})
	}
}

func TestAccessFromKubeconfigContext(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	raw, err := clientcmd.Load(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// A second context pointing at a port nobody listens on.
	current := raw.Contexts[raw.CurrentContext]
	raw.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", CertificateAuthorityData: env.Config.CAData}
	ctxCopy := *current
	ctxCopy.Cluster = "nowhere"
	raw.Contexts["nowhere"] = &ctxCopy
	kubeconfig, err := clientcmd.Write(*raw)
	if err != nil {
		t.Fatal(err)
	}
	registry := kube.NewClusters(kube.Options{})
	ctx := context.Background()

	good, err := registry.Get("good", kube.Access{Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	mustDecide(t, good.Decide(ctx, []argocd.ResourceRef{w.deployment("web")}), argocd.PathGit, true, argocd.LevelSelfHeal, "")

	bad, err := registry.Get("bad", kube.Access{Kubeconfig: kubeconfig, Context: "nowhere"})
	if err != nil {
		t.Fatal(err)
	}
	mustDecide(t, bad.Decide(ctx, []argocd.ResourceRef{w.deployment("web")}), argocd.PathDirect, false, argocd.LevelUnknown, argocd.FailureUnreachable)

	if _, err := registry.Get("missing", kube.Access{Kubeconfig: kubeconfig, Context: "no-such-context"}); err == nil {
		t.Error("a kubeconfig context that does not exist was accepted")
	}
}

func TestRESTConfigRefusesBadAccess(t *testing.T) {
	// Outside a pod there is no service account to use.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	tests := map[string]struct {
		access  kube.Access
		wantErr string
	}{
		"nothing given":            {access: kube.Access{}, wantErr: "no kubeconfig given"},
		"both ways given":          {access: kube.Access{InCluster: true, Kubeconfig: []byte("apiVersion: v1")}, wantErr: "not both"},
		"in-cluster outside a pod": {access: kube.Access{InCluster: true}, wantErr: "service's own service account is not available"},
		"not a kubeconfig":         {access: kube.Access{Kubeconfig: []byte("clusters: [")}, wantErr: "parse kubeconfig"},
		"kubeconfig without a server": {
			access:  kube.Access{Kubeconfig: []byte("apiVersion: v1\nkind: Config\n")},
			wantErr: "kubeconfig",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := kube.RESTConfig(tc.access)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("RESTConfig error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// An aggregated API whose server is down (its APIService points at a Service that
// does not exist) makes its kinds unknown, not absent: a target of such a kind may be
// managed, so the decision cannot be known.
func TestKindOfAnUnavailableAggregatedAPI(t *testing.T) {
	env := kubetest.StartPrivate(t, kubetest.Options{})
	w := newWorld(t, env, true)
	env.Create(t, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1.metrics.kukie.test"},
		"spec": map[string]any{
			"group": "metrics.kukie.test", "version": "v1",
			"service":               map[string]any{"namespace": w.ns, "name": "metrics-server-that-is-gone", "port": int64(443)},
			"insecureSkipTLSVerify": true, "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
		},
	}})
	c := clusterFor(t, env.Kubeconfig, kube.Options{})
	ctx := context.Background()

	ref := argocd.ResourceRef{Group: "metrics.kukie.test", Kind: "PodMetrics", Namespace: w.ns, Name: "web"}
	_, err := c.GetResource(ctx, ref, kube.Cached)
	if got := kube.ClassOf(err); got != argocd.FailureOther || !strings.Contains(err.Error(), "metrics.kukie.test") {
		t.Fatalf("GetResource error = %v (class %q), want class error naming the failed group", err, got)
	}
	d := c.Decide(ctx, []argocd.ResourceRef{ref})
	mustDecide(t, d, argocd.PathDirect, false, argocd.LevelUnknown, argocd.FailureOther)

	// Other groups are still served.
	mustDecide(t, c.Decide(ctx, []argocd.ResourceRef{w.deployment("web")}), argocd.PathGit, true, argocd.LevelSelfHeal, "")
	// A group nobody serves is still simply absent.
	_, err = c.GetResource(ctx, argocd.ResourceRef{Group: "example.com", Kind: "Widget", Namespace: w.ns, Name: "w"}, kube.Cached)
	if got := kube.ClassOf(err); got != argocd.FailureNotFound {
		t.Errorf("unserved kind class = %q (%v), want not_found", got, err)
	}
}
