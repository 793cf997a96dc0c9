package argocdharness

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

const (
	// Namespace is where Argo CD's own configuration and its default AppProject live.
	Namespace = "argocd"
	// InClusterServer is the destination of Applications deploying to the cluster Argo CD
	// runs in; ARGOCD_FAKE_IN_CLUSTER maps it to the controller's kubeconfig.
	InClusterServer = "https://kubernetes.default.svc"

	startTimeout = 2 * time.Minute
	// logDirEnv keeps the logs of the started programs in this directory (for CI
	// artifacts); without it they are removed with the test.
	logDirEnv = "KUKIE_E2E_LOG_DIR"
)

// Options adjusts the Argo CD the harness starts.
type Options struct {
	// ApplicationNamespaces are namespaces besides Namespace where Applications may
	// live (Argo CD's "apps in any namespace"); they are created and allowed in the
	// default AppProject.
	ApplicationNamespaces []string
}

// ArgoCD is a running Argo CD: Redis, repo server and application controller, with its
// configuration and CRDs installed in the API server.
type ArgoCD struct {
	// Version is the Argo CD release that runs.
	Version string
	// StartupTime is the time from starting Redis until the controller served its
	// health endpoint (configuration and CRDs were installed before).
	StartupTime time.Duration

	Config  *rest.Config
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface

	redis, repoServer, controller *Process
	redisAddr, repoServerAddr     string
	// dir holds the Argo CD build (hack/argocd-build.sh).
	dir string
}

// Start installs Argo CD's CRDs and configuration into the API server behind cfg and
// starts Argo CD against it. Everything is stopped, by process id, when t ends. Without
// the Argo CD build the test is skipped, loudly, and fails when CI=true.
func Start(t testing.TB, cfg *rest.Config, opts Options) *ArgoCD {
	t.Helper()
	dir, err := argocdDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("argo cd is required in CI: %v", err)
		}
		t.Skipf("SKIPPED: no argo cd build to test against (run hack/argocd-build.sh): %v", err)
	}
	version, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		t.Fatalf("read argo cd version: %v", err)
	}
	a := &ArgoCD{Version: strings.TrimSpace(string(version)), Config: cfg, dir: dir}
	if a.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	if a.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatalf("kubernetes client: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(dir, "crds")},
		ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("install argo cd crds: %v", err)
	}
	if err := a.installConfiguration(ctx, opts); err != nil {
		t.Fatal(err)
	}

	// Unix socket paths are limited to 108 bytes; t.TempDir can be longer.
	work, err := os.MkdirTemp("", "kukie-e2e-")
	if err != nil {
		t.Fatalf("work dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(work) })
	logs := logDir(t)
	for _, d := range []string{filepath.Join(work, "home"), filepath.Join(work, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatalf("work dir: %v", err)
		}
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.stop(t) })

	env := []string{
		// The build's directory comes first: the repo server runs the kustomize and
		// helm built with it, never ones the machine may have.
		"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + filepath.Join(work, "home"),
		"TMPDIR=" + filepath.Join(work, "tmp"),
		"ARGOCD_GPG_ENABLED=false",
		"ARGOCD_ASK_PASS_SOCK=" + filepath.Join(work, "askpass.sock"),
		"LANG=C.UTF-8",
	}
	started := time.Now()
	if err := a.startRedis(ctx, logs, env); err != nil {
		t.Fatal(err)
	}
	if a.repoServerAddr, err = a.startRepoServer(ctx, dir, logs, env); err != nil {
		t.Fatal(err)
	}
	if err := a.startController(ctx, dir, logs, env, kubeconfig, a.repoServerAddr, opts); err != nil {
		t.Fatal(err)
	}
	a.StartupTime = time.Since(started)
	t.Logf("argo cd %s started in %s (redis pid %d, repo-server pid %d, application-controller pid %d)",
		a.Version, a.StartupTime.Round(time.Millisecond), a.redis.PID(), a.repoServer.PID(), a.controller.PID())
	return a
}

// Memory returns the resident memory of the application controller and the repo server.
func (a *ArgoCD) Memory() (controller, repoServer Memory, err error) {
	if controller, err = a.controller.Memory(); err != nil {
		return Memory{}, Memory{}, err
	}
	if repoServer, err = a.repoServer.Memory(); err != nil {
		return Memory{}, Memory{}, err
	}
	return controller, repoServer, nil
}

// ControllerLogTail returns the last n lines the application controller logged, for
// failure messages.
func (a *ArgoCD) ControllerLogTail(n int) string { return a.controller.LogTail(n) }

// stop records memory and stops every started process, newest first.
func (a *ArgoCD) stop(t testing.TB) {
	if a.controller != nil && a.repoServer != nil && a.controller.running() && a.repoServer.running() {
		if c, r, err := a.Memory(); err == nil {
			t.Logf("argo cd memory at the end: application-controller %s, repo-server %s", c, r)
		}
	}
	for _, p := range []*Process{a.controller, a.repoServer, a.redis} {
		if p == nil {
			continue
		}
		if t.Failed() {
			t.Logf("last lines of %s (%s):\n%s", p.name, p.logPath, p.LogTail(40))
		}
		if err := p.stop(); err != nil {
			t.Errorf("stop %v", err)
		}
	}
}

