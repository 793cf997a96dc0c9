package deploy_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"

	"github.com/kukie/kukie-gitops/config"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

var update = flag.Bool("update", false, "rewrite "+plainFile+" from the chart's default values")

const (
	chartDir  = "chart/kukie-gitops"
	plainFile = "kubernetes/kukie-gitops.yaml"
	// The release the plain YAML is rendered as.
	plainRelease   = "kukie-gitops"
	plainNamespace = "kukie-gitops"
	// kubeVersion is the Kubernetes version the chart is rendered and linted for:
	// the API server the tests apply it to (hack/envtest-assets.sh).
	kubeVersion = "v1.37.2"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// release is one rendering of the chart: the manifest as helm template prints it, and
// its objects in that order.
type release struct {
	manifest string
	objects  []*unstructured.Unstructured
}

// render renders the chart as helm template does (a client-only install) with values
// over the chart's defaults.
func render(name, namespace string, values map[string]any) (release, error) {
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		return release{}, fmt.Errorf("load chart: %w", err)
	}
	cfg := action.NewConfiguration()
	cfg.SetLogger(slog.DiscardHandler)
	inst := action.NewInstall(cfg)
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = name
	inst.Namespace = namespace
	inst.Replace = true
	if inst.KubeVersion, err = common.ParseKubeVersion(kubeVersion); err != nil {
		return release{}, err
	}
	if values == nil {
		values = map[string]any{}
	}
	out, err := inst.RunWithContext(context.Background(), ch, values)
	if err != nil {
		return release{}, err
	}
	rel, ok := out.(*releasev1.Release)
	if !ok {
		return release{}, fmt.Errorf("install returned a %T", out)
	}
	objs, err := decodeObjects(rel.Manifest)
	if err != nil {
		return release{}, fmt.Errorf("decode rendered manifest: %w", err)
	}
	return release{manifest: rel.Manifest, objects: objs}, nil
}

