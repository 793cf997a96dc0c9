package kube_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// TestHeldApplicationsAreReadWithoutListing: while the informer on Applications is
// held (and for its linger after the release), decisions, lists and app lists past
// the cache's TTL, which would each list Applications again, are answered from it
// with no list request, and an Application created meanwhile is seen through the
// watch.
func TestHeldApplicationsAreReadWithoutListing(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	clock := clocktesting.NewFakeClock(time.Now())
	lists := &listCounter{}
	c := clusterFor(t, env.Kubeconfig, kube.Options{Clock: clock, WrapTransport: lists.wrap, Argo: argocd.Options{ControlPlaneNamespace: w.argoNS}})
	ctx := context.Background()

	release, err := c.HoldApplications(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	release() // the informer lingers for the hour
	started := lists.count()
	if started > 1 {
		t.Fatalf("starting the informer listed Applications %d times, want at most once", started)
	}
	targets := []argocd.ResourceRef{w.deployment("web")}
	for i := range 5 {
		clock.Step(time.Minute) // past the cache's TTL and refresh floor
		mustDecide(t, c.Decide(ctx, targets), argocd.PathGit, true, argocd.LevelSelfHeal, "")
		if _, err := c.ListApplications(ctx, kube.Refresh); err != nil {
			t.Fatal(err)
		}
		if _, err := c.AppList(ctx, kube.Cached); err != nil {
			t.Fatal(err)
		}
		if n := lists.count(); n != started {
			t.Fatalf("round %d: %d Application lists, want none beside the informer's start (%d)", i, n, started)
		}
	}

	env.Create(t, kubetest.Application(kubetest.App{Namespace: w.argoNS, Name: "checkout", RepoURL: "https://github.com/kukie-demo/deploy", Path: "checkout"}))
	for seen := false; !seen; {
		apps, err := c.ListApplications(ctx, kube.Refresh)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range apps {
			seen = seen || a.Namespace == w.argoNS && a.Name == "checkout"
		}
		if !seen {
			time.Sleep(10 * time.Millisecond) // until the watch delivers it
		}
	}
	if n := lists.count(); n != started {
		t.Fatalf("%d Application lists, want the new Application seen through the watch", n)
	}
}

// listCounter counts the list requests of all Applications a Cluster sends (a watch
// of them is not one).
type listCounter struct {
	mu sync.Mutex
	n  int
}

func (l *listCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && r.URL.Path == "/apis/argoproj.io/v1alpha1/applications" && r.URL.Query().Get("watch") != "true" {
			l.mu.Lock()
			l.n++
			l.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (l *listCounter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}
