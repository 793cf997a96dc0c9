//go:build e2e

package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/internal/githubtest"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

const (
	// gitopsRepo is the repository Argo CD deploys from, served by the fake GitHub.
	gitopsRepo = "acme/gitops"
	// teamNamespace holds an Application outside Argo CD's namespace (apps in any
	// namespace).
	teamNamespace = "team-a"

	// syncTimeout bounds a first sync: cold, Argo CD needs 13–15 s to start
	// reconciling; later syncs take a few seconds.
	syncTimeout = 90 * time.Second
)

// suite is one Argo CD, API server and fake GitHub shared by the scenarios; each
// scenario deploys into namespaces of its own.
type suite struct {
	kube    *kubetest.Env
	argo    *argocdharness.ArgoCD
	github  *githubtest.Server
	repoURL string
}

// TestArgoCD runs the scenarios against one real Argo CD. Each scenario is a subtest so
// its time is reported on its own; go test -run 'TestArgoCD/SelfHeal' runs one.
func TestArgoCD(t *testing.T) {
	s := newSuite(t)
	t.Run("RenderParity", s.testRenderParity)
	t.Run("HelmRepositoryParity", s.testHelmRepositoryParity)
	t.Run("OCIRegistryParity", s.testOCIRegistryParity)
	t.Run("TrackingConformance", s.testTrackingConformance)
	t.Run("SelfHealAndManualDrift", s.testSelfHealAndManualDrift)
	t.Run("AppListAndDetail", s.testAppListAndDetail)
	t.Run("Pipeline", s.testPipeline)
}

func newSuite(t *testing.T) *suite {
	t.Helper()
	start := time.Now()
	kube := kubetest.StartPrivate(t, kubetest.Options{})
	gh := githubtest.New(t)
	gh.CreateRepo(t, "acme", "gitops", readTree(t, "testdata/gitops"), "main")
	// Argo CD reads the repository without credentials, like a public GitHub repo.
	gh.SetPrivate(t, gitopsRepo, false)
	argo := argocdharness.Start(t, kube.Config, argocdharness.Options{ApplicationNamespaces: []string{teamNamespace}})
	t.Logf("e2e: api server, fake github and argo cd up in %s", time.Since(start).Round(time.Millisecond))
	return &suite{kube: kube, argo: argo, github: gh, repoURL: gh.CloneURL(gitopsRepo)}
}

// readTree reads every file under dir into a path → content map for the fake GitHub.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatalf("read fixture repository %s: %v", dir, err)
	}
	return files
}
