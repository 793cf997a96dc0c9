//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/e2e/argocdharness"
	"github.com/kukie/kukie-gitops/kube"
)

// testSelfHealAndManualDrift shows the problem the service exists for on the real
// thing: a direct change to a self-healing app is reverted within seconds (the
// decision says git, self_heal, before anyone tries), and a direct change to a manual
// app leaves it OutOfSync, which the app detail shows.
func (s *suite) testSelfHealAndManualDrift(t *testing.T) {
	cluster := s.cluster(t)

	t.Run("self-heal reverts a direct change", func(t *testing.T) {
		const ns, name = "e2e-selfheal", "api"
		s.deployApp(t, argocdharness.Application{Name: name, Path: "apps/selfheal", DestinationNamespace: ns, Automated: true, SelfHeal: true})
		ref := deploymentRef(ns, name)

		d := cluster.Decide(context.Background(), []argocd.ResourceRef{ref})
		if d.Path != argocd.PathGit || !d.Known || d.Level != argocd.LevelSelfHeal {
			t.Fatalf("decision before the change: path %s known %t level %s, want git, known, self_heal; reason: %s", d.Path, d.Known, d.Level, d.Reason)
		}
		if w := d.Payload().Warning; !strings.Contains(w, "revert") {
			t.Errorf("warning %q does not say the change will be reverted", w)
		}

		// kubectl scale deployment/api --replicas=5
		s.scale(t, ns, name, 5)
		reverted := argocdharness.Wait(t, time.Minute, "revert of replicas to 2", func(ctx context.Context) (bool, error) {
			n, err := s.replicas(ctx, ns, name)
			return err == nil && n == 2, err
		})
		t.Logf("e2e: self-heal reverted a direct scale in %s", reverted.Round(time.Millisecond))

		// The revert is Argo CD's self-heal: an automated sync of the drifted resources
		// that counts as a self-heal attempt (autoHealAttemptsCount; the first sync
		// counts none).
		s.argo.WaitApplication(t, argocdharness.Namespace, name, time.Minute, "a finished self-heal sync", func(u *unstructured.Unstructured) bool {
			automated, _, _ := unstructured.NestedBool(u.Object, "status", "operationState", "operation", "initiatedBy", "automated")
			attempts, _, _ := unstructured.NestedInt64(u.Object, "status", "operationState", "operation", "sync", "autoHealAttemptsCount")
			return automated && attempts > 0 && argocdharness.OperationPhase(u) == "Succeeded"
		})
	})

	t.Run("manual app goes OutOfSync and the detail shows why", func(t *testing.T) {
		const ns, name = "e2e-manual", "worker"
		s.deployApp(t, argocdharness.Application{Name: name, Path: "apps/manual", DestinationNamespace: ns})
		ref := deploymentRef(ns, name)

		d := cluster.Decide(context.Background(), []argocd.ResourceRef{ref})
		if d.Path != argocd.PathGit || d.Level != argocd.LevelManual {
			t.Fatalf("decision: path %s level %s, want git manual; reason: %s", d.Path, d.Level, d.Reason)
		}

		s.scale(t, ns, name, 3)
		_, took := s.argo.WaitApplication(t, argocdharness.Namespace, name, time.Minute, "OutOfSync after the direct change", func(u *unstructured.Unstructured) bool {
			return argocdharness.AppStatus(u).Sync.Status == argocd.SyncOutOfSync
		})
		t.Logf("e2e: manual app reported OutOfSync %s after a direct scale", took.Round(time.Millisecond))

		detail, err := cluster.AppDetail(context.Background(), argocdharness.Namespace, name, kube.Refresh)
		if err != nil {
			t.Fatalf("app detail: %v", err)
		}
		if detail.Sync != argocd.SyncOutOfSync || detail.Level != argocd.LevelManual || detail.Automated {
			t.Errorf("detail sync %s level %s automated %t, want OutOfSync, manual, not automated", detail.Sync, detail.Level, detail.Automated)
		}
		var outOfSync []string
		for _, r := range detail.OutOfSync {
			outOfSync = append(outOfSync, r.Ref().String())
		}
		if want := ref.String(); len(outOfSync) != 1 || outOfSync[0] != want {
			t.Errorf("detail names OutOfSync resources %q, want [%s]", outOfSync, want)
		}

		// Nothing syncs a manual app: the direct change is still live.
		n, err := s.replicas(context.Background(), ns, name)
		if err != nil || n != 3 {
			t.Errorf("replicas = %d (%v), want the direct change (3) still in place", n, err)
		}
	})
}