// decodeObjects reads the objects of a multi-document YAML stream, skipping empty
// documents.
func decodeObjects(manifest string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if obj != nil {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

func mustRender(t *testing.T, name, namespace string, values map[string]any) release {
	t.Helper()
	r, err := render(name, namespace, values)
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	return r
}

// kinds lists the rendered objects as Kind/name.
func (r release) kinds() []string {
	var out []string
	for _, o := range r.objects {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

// typed decodes the one object of kind into out, failing on any field the type does
// not have.
func typed(t *testing.T, r release, kind string, out any) bool {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == kind {
			if found != nil {
				t.Fatalf("two %s objects: %s and %s", kind, found.GetName(), o.GetName())
			}
			found = o
		}
	}
	if found == nil {
		return false
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(found.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", kind, found.GetName(), err)
	}
	return true
}

// defaultSecrets are the Secret and key each secret file is read from by default.
var defaultSecrets = map[string]string{
	"KUKIE_GITHUB_PRIVATE_KEY_FILE":    "kukie-gitops/private-key.pem",
	"KUKIE_GITHUB_WEBHOOK_SECRET_FILE": "kukie-gitops/webhook-secret",
	"KUKIE_GITHUB_CLIENT_SECRET_FILE":  "kukie-gitops/client-secret",
	"KUKIE_ENCRYPTION_KEY_FILE":        "kukie-gitops/encryption-key",
	"KUKIE_DATABASE_URL_FILE":          "kukie-gitops/database-url",
}

// chartCases are the values the chart is tested with: its defaults, a production
// install with everything optional enabled, and one that brings its own service
// account and leaves RBAC and the disruption budget out.
var chartCases = map[string]struct {
	values map[string]any
	want   expectation
}{
	"defaults": {
		want: expectation{
			replicas: 2, image: "kukie-gitops:0.1.0", secret: defaultSecrets,
			shutdown: 30 * time.Second, drain: 10 * time.Second, metricsPort: 9100, serviceAccount: "kukie-gitops", rbacRules: 1, pdb: true,
			// The chart's defaults leave only the App's own settings to the operator.
			problems: []string{"github.app_id is required", "github.app_slug is required", "github.client_id is required"},
		},
	},
	"production with every option": {
		values: map[string]any{
			"replicaCount": 3,
			"image":        map[string]any{"repository": "registry.example/platform/kukie-gitops", "tag": "1.4.2"},
			"config": map[string]any{
				"server":   map[string]any{"public_url": "https://kukie.example.com"},
				"github":   map[string]any{"app_id": 4242, "app_slug": "kukie-acme", "client_id": "Iv1.abc"},
				"pipeline": map[string]any{"deploy_timeout": "20m"},
				"clusters": map[string]any{"in_cluster_teams": []any{"platform"}},
			},
			"secrets": map[string]any{
				"name":             "kukie-app",
				"databaseURL":      map[string]any{"name": "kukie-db", "key": "url"},
				"githubPrivateKey": map[string]any{"name": "", "key": "app.pem"},
			},
			"drainDelaySeconds":             5,
			"shutdownTimeoutSeconds":        120,
			"terminationGraceMarginSeconds": 20,
			"port":                          8443,
			"metrics":                       map[string]any{"port": 0},
			"ingress": map[string]any{
				"enabled": true, "className": "nginx",
				"annotations": map[string]any{"cert-manager.io/cluster-issuer": "letsencrypt"},
				"hosts":       []any{map[string]any{"host": "kukie.example.com", "paths": []any{map[string]any{"path": "/", "pathType": "Prefix"}}}},
				"tls":         []any{map[string]any{"secretName": "kukie-tls", "hosts": []any{"kukie.example.com"}}},
			},
			"serviceMonitor":      map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}},
			"rbac":                map[string]any{"extraRules": []any{map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments"}, "verbs": []any{"get", "list", "watch"}}}},
			"podDisruptionBudget": map[string]any{"maxUnavailable": 2},
			"extraEnv":            []any{map[string]any{"name": "KUKIE_LOG_LEVEL", "value": "debug"}},
			"serviceAccount":      map[string]any{"annotations": map[string]any{"example.com/role": "kukie"}},
		},
		want: expectation{
			replicas: 3, image: "registry.example/platform/kukie-gitops:1.4.2", secret: map[string]string{
				"KUKIE_GITHUB_PRIVATE_KEY_FILE":    "kukie-app/app.pem",
				"KUKIE_GITHUB_WEBHOOK_SECRET_FILE": "kukie-app/webhook-secret",
				"KUKIE_GITHUB_CLIENT_SECRET_FILE":  "kukie-app/client-secret",
				"KUKIE_ENCRYPTION_KEY_FILE":        "kukie-app/encryption-key",
				"KUKIE_DATABASE_URL_FILE":          "kukie-db/url",
			},
			shutdown: 120 * time.Second, drain: 5 * time.Second, port: 8443, serviceAccount: "kukie-gitops", rbacRules: 2, pdb: true,
			ingress: true, serviceMonitor: true, logLevel: "debug",
		},
	},
	"own service account, no RBAC, no disruption budget": {
		values: map[string]any{
			"serviceAccount":      map[string]any{"create": false, "name": "platform-reader", "automountToken": false},
			"rbac":                map[string]any{"create": false},
			"podDisruptionBudget": map[string]any{"enabled": false},
			"config":              map[string]any{"github": map[string]any{"app_id": 7, "app_slug": "kukie", "client_id": "Iv1.x"}},
		},
		want: expectation{
			replicas: 2, image: "kukie-gitops:0.1.0", secret: defaultSecrets,
			shutdown: 30 * time.Second, drain: 10 * time.Second, metricsPort: 9100, serviceAccount: "platform-reader",
		},
	},
}

// expectation is what a case must render.
type expectation struct {
	replicas int32
	image    string
	// secret maps each secret file setting to the Secret and key it is read from.
	secret   map[string]string
	shutdown time.Duration
	// drain is the drain delay the pods are started with.
	drain       time.Duration
	port        int32 // 0: 8080
	metricsPort int32 // 0: /metrics on the main port
	// serviceAccount is the account the pods run as; rbacRules the rules of the
	// chart's ClusterRole (0: none rendered).
	serviceAccount string
	rbacRules      int
	pdb            bool
	ingress        bool
	serviceMonitor bool
	logLevel       string // "": the default
	// problems are what the production profile still refuses in the configuration
	// the pods start with (none: it starts).
	problems []string
}

func TestChartRendersASecureDeploymentForEachCase(t *testing.T) {
	for name, tc := range chartCases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, "kukie-gitops", "kukie", tc.values)
			checkRelease(t, r, "kukie", tc.want)
		})
	}
}

