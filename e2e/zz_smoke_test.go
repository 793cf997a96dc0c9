//go:build e2e

package e2e

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/e2e/argocdharness"
)

func TestSmoke(t *testing.T) {
	st := time.Now()
	s := newSuite(t)
	t.Logf("suite up in %s", time.Since(st))
	t.Cleanup(func() { t.Logf("cleanup start %s", time.Now().Format("15:04:05.000")) })
	s.argo.CreateApplication(t, argocdharness.Application{Name: "web", RepoURL: s.repoURL, Path: "apps/web", TargetRevision: "main", DestinationNamespace: "e2e-web", Automated: true})
	app, d := s.argo.WaitApplication(t, argocdharness.Namespace, "web", 90*time.Second, "sync", func(a *unstructured.Unstructured) bool {
		return argocdharness.SyncStatus(a) == "Synced" && argocdharness.OperationPhase(a) == "Succeeded"
	})
	_ = app
	t.Logf("synced in %s", d)
}
