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

func TestReadsAreSharedWithinTTL(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	clock := clocktesting.NewFakeClock(time.Now())
	counter := newRequestCounter()
	c := clusterFor(t, env.Kubeconfig, kube.Options{Clock: clock, WrapTransport: counter.wrap})
	ctx := context.Background()
	web := "/apis/apps/v1/namespaces/" + w.ns + "/deployments/web"
	targets := []argocd.ResourceRef{w.deployment("web")}

	// Concurrent identical decisions collapse onto one read of each object.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { mustDecide(t, c.Decide(ctx, targets), argocd.PathGit, true, argocd.LevelSelfHeal, "") })
	}
	wg.Wait()
	if lists, gets := counter.appLists(), counter.count("GET", web); lists != 1 || gets != 1 {
		t.Fatalf("20 concurrent decisions made %d Application lists and %d target reads, want 1 and 1", lists, gets)
	}
	discovery := counter.discovery()

	steps := []struct {
		name      string
		advance   time.Duration
		read      func()
		wantLists int
	}{
		{
			name: "decision 9 s later", advance: 9 * time.Second, wantLists: 1,
			read: func() { c.Decide(ctx, targets) },
		},
		{
			name: "app list for people shares the decision's read", wantLists: 1,
			read: func() {
				if _, err := c.AppList(ctx, kube.Cached); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "decision after the TTL", advance: 2 * time.Second, wantLists: 2,
			read: func() { c.Decide(ctx, targets) },
		},
		{
			name: "forced refresh of a result younger than 2 s", advance: time.Second, wantLists: 2,
			read: func() {
				if _, err := c.ListApplications(ctx, kube.Refresh); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "forced refresh of an older result", advance: 2 * time.Second, wantLists: 3,
			read: func() {
				if _, err := c.ListApplications(ctx, kube.Refresh); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, s := range steps {
		clock.Step(s.advance)
		s.read()
		if got := counter.appLists(); got != s.wantLists {
			t.Fatalf("%s: %d Application lists so far, want %d", s.name, got, s.wantLists)
		}
	}
	if got := counter.discovery(); got != discovery {
		t.Errorf("discovery was read again (%d requests, then %d) although every kind was known", discovery, got)
	}
}

// Two names for one cluster with the same credentials are different registry
// entries; the same name and credentials return the same client set and so the same
// cache.
func TestRegistryReusesClientSets(t *testing.T) {
	env := kubetest.Start(t)
	counter := newRequestCounter()
	registry := kube.NewClusters(kube.Options{WrapTransport: counter.wrap})
	ctx := context.Background()

	a, err := registry.Get("prod", kube.Access{Kubeconfig: env.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	b, err := registry.Get("prod", kube.Access{Kubeconfig: append([]byte(nil), env.Kubeconfig...)})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("the same cluster and credentials gave two client sets")
	}
	if _, err := a.ListApplications(ctx, kube.Cached); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ListApplications(ctx, kube.Cached); err != nil {
		t.Fatal(err)
	}
	if n := counter.appLists(); n != 1 {
		t.Errorf("%d Application lists through one registry entry, want 1", n)
	}

	rotated := env.AddUser(t, "kukie-rotated", "system:masters")
	c, err := registry.Get("prod", kube.Access{Kubeconfig: rotated.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	if c == a {
		t.Error("new credentials reused the old client set")
	}
	registry.Forget("prod")
	d, err := registry.Get("prod", kube.Access{Kubeconfig: rotated.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	if d == c {
		t.Error("Forget kept the client set")
	}
}