// checkArgoCDSettingsGrant checks a Role or RoleBinding of the chart: in an Argo CD
// namespace, granting get on argocd-cm alone to the service's account.
func checkArgoCDSettingsGrant(t *testing.T, o *unstructured.Unstructured, namespace string, want expectation) {
	t.Helper()
	if o.GetNamespace() != "argocd" {
		t.Errorf("%s %s is in namespace %q, want the Argo CD namespace argocd", o.GetKind(), o.GetName(), o.GetNamespace())
	}
	if o.GetKind() == "Role" {
		var role rbacv1.Role
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &role, true); err != nil {
			t.Fatal(err)
		}
		cm := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"argocd-cm"}, Verbs: []string{"get"}}
		if len(role.Rules) != 1 || fmt.Sprint(role.Rules[0]) != fmt.Sprint(cm) {
			t.Errorf("Role rules %+v, want only %+v", role.Rules, cm)
		}
		return
	}
	var b rbacv1.RoleBinding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &b, true); err != nil {
		t.Fatal(err)
	}
	if s := b.Subjects; b.RoleRef.Kind != "Role" || len(s) != 1 || s[0].Name != want.serviceAccount || s[0].Namespace != namespace {
		t.Errorf("RoleBinding %+v does not bind its Role to %s/%s", b, namespace, want.serviceAccount)
	}
}

