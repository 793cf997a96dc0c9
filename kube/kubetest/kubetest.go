// Package kubetest runs a real Kubernetes API server (kube-apiserver and etcd under
// controller-runtime's envtest) with Argo CD's Application CRD from testdata/crds, for
// tests of code that reads clusters. The binaries come from KUKIE_ENVTEST_ASSETS or are
// built once by hack/envtest-assets.sh. Without them tests are skipped with a loud
// message, except in CI (CI=true), where that is a failure.
//
// Starting a control plane takes seconds, so a test binary shares one: call Main from
// TestMain and Start from tests. Tests on the shared server create their objects in
// their own namespaces (Namespace) and Create deletes them again. A test that needs a
// server of its own (no CRD, stopped mid-test) uses StartPrivate. NewAccount gives a
// ServiceAccount whose tokens and rights a test can revoke mid-test.
package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kukie/kukie-gitops/internal/moduleroot"
)

// AssetsEnv names the environment variable pointing at a directory holding
// kube-apiserver and etcd binaries.
const AssetsEnv = "KUKIE_ENVTEST_ASSETS"

// Env is a running API server.
type Env struct {
	// Config talks to the API server as a cluster admin.
	Config *rest.Config
	// Kubeconfig is an admin kubeconfig document for the server, and KubeconfigPath a
	// file holding it.
	Kubeconfig     []byte
	KubeconfigPath string
	// Client and Dynamic are admin clients.
	Client  client.Client
	Dynamic dynamic.Interface

	env    *envtest.Environment
	shared bool
	dir    string

	stopOnce sync.Once
	stopErr  error
}

// Options select what a private server starts with.
type Options struct {
	// WithoutApplicationCRD starts a server that does not serve Argo CD Applications.
	WithoutApplicationCRD bool
}

var shared struct {
	sync.Mutex
	inMain bool
	env    *Env
	err    error
}

// Main runs the tests of a package and stops the shared API server afterwards. Call it
// from TestMain:
//
//	func TestMain(m *testing.M) { kubetest.Main(m) }
func Main(m *testing.M) {
	shared.Lock()
	shared.inMain = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	if shared.env != nil {
		if err := shared.env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stop shared API server: %v\n", err)
		}
	}
	shared.Unlock()
	os.Exit(code)
}

// Start returns the API server shared by the test binary, starting it on first use.
// Without Main in TestMain there is nothing to stop a shared server at exit, so each
// call then starts a private one.
func Start(tb testing.TB) *Env {
	tb.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.inMain {
		tb.Logf("kubetest: no kubetest.Main in TestMain; starting a private API server")
		return StartPrivate(tb, Options{})
	}
	if shared.env == nil && shared.err == nil {
		shared.env, shared.err = start(Options{})
		if shared.env != nil {
			shared.env.shared = true
		}
	}
	if shared.err != nil {
		unavailable(tb, shared.err)
	}
	return shared.env
}

// StartPrivate starts an API server for this test alone; it is stopped when the test
// ends.
func StartPrivate(tb testing.TB, opts Options) *Env {
	tb.Helper()
	e, err := start(opts)
	if err != nil {
		unavailable(tb, err)
	}
	tb.Cleanup(func() {
		if err := e.Stop(); err != nil {
			tb.Errorf("kubetest: stop API server: %v", err)
		}
	})
	return e
}

// errAssets marks failures to find or build the binaries, the only reason to skip.
var errAssets = errors.New("envtest assets unavailable")

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, errAssets) && os.Getenv("CI") != "true" {
		tb.Skipf("kubetest: SKIPPING a test that needs a real API server: %v (run hack/envtest-assets.sh or set %s)", err, AssetsEnv)
	}
	tb.Fatalf("kubetest: start API server: %v", err)
}

var quietControllerRuntime sync.Once