func (a *ArgoCD) startRedis(ctx context.Context, logDir string, env []string) error {
	port, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	// Persistence off: the cache is rebuilt by Argo CD and a dump would only cost time.
	a.redis, err = startProcess("redis", logDir, env, "redis-server",
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no")
	if err != nil {
		return fmt.Errorf("%w (install it with apt-get install redis-server)", err)
	}
	a.redisAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return a.redis.WaitReady(ctx, func(ctx context.Context) error { return pingRedis(ctx, a.redisAddr) })
}

func (a *ArgoCD) startRepoServer(ctx context.Context, dir, logDir string, env []string) (string, error) {
	port, err := freeLoopbackPort()
	if err != nil {
		return "", err
	}
	metricsPort, err := freeLoopbackPort()
	if err != nil {
		return "", err
	}
	a.repoServer, err = startProcess("repo-server", logDir, env, filepath.Join(dir, "argocd-repo-server"),
		"--address", "127.0.0.1", "--port", strconv.Itoa(port),
		"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(metricsPort),
		"--redis", a.redisAddr,
		// --disable-tls alone is refused while the default client CA path is set.
		"--disable-tls", "--client-ca-path=",
		// New commits are seen within seconds instead of the default three minutes.
		"--revision-cache-expiration=5s",
		"--logformat", "text")
	if err != nil {
		return "", err
	}
	// full=true makes the repo server call its own gRPC health service.
	health := fmt.Sprintf("http://127.0.0.1:%d/healthz?full=true", metricsPort)
	if err := a.repoServer.WaitReady(ctx, func(ctx context.Context) error { return httpOK(ctx, health) }); err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

func (a *ArgoCD) startController(ctx context.Context, dir, logDir string, env []string, kubeconfig, repoServerAddr string, opts Options) error {
	metricsPort, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig", kubeconfig, "--namespace", Namespace,
		"--repo-server", repoServerAddr, "--repo-server-plaintext",
		"--redis", a.redisAddr,
		"--metrics-port", strconv.Itoa(metricsPort),
		// Test timings: refresh every 5 s without jitter, self-heal without backoff.
		"--app-resync=5", "--app-resync-jitter=0", "--self-heal-backoff-timeout-seconds=0",
		"--status-processors=4", "--operation-processors=4",
		"--logformat", "text",
	}
	if len(opts.ApplicationNamespaces) > 0 {
		args = append(args, "--application-namespaces", strings.Join(opts.ApplicationNamespaces, ","))
	}
	// The API server of envtest stands in for the cluster Argo CD runs in. The fake
	// in-cluster configuration is loaded the kubectl way (KUBECONFIG), not from
	// --kubeconfig.
	controllerEnv := append(append([]string{}, env...), "ARGOCD_FAKE_IN_CLUSTER=true", "KUBECONFIG="+kubeconfig)
	a.controller, err = startProcess("application-controller", logDir, controllerEnv,
		filepath.Join(dir, "argocd-application-controller"), args...)
	if err != nil {
		return err
	}
	health := fmt.Sprintf("http://127.0.0.1:%d/healthz", metricsPort)
	return a.controller.WaitReady(ctx, func(ctx context.Context) error { return httpOK(ctx, health) })
}

// installConfiguration creates what an Argo CD install puts into its namespace and
// the controller needs: settings, the server secret and the default AppProject.
func (a *ArgoCD) installConfiguration(ctx context.Context, opts Options) error {
	for _, ns := range append([]string{Namespace}, opts.ApplicationNamespaces...) {
		_, err := a.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s: %w", ns, err)
		}
	}
	// Argo CD's settings informers only see objects labelled as part of Argo CD.
	partOf := map[string]string{"app.kubernetes.io/part-of": "argocd"}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: Namespace, Labels: partOf},
		Data: map[string]string{
			// The default since Argo CD 3.0, spelled out because the tracking id is what
			// the service reads.
			"application.resourceTrackingMethod": "annotation",
		},
	}
	if _, err := a.Kube.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create configmap argocd-cm: %w", err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: Namespace, Labels: partOf},
		Data:       map[string][]byte{"server.secretkey": []byte("e2e-server-secret-key")},
	}
	if _, err := a.Kube.CoreV1().Secrets(Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create secret argocd-secret: %w", err)
	}
	sourceNamespaces := make([]any, 0, len(opts.ApplicationNamespaces))
	for _, ns := range opts.ApplicationNamespaces {
		sourceNamespaces = append(sourceNamespaces, ns)
	}
	project := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "AppProject",
		"metadata":   map[string]any{"name": "default", "namespace": Namespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
			"sourceNamespaces":         sourceNamespaces,
		},
	}}
	if _, err := a.Dynamic.Resource(AppProjectResource).Namespace(Namespace).Create(ctx, project, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create appproject default: %w", err)
	}
	return nil
}

// AppProjectResource and ApplicationResource name Argo CD's kinds for the dynamic client.
var (
	AppProjectResource  = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}
	ApplicationResource = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
)

// writeKubeconfig writes cfg as a kubeconfig whose context defaults to Namespace, the
// way the controller finds its own namespace in a cluster.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		CertificateAuthority:     cfg.CAFile,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos["envtest"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData,
		ClientCertificate:     cfg.CertFile,
		ClientKeyData:         cfg.KeyData,
		ClientKey:             cfg.KeyFile,
		Token:                 cfg.BearerToken,
		Username:              cfg.Username,
		Password:              cfg.Password,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest", Namespace: Namespace}
	kc.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

func httpOK(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// pingRedis sends PING in the inline protocol and expects +PONG.
func pingRedis(ctx context.Context, addr string) error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("redis answered %q to PING", strings.TrimSpace(line))
	}
	return nil
}