// checkRelease checks the objects of one rendering against want and against what the
// service needs of any deployment of it.
func checkRelease(t *testing.T, r release, namespace string, want expectation) {
	t.Helper()
	allowed := []string{"ServiceAccount", "ConfigMap", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Deployment", "PodDisruptionBudget", "Ingress", "ServiceMonitor"}
	for _, o := range r.objects {
		// A Secret in the chart would put its value in the release history.
		if !slices.Contains(allowed, o.GetKind()) {
			t.Errorf("the chart renders a %s (%s)", o.GetKind(), o.GetName())
		}
		switch o.GetKind() {
		case "ClusterRole", "ClusterRoleBinding":
		case "Role", "RoleBinding":
			checkArgoCDSettingsGrant(t, o, namespace, want)
		default:
			if o.GetNamespace() != namespace {
				t.Errorf("%s %s is in namespace %q, want %q", o.GetKind(), o.GetName(), o.GetNamespace(), namespace)
			}
		}
	}

	var dep appsv1.Deployment
	if !typed(t, r, "Deployment", &dep) {
		t.Fatalf("no Deployment in %v", r.kinds())
	}
	pod := dep.Spec.Template
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != want.replicas {
		t.Errorf("replicas %v, want %d", dep.Spec.Replicas, want.replicas)
	}
	if sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector); err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the Deployment's selector %v does not select its pods %v (%v)", dep.Spec.Selector, pod.Labels, err)
	}
	psc := pod.Spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("the pod may run as root: %+v", psc)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if c.Image != want.image {
		t.Errorf("image %q, want %q", c.Image, want.image)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("the container is not locked down (read-only root, no privilege escalation, no capabilities): %+v", sc)
	}
	if want.port == 0 {
		want.port = 8080
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != want.port {
		t.Errorf("container ports %v, want http on %d", ports, want.port)
	}
	for probe, path := range map[string]string{"startup": "/healthz", "liveness": "/healthz", "readiness": "/readyz"} {
		p := map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe}[probe]
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v, want GET %s on the http port", probe, p, path)
		}
	}

	env := map[string]string{}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, config.EnvPrefix) && !slices.Contains(config.EnvNames(), e.Name) && e.Name != "KUKIE_CONFIG" && e.Name != "KUKIE_PROFILE" {
			t.Errorf("the container sets %s, which the service does not read", e.Name)
		}
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	if env["KUKIE_SERVER_ADDRESS"] != fmt.Sprintf("0.0.0.0:%d", want.port) {
		t.Errorf("KUKIE_SERVER_ADDRESS %q, want the http port %d on all interfaces", env["KUKIE_SERVER_ADDRESS"], want.port)
	}
	if want.metricsPort != 0 && (ports["metrics"] != want.metricsPort || env["KUKIE_METRICS_ADDRESS"] != fmt.Sprintf("0.0.0.0:%d", want.metricsPort)) {
		t.Errorf("metrics port %d, KUKIE_METRICS_ADDRESS %q, want %d", ports["metrics"], env["KUKIE_METRICS_ADDRESS"], want.metricsPort)
	}
	if want.metricsPort == 0 && (ports["metrics"] != 0 || env["KUKIE_METRICS_ADDRESS"] != "") {
		t.Errorf("a metrics port %d (%q) although /metrics is on the main port", ports["metrics"], env["KUKIE_METRICS_ADDRESS"])
	}

	// Every file the service reads is mounted: the configuration from the ConfigMap,
	// the secrets from the Secrets and keys asked for, and its cache is writable.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	mountedAt := func(file string) (corev1.Volume, string, bool) {
		for dir, m := range mounts {
			if rel, err := filepath.Rel(dir, file); err == nil && !strings.HasPrefix(rel, "..") {
				v, ok := volumes[m.Name]
				return v, rel, ok
			}
		}
		return corev1.Volume{}, "", false
	}
	var cm corev1.ConfigMap
	if !typed(t, r, "ConfigMap", &cm) {
		t.Fatal("no ConfigMap")
	}
	if v, key, ok := mountedAt(env["KUKIE_CONFIG"]); !ok || v.ConfigMap == nil || v.ConfigMap.Name != cm.Name || cm.Data[key] == "" {
		t.Errorf("KUKIE_CONFIG %q is not a key of ConfigMap %s (%+v)", env["KUKIE_CONFIG"], cm.Name, v)
	}
	for setting, ref := range want.secret {
		v, file, ok := mountedAt(env[setting])
		if !ok || v.Projected == nil {
			t.Errorf("%s %q is not in a mounted secret volume", setting, env[setting])
			continue
		}
		var got []string
		for _, s := range v.Projected.Sources {
			for _, it := range s.Secret.Items {
				if it.Path == file {
					got = append(got, s.Secret.Name+"/"+it.Key)
				}
			}
		}
		if len(got) != 1 || got[0] != ref {
			t.Errorf("%s is read from %v, want %s", setting, got, ref)
		}
		if m := mounts[filepath.Dir(env[setting])]; !m.ReadOnly {
			t.Errorf("the secrets are mounted writable")
		}
	}
	if v, _, ok := mountedAt(env["KUKIE_PIPELINE_CACHE_DIR"]); !ok || v.EmptyDir == nil || mounts[env["KUKIE_PIPELINE_CACHE_DIR"]].ReadOnly {
		t.Errorf("the cache directory %q is not a writable emptyDir: %+v", env["KUKIE_PIPELINE_CACHE_DIR"], v)
	}

	// The pods start with a configuration the production profile accepts, but for
	// the settings only the operator can give; the chart's shutdown timeout is the one
	// the service uses, and the pod is given longer than that to stop.
	cfg, problems := startConfig(t, cm, env)
	if !slices.Equal(problems, want.problems) {
		t.Errorf("the production profile refuses %q, want %q", problems, want.problems)
	}
	if cfg.Server.ShutdownTimeout != want.shutdown {
		t.Errorf("server.shutdown_timeout %s, want %s", cfg.Server.ShutdownTimeout, want.shutdown)
	}
	if cfg.Server.DrainDelay != want.drain {
		t.Errorf("server.drain_delay %s, want %s", cfg.Server.DrainDelay, want.drain)
	}
	if grace := pod.Spec.TerminationGracePeriodSeconds; grace == nil || time.Duration(*grace)*time.Second <= cfg.Server.DrainDelay+cfg.Server.ShutdownTimeout {
		t.Errorf("terminationGracePeriodSeconds %v is not longer than server.drain_delay %s and server.shutdown_timeout %s together",
			ptr.Deref(grace, 0), cfg.Server.DrainDelay, cfg.Server.ShutdownTimeout)
	}
	if want.logLevel != "" && cfg.Log.Level != want.logLevel {
		t.Errorf("log level %q, want %q from extraEnv", cfg.Log.Level, want.logLevel)
	}

	var svc corev1.Service
	if !typed(t, r, "Service", &svc) {
		t.Fatal("no Service")
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("the Service selects %v, not the pods %v", svc.Spec.Selector, pod.Labels)
	}
	svcPorts := map[string]corev1.ServicePort{}
	for _, p := range svc.Spec.Ports {
		svcPorts[p.Name] = p
		if _, ok := ports[p.TargetPort.String()]; !ok {
			t.Errorf("Service port %s targets %s, which the container does not have", p.Name, p.TargetPort.String())
		}
	}
	if _, ok := svcPorts["http"]; !ok {
		t.Errorf("the Service has no http port: %v", svc.Spec.Ports)
	}

	if pod.Spec.ServiceAccountName != want.serviceAccount {
		t.Errorf("the pods run as service account %q, want %q", pod.Spec.ServiceAccountName, want.serviceAccount)
	}
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	hasRole, hasBinding := typed(t, r, "ClusterRole", &role), typed(t, r, "ClusterRoleBinding", &binding)
	if hasRole != (want.rbacRules > 0) || hasBinding != hasRole {
		t.Errorf("ClusterRole %v, binding %v, want %v", hasRole, hasBinding, want.rbacRules > 0)
	}
	if hasRole {
		apps := rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"applications"}, Verbs: []string{"get", "list", "watch"}}
		if len(role.Rules) != want.rbacRules || fmt.Sprint(role.Rules[0]) != fmt.Sprint(apps) {
			t.Errorf("ClusterRole rules %+v, want %+v and %d more", role.Rules, apps, want.rbacRules-1)
		}
		s := binding.Subjects
		if binding.RoleRef.Name != role.Name || len(s) != 1 || s[0].Kind != "ServiceAccount" || s[0].Name != want.serviceAccount || s[0].Namespace != namespace {
			t.Errorf("the binding %+v does not bind %s to %s/%s", binding, role.Name, namespace, want.serviceAccount)
		}
	}
	var sa corev1.ServiceAccount
	if typed(t, r, "ServiceAccount", &sa) && sa.Name != want.serviceAccount {
		t.Errorf("ServiceAccount %s, want %s", sa.Name, want.serviceAccount)
	}

	var pdb policyv1.PodDisruptionBudget
	if typed(t, r, "PodDisruptionBudget", &pdb) != want.pdb {
		t.Errorf("PodDisruptionBudget rendered %v, want %v", !want.pdb, want.pdb)
	} else if want.pdb {
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			t.Errorf("the PodDisruptionBudget does not select the pods: %v", pdb.Spec.Selector)
		}
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MinAvailable != nil {
			t.Errorf("the PodDisruptionBudget sets %+v, want maxUnavailable alone", pdb.Spec)
		}
	}

	var ing networkingv1.Ingress
	if typed(t, r, "Ingress", &ing) != want.ingress {
		t.Errorf("Ingress rendered %v, want %v", !want.ingress, want.ingress)
	} else if want.ingress {
		for _, rule := range ing.Spec.Rules {
			for _, p := range rule.HTTP.Paths {
				b := p.Backend.Service
				if b == nil || b.Name != svc.Name || b.Port.Name != "http" {
					t.Errorf("Ingress path %s goes to %+v, want %s:http", p.Path, b, svc.Name)
				}
			}
		}
	}

	var mon unstructured.Unstructured
	for _, o := range r.objects {
		if o.GetKind() == "ServiceMonitor" {
			mon = *o
		}
	}
	if (mon.Object != nil) != want.serviceMonitor {
		t.Errorf("ServiceMonitor rendered %v, want %v", mon.Object != nil, want.serviceMonitor)
	} else if want.serviceMonitor {
		sel, _, _ := unstructured.NestedStringMap(mon.Object, "spec", "selector", "matchLabels")
		eps, _, _ := unstructured.NestedSlice(mon.Object, "spec", "endpoints")
		if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(svc.Labels)) {
			t.Errorf("the ServiceMonitor selects %v, not the Service %v", sel, svc.Labels)
		}
		for _, ep := range eps {
			port, _ := ep.(map[string]any)["port"].(string)
			if _, ok := svcPorts[port]; !ok {
				t.Errorf("the ServiceMonitor scrapes port %q, which the Service does not have", port)
			}
		}
	}
}