func start(opts Options) (*Env, error) {
	quietControllerRuntime.Do(func() { ctrllog.SetLogger(logr.Discard()) })
	root, err := moduleroot.Find()
	if err != nil {
		return nil, err
	}
	assets, err := assetsDir(root)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, fmt.Errorf("create work directory: %w", err)
	}
	te := &envtest.Environment{
		ControlPlaneStartTimeout: time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	te.ControlPlane.GetAPIServer().Path, err = dieWithParent(dir, filepath.Join(assets, "kube-apiserver"))
	if err != nil {
		return nil, err
	}
	te.ControlPlane.Etcd = &envtest.Etcd{}
	te.ControlPlane.Etcd.Path, err = dieWithParent(dir, filepath.Join(assets, "etcd"))
	if err != nil {
		return nil, err
	}
	if !opts.WithoutApplicationCRD {
		te.CRDDirectoryPaths = []string{filepath.Join(root, "testdata", "crds")}
		te.ErrorIfCRDPathMissing = true
	}
	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start envtest with assets %s: %w", assets, err)
	}
	e := &Env{Config: cfg, Kubeconfig: te.KubeConfig, env: te, dir: dir}
	e.KubeconfigPath = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, e.Kubeconfig, 0o600); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}
	if e.Client, err = client.New(cfg, client.Options{}); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("admin client: %w", err)
	}
	if e.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("admin dynamic client: %w", err)
	}
	return e, nil
}

// dieWithParent writes a launcher that makes the binary receive SIGKILL when the test
// process dies, so a test binary killed by a timeout leaves no API server behind.
// Without setpriv the binary is used directly.
func dieWithParent(dir, binary string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return binary, nil
	}
	launcher := filepath.Join(dir, filepath.Base(binary))
	script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", shellQuote(setpriv), shellQuote(binary))
	if err := os.WriteFile(launcher, []byte(script), 0o700); err != nil {
		return "", fmt.Errorf("write launcher for %s: %w", binary, err)
	}
	return launcher, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// assetsDir finds the kube-apiserver and etcd binaries.
func assetsDir(root string) (string, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		return checkAssets(dir)
	}
	script := filepath.Join(root, "hack", "envtest-assets.sh")
	cmd := exec.Command("bash", script)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s: %v: %s", errAssets, script, err, lastLines(stderr.String(), 5))
	}
	return checkAssets(strings.TrimSpace(lastLines(stdout.String(), 1)))
}

func checkAssets(dir string) (string, error) {
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		st, err := os.Stat(filepath.Join(dir, bin))
		if err != nil {
			return "", fmt.Errorf("%w: %v", errAssets, err)
		}
		if st.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%w: %s is not executable", errAssets, filepath.Join(dir, bin))
		}
	}
	return dir, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop stops the API server. It is safe to call more than once; tests call it to
// make the server unreachable.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		e.stopErr = e.env.Stop()
		if err := os.RemoveAll(e.dir); err != nil && e.stopErr == nil {
			e.stopErr = err
		}
	})
	return e.stopErr
}

// Namespace creates a namespace with a unique name starting with prefix. Namespaces
// are not deleted: envtest runs no namespace controller to finish a deletion, and
// Create already removes the objects.
func (e *Env) Namespace(tb testing.TB, prefix string) string {
	tb.Helper()
	ns := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"generateName": prefix + "-"},
	}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		tb.Fatalf("create namespace %s-*: %v", prefix, err)
	}
	return ns.GetName()
}

// Create creates the objects in order. On the shared server they are deleted when the
// test ends; a private server is discarded whole.
func (e *Env) Create(tb testing.TB, objs ...*unstructured.Unstructured) {
	tb.Helper()
	ctx := context.Background()
	for _, o := range objs {
		if err := e.Client.Create(ctx, o); err != nil {
			tb.Fatalf("create %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		if e.shared {
			obj := o
			tb.Cleanup(func() {
				if err := e.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
					tb.Errorf("delete %s %s/%s: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
				}
			})
		}
	}
}

// User is a user of the API server with a client configuration of its own.
type User struct {
	Config     *rest.Config
	Kubeconfig []byte
}

// AddUser provisions a user with the given groups and no other rights; bind roles to
// it to grant some.
func (e *Env) AddUser(tb testing.TB, name string, groups ...string) User {
	tb.Helper()
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		tb.Fatalf("add user %s: %v", name, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		tb.Fatalf("kubeconfig of user %s: %v", name, err)
	}
	return User{Config: u.Config(), Kubeconfig: kc}
}
