//go:build e2e

package e2e

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/e2e/argocdharness"
)

func TestSmoke(t *testing.T) {
	s := newSuite(t)
	s.argo.CreateApplication(t, argocdharness.Application{Name: "web", RepoURL: s.repoURL, Path: "apps/web", TargetRevision: "main", DestinationNamespace: "e2e-web", Automated: true})
	app, d := s.argo.WaitApplication(t, argocdharness.Namespace, "web", 90*time.Second, "sync", func(a *unstructured.Unstructured) bool {
		return argocdharness.SyncStatus(a) == "Synced" && argocdharness.OperationPhase(a) == "Succeeded"
	})
	t.Logf("synced in %s: %s", d, argocdharness.StatusSummary(app))
}