var testKey = sync.OnceValue(func() string {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
})

// startConfig loads the configuration a pod starts with, as the service does: the
// ConfigMap's file, then the container's environment, then the secret files (here
// made up, at the paths the pod would have them). It returns the configuration and
// what the production profile refuses in it, each problem up to its first " (".
func startConfig(t *testing.T, cm corev1.ConfigMap, env map[string]string) (config.Config, []string) {
	t.Helper()
	dir := t.TempDir()
	secrets := map[string]string{
		"KUKIE_GITHUB_PRIVATE_KEY_FILE":    testKey(),
		"KUKIE_GITHUB_WEBHOOK_SECRET_FILE": "webhook-secret\n",
		"KUKIE_GITHUB_CLIENT_SECRET_FILE":  "client-secret\n",
		"KUKIE_ENCRYPTION_KEY_FILE":        base64.StdEncoding.EncodeToString(make([]byte, config.EncryptionKeyBytes)) + "\n",
		"KUKIE_DATABASE_URL_FILE":          "postgres://kukie:pw@db.example:5432/kukie?sslmode=require\n",
	}
	local := map[string]string{}
	for k, v := range env {
		local[k] = v
	}
	for name, content := range secrets {
		if env[name] == "" {
			t.Fatalf("the container does not set %s", name)
		}
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		local[name] = f
	}
	cfgFile := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgFile, []byte(cm.Data[filepath.Base(env["KUKIE_CONFIG"])]), 0o600); err != nil {
		t.Fatal(err)
	}
	if env["KUKIE_PROFILE"] != string(config.Production) {
		t.Errorf("KUKIE_PROFILE %q, want production", env["KUKIE_PROFILE"])
	}
	cfg, loadErr := config.Load(cfgFile, func(k string) (string, bool) { v, ok := local[k]; return v, ok })
	err := config.Check(cfg, config.Production, loadErr)
	if err == nil {
		return cfg, nil
	}
	var verr *config.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("the configuration does not load: %v", err)
	}
	var out []string
	for _, p := range verr.Problems {
		p, _, _ = strings.Cut(p, " (")
		out = append(out, p)
	}
	return cfg, out
}

