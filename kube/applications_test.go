package kube_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// Fifty Applications across two namespaces: every 5th out of sync, every 10th failed
// with an error condition, every 3rd self-healing.
func TestAppListAndDetailOnFiftyApplications(t *testing.T) {
	env := kubetest.StartPrivate(t, kubetest.Options{})
	argoNS, teamNS, ns := env.Namespace(t, "argocd"), env.Namespace(t, "team-a"), env.Namespace(t, "work")
	for i := range 50 {
		app := kubetest.App{
			Namespace: argoNS, ControllerNamespace: argoNS, DestinationNamespace: ns,
			Name:    fmt.Sprintf("app-%02d", i),
			RepoURL: fmt.Sprintf("https://github.com/kukie-demo/repo-%d.git", i%4),
			Path:    fmt.Sprintf("apps/app-%02d", i), Automated: i%3 == 0, SelfHeal: i%3 == 0,
			Resources: []kubetest.AppResource{
				{Group: "apps", Kind: "Deployment", Namespace: ns, Name: fmt.Sprintf("app-%02d", i)},
				{Kind: "ConfigMap", Namespace: ns, Name: fmt.Sprintf("app-%02d-config", i)},
			},
		}
		if i >= 25 {
			app.Namespace = teamNS
		}
		if i%5 == 0 {
			app.Sync = argocd.SyncOutOfSync
			app.Resources[0].Sync = argocd.SyncOutOfSync
		}
		if i%10 == 0 {
			app.Health = argocd.HealthDegraded
			app.OperationPhase = argocd.PhaseFailed
			app.Conditions = []kubetest.AppCondition{
				{Type: "SyncError", Message: "one or more objects failed to apply"},
				{Type: "OrphanedResourceWarning", Message: "1 orphaned resource"},
			}
		}
		env.Create(t, kubetest.Application(app))
	}
	c := clusterFor(t, env.Kubeconfig, kube.Options{})
	ctx := context.Background()

	l, err := c.AppList(ctx, kube.Cached)
	if err != nil {
		t.Fatal(err)
	}
	if l.Total != 50 || l.OutOfSync != 10 || l.Synced != 40 || l.SelfHeal != 17 || len(l.Repos) != 4 {
		t.Errorf("list = total %d synced %d outOfSync %d selfHeal %d repos %d; want 50 40 10 17 4",
			l.Total, l.Synced, l.OutOfSync, l.SelfHeal, len(l.Repos))
	}
	// The five failed apps first, then the other five out of sync, then the rest.
	for i, item := range l.Apps {
		var want string
		switch {
		case i < 5:
			want = "failed"
		case i < 10:
			want = "out of sync"
		default:
			want = ""
		}
		switch want {
		case "failed":
			if item.Health != argocd.HealthDegraded {
				t.Errorf("position %d is %s (%s), want a failed app", i, item.Name, item.Health)
			}
		case "out of sync":
			if item.Sync != argocd.SyncOutOfSync || item.Health == argocd.HealthDegraded {
				t.Errorf("position %d is %s (%s/%s), want an out-of-sync app", i, item.Name, item.Sync, item.Health)
			}
		default:
			if len(item.Problems) != 0 {
				t.Errorf("position %d is %s with problems %q after the problem apps", i, item.Name, item.Problems)
			}
		}
	}

	d, err := c.AppDetail(ctx, teamNS, "app-30", kube.Cached)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.OutOfSync) != 1 || d.OutOfSync[0].Name != "app-30" || d.OutOfSync[0].Kind != "Deployment" {
		t.Errorf("outOfSync = %+v", d.OutOfSync)
	}
	if len(d.Errors) != 1 || d.Errors[0].Type != "SyncError" || len(d.Warnings) != 1 || d.Warnings[0].Type != "OrphanedResourceWarning" {
		t.Errorf("errors = %+v, warnings = %+v", d.Errors, d.Warnings)
	}
	if !d.SelfHeal || d.Level != argocd.LevelSelfHeal || d.Revision == "" {
		t.Errorf("detail = %+v", d)
	}

	for name, key := range map[string][2]string{
		"application that does not exist":     {argoNS, "app-99"},
		"application whose namespace is gone": {"deleted-namespace", "app-01"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.AppDetail(ctx, key[0], key[1], kube.Cached)
			if got := kube.ClassOf(err); got != argocd.FailureNotFound {
				t.Errorf("class = %q (%v), want not_found", got, err)
			}
		})
	}
}

func TestGetApplicationForDeploymentTracking(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	c := clusterFor(t, env.Kubeconfig, kube.Options{})

	app, err := c.GetApplication(context.Background(), w.argoNS, "reports", kube.Refresh)
	if err != nil {
		t.Fatal(err)
	}
	op := app.Status.OperationState
	if app.Status.Sync.Revision != "v3.2.0" || app.Status.Health.Status != argocd.HealthDegraded || op == nil || op.Phase != argocd.PhaseFailed {
		t.Fatalf("status = %+v", app.Status)
	}
	if op.SyncResult == nil || op.SyncResult.Revision != "v3.2.0" || op.Message == "" {
		t.Errorf("operation state = %+v", op)
	}
}
