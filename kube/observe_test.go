package kube_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// reads is a kube.ReadObserver that keeps what it was told.
type reads struct {
	mu   sync.Mutex
	seen []string
}

func (r *reads) Read(read, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, read+" "+outcome)
}

func (r *reads) sorted() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]string(nil), r.seen...)
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func TestReadsAreObservedByOutcomeClass(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	ctx := context.Background()

	admin := &reads{}
	c := clusterFor(t, env.Kubeconfig, kube.Options{Observer: admin})
	if _, err := c.ListApplications(ctx, kube.Fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetResource(ctx, w.deployment("web"), kube.Fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetApplication(ctx, w.argoNS, "no-such-app", kube.Fresh); err == nil {
		t.Fatal("read a missing Application")
	}
	if got, want := admin.sorted(), "application not_found, applications ok, resource ok"; got != want {
		t.Errorf("observed %q, want %q", got, want)
	}

	nobody := &reads{}
	user := env.AddUser(t, "kukie-observed-nobody", "kukie-observed-nobodies")
	c = clusterFor(t, user.Kubeconfig, kube.Options{Observer: nobody})
	if _, err := c.ListApplications(ctx, kube.Fresh); err == nil {
		t.Fatal("a user without rights listed Applications")
	}
	if got, want := nobody.sorted(), "applications forbidden"; got != want {
		t.Errorf("observed %q, want %q", got, want)
	}
}