// lintErrors runs helm lint's rules on the chart with values over its defaults and
// returns every finding above INFO.
func lintErrors(values map[string]any) []string {
	kv, err := common.ParseKubeVersion(kubeVersion)
	if err != nil {
		return []string{err.Error()}
	}
	res := lint.RunAll(chartDir, values, "kukie", lint.WithKubeVersion(kv))
	var out []string
	for _, m := range res.Messages {
		if m.Severity > support.InfoSev {
			out = append(out, m.Error())
		}
	}
	return out
}

func TestChartPassesHelmLint(t *testing.T) {
	for name, tc := range chartCases {
		t.Run(name, func(t *testing.T) {
			if errs := lintErrors(tc.values); len(errs) > 0 {
				t.Errorf("helm lint:\n%s", strings.Join(errs, "\n"))
			}
		})
	}
	// The schema is part of lint: a misspelt or mistyped value is found.
	errs := lintErrors(map[string]any{"replicas": 3, "port": "http"})
	if got := strings.Join(errs, "\n"); !strings.Contains(got, "replicas") || !strings.Contains(got, "port") {
		t.Errorf("lint of values with an unknown key and a string port found:\n%s", got)
	}
}

// TestChartRefusesValuesItCannotHonour renders values the chart must refuse with a
// reason: settings of config the chart sets itself, and values its schema rejects.
func TestChartRefusesValuesItCannotHonour(t *testing.T) {
	tests := map[string]struct {
		values map[string]any
		want   string
	}{
		"listen address in config":   {inConfig("server", "address", "0.0.0.0:9000"), "config.server.address is set by the chart"},
		"shutdown timeout in config": {inConfig("server", "shutdown_timeout", "5m"), "config.server.shutdown_timeout is set by the chart"},
		"drain delay in config":      {inConfig("server", "drain_delay", "1m"), "config.server.drain_delay is set by the chart"},
		"secret file in config":      {inConfig("github", "private_key_file", "/key.pem"), "config.github.private_key_file is set by the chart"},
		"database in config":         {inConfig("database", "url", "sqlite:other.db"), "config.database.url is set by the chart"},
		"metrics on the main port's number": {
			values: map[string]any{"metrics": map[string]any{"port": 8080}},
			want:   "metrics.port must differ from port",
		},
		"misspelt value": {
			values: map[string]any{"replica": 3},
			want:   "replica",
		},
		"secret without a key": {
			values: map[string]any{"secrets": map[string]any{"encryptionKey": map[string]any{"name": "x", "key": ""}}},
			want:   "encryptionKey",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := render("kukie-gitops", "kukie", tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// inConfig is values that set one key of the service's configuration.
func inConfig(section, key string, v any) map[string]any {
	return map[string]any{"config": map[string]any{section: map[string]any{key: v}}}
}

func TestPlainManifestsAreTheChartsDefaults(t *testing.T) {
	want := plainManifests(t)
	if *update {
		if err := os.WriteFile(plainFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(plainFile)
	if err != nil {
		t.Fatalf("%v (go test ./deploy -run TestPlainManifests -update writes it)", err)
	}
	if string(got) != want {
		t.Errorf("%s is not what the chart renders with its defaults; run go test ./deploy -run TestPlainManifests -update and commit it", plainFile)
	}
}

// plainManifests is the chart rendered with its defaults for people who apply YAML
// with kubectl, without the labels that name Helm as their manager.
func plainManifests(t *testing.T) string {
	t.Helper()
	r := mustRender(t, plainRelease, plainNamespace, nil)
	var b strings.Builder
	b.WriteString("# kukie-gitops for kubectl apply, in namespace " + plainNamespace + ": the Helm chart\n" +
		"# deploy/chart/kukie-gitops rendered with its default values, generated by its test\n" +
		"# (go test ./deploy -run TestPlainManifests -update); do not edit by hand.\n" +
		"# Before applying: create the namespace and the Secret kukie-gitops (keys\n" +
		"# private-key.pem, webhook-secret, client-secret, encryption-key, database-url),\n" +
		"# set github.app_id, app_slug, client_id and server.public_url in the ConfigMap's\n" +
		"# config.yml, and point the Deployment's image at yours. See README, Deploying.\n")
	for _, line := range strings.SplitAfter(strings.TrimSpace(r.manifest)+"\n", "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "helm.sh/chart: ") || trimmed == "app.kubernetes.io/managed-by: Helm" {
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}
