package kube_test

import (
	"context"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// An Application created after the cached list was read is found by re-reading the
// list once, so its resources get the Application's level rather than unknown.
func TestDecideRereadsApplicationsForANewOne(t *testing.T) {
	tests := map[string]struct {
		// app and target build the Application created after the cache was warmed and
		// the resource it manages, in namespaces argoNS and ns.
		app       func(argoNS, ns string) kubetest.App
		target    func(argoNS, ns string) (labels, annotations map[string]string)
		wantLevel argocd.Level
		wantBy    argocd.Evidence
	}{
		"tracking annotation": {
			app: func(argoNS, ns string) kubetest.App {
				return kubetest.App{Namespace: argoNS, Name: "checkout", DestinationNamespace: ns, RepoURL: "https://github.com/kukie-demo/deploy", Path: "checkout", Automated: true, SelfHeal: true}
			},
			target: func(argoNS, ns string) (map[string]string, map[string]string) {
				return nil, map[string]string{argocd.TrackingIDAnnotation: argoNS + "_checkout:/ConfigMap:" + ns + "/checkout-settings"}
			},
			wantLevel: argocd.LevelSelfHeal, wantBy: argocd.EvidenceAnnotation,
		},
		"instance label confirmed by status.resources": {
			app: func(argoNS, ns string) kubetest.App {
				return kubetest.App{
					Namespace: argoNS, Name: "checkout", DestinationNamespace: ns, RepoURL: "https://github.com/kukie-demo/deploy", Path: "checkout", Automated: true,
					Resources: []kubetest.AppResource{{Kind: "ConfigMap", Namespace: ns, Name: "checkout-settings"}},
				}
			},
			target: func(argoNS, ns string) (map[string]string, map[string]string) {
				return map[string]string{argocd.DefaultInstanceLabel: "checkout"}, nil
			},
			wantLevel: argocd.LevelAuto, wantBy: argocd.EvidenceLabel,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			env := kubetest.Start(t)
			argoNS, ns := env.Namespace(t, "argocd"), env.Namespace(t, "shop")
			env.Create(t, kubetest.Application(kubetest.App{Namespace: argoNS, Name: "billing", RepoURL: "https://github.com/kukie-demo/deploy", Path: "billing"}))
			clock := clocktesting.NewFakeClock(time.Now())
			counter := newRequestCounter()
			c := clusterFor(t, env.Kubeconfig, kube.Options{Clock: clock, WrapTransport: counter.wrap, Argo: argocd.Options{ControlPlaneNamespace: argoNS}})
			ctx := context.Background()

			if _, err := c.ListApplications(ctx, kube.Cached); err != nil {
				t.Fatal(err)
			}
			// Past the refresh floor, well within the cache TTL.
			clock.Step(3 * time.Second)
			labels, annotations := tc.target(argoNS, ns)
			env.Create(t, kubetest.Application(tc.app(argoNS, ns)), kubetest.ConfigMap(ns, "checkout-settings", labels, annotations))

			d := c.Decide(ctx, []argocd.ResourceRef{{Kind: "ConfigMap", Namespace: ns, Name: "checkout-settings"}})
			mustDecide(t, d, argocd.PathGit, true, tc.wantLevel, "")
			own := d.Targets[0].Ownership
			if want := (argocd.AppKey{Namespace: argoNS, Name: "checkout"}); own.App != want || own.Application == nil || own.By != tc.wantBy {
				t.Errorf("ownership = app %v (found %v) by %s, want %v found by %s", own.App, own.Application != nil, own.By, want, tc.wantBy)
			}
			if n := counter.appLists(); n != 2 {
				t.Errorf("%d Application lists, want 2 (the warm-up and one re-read)", n)
			}
			// The re-read list is the cached one now: a later decision reads no list.
			c.Decide(ctx, []argocd.ResourceRef{{Kind: "ConfigMap", Namespace: ns, Name: "checkout-settings"}})
			if n := counter.appLists(); n != 2 {
				t.Errorf("%d Application lists after a second decision, want 2", n)
			}
		})
	}
}

// Decisions on a resource whose tracking annotation names an Application that never
// exists (hub and spoke, or a deleted one) re-read the list at most once per refresh
// floor, however many of them run at once.
func TestDecideMissingApplicationRefreshesAtMostOncePerFloor(t *testing.T) {
	env := kubetest.Start(t)
	argoNS, ns := env.Namespace(t, "argocd"), env.Namespace(t, "shop")
	env.Create(t,
		kubetest.Application(kubetest.App{Namespace: argoNS, Name: "billing", RepoURL: "https://github.com/kukie-demo/deploy", Path: "billing"}),
		kubetest.ConfigMap(ns, "ghost-settings", nil, map[string]string{argocd.TrackingIDAnnotation: argoNS + "_ghost:/ConfigMap:" + ns + "/ghost-settings"}),
	)
	clock := clocktesting.NewFakeClock(time.Now())
	counter := newRequestCounter()
	c := clusterFor(t, env.Kubeconfig, kube.Options{Clock: clock, WrapTransport: counter.wrap, Argo: argocd.Options{ControlPlaneNamespace: argoNS}})
	targets := []argocd.ResourceRef{{Kind: "ConfigMap", Namespace: ns, Name: "ghost-settings"}}

	flood := func() {
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				mustDecide(t, c.Decide(context.Background(), targets), argocd.PathGit, true, argocd.LevelUnknown, "")
			})
		}
		wg.Wait()
	}
	steps := []struct {
		name      string
		advance   time.Duration
		wantLists int
	}{
		{name: "first flood reads the list once", wantLists: 1},
		{name: "list younger than the refresh floor", advance: 1500 * time.Millisecond, wantLists: 1},
		{name: "list older than the refresh floor", advance: time.Second, wantLists: 2},
		{name: "one second after the re-read", advance: time.Second, wantLists: 2},
		{name: "two seconds after the re-read", advance: time.Second, wantLists: 3},
	}
	for _, s := range steps {
		clock.Step(s.advance)
		flood()
		if got := counter.appLists(); got != s.wantLists {
			t.Fatalf("%s: %d Application lists so far, want %d", s.name, got, s.wantLists)
		}
	}
}
