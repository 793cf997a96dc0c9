package argocdharness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kukie/kukie-gitops/internal/moduleroot"
)

const (
	// argocdDirEnv points at a directory made by hack/argocd-build.sh.
	argocdDirEnv = "KUKIE_ARGOCD_DIR"
	// argocdBuildErrorEnv carries a failed build's reason from Main to the tests, which
	// may run in a network namespace where a second attempt cannot download anything.
	argocdBuildErrorEnv = "KUKIE_ARGOCD_BUILD_ERROR"
	// envtestAssetsEnv is read by kube/kubetest.
	envtestAssetsEnv = "KUKIE_ENVTEST_ASSETS"
)

// prepareAssets builds (or finds in the cache) what the tests run, and records the
// outcome in the environment for the tests.
func prepareAssets() {
	if os.Getenv(envtestAssetsEnv) == "" {
		if dir, err := runBuildScript("envtest-assets.sh"); err == nil {
			os.Setenv(envtestAssetsEnv, dir)
		} else {
			// kube/kubetest reports this itself when a test starts the API server.
			fmt.Fprintf(os.Stderr, "argocdharness: %v\n", err)
		}
	}
	if os.Getenv(argocdDirEnv) == "" {
		if dir, err := runBuildScript("argocd-build.sh"); err == nil {
			os.Setenv(argocdDirEnv, dir)
		} else {
			os.Setenv(argocdBuildErrorEnv, err.Error())
		}
	}
}

// argocdDir returns the directory with the Argo CD binaries and CRDs, building them
// when Main has not.
func argocdDir() (string, error) {
	dir := os.Getenv(argocdDirEnv)
	if dir == "" {
		if reason := os.Getenv(argocdBuildErrorEnv); reason != "" {
			return "", errors.New(reason)
		}
		var err error
		if dir, err = runBuildScript("argocd-build.sh"); err != nil {
			return "", err
		}
	}
	for _, name := range []string{"argocd", "argocd-application-controller", "argocd-repo-server", "kustomize", "helm", manifestClient, "git-verify-wrapper.sh", "crds/application-crd.yaml", "crds/appproject-crd.yaml", "VERSION"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("argo cd assets in %s incomplete (rebuild with hack/argocd-build.sh): %w", dir, err)
		}
	}
	return dir, nil
}

// runBuildScript runs hack/<name> from the repository root and returns the directory
// it prints.
func runBuildScript(name string) (string, error) {
	root, err := moduleroot.Find()
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join(root, "hack", name))
	cmd.Dir = root
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		tail := strings.TrimSpace(stderr.String())
		if len(tail) > 2000 {
			tail = "…" + tail[len(tail)-2000:]
		}
		return "", fmt.Errorf("hack/%s: %w: %s", name, err, tail)
	}
	dir := strings.TrimSpace(stdout.String())
	if i := strings.LastIndex(dir, "\n"); i >= 0 {
		dir = dir[i+1:]
	}
	if dir == "" {
		return "", fmt.Errorf("hack/%s printed no directory", name)
	}
	return dir, nil
}
