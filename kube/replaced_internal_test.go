package kube

import (
	"context"
	"runtime"
	"testing"
	"weak"

	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// TestReplacedClustersAreNotKept: once a cluster's credentials are replaced, the
// registry keeps nothing of the old client set but its connections (to close
// them with it): not its read caches, which a rotation of a kubeconfig a day
// would pile up for as long as the service runs.
func TestReplacedClustersAreNotKept(t *testing.T) {
	env := kubetest.Start(t)
	r := NewClusters(Options{})
	t.Cleanup(r.Close)
	ctx := context.Background()
	old, err := r.Get("prod", Access{Kubeconfig: env.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.ListApplications(ctx, Cached); err != nil {
		t.Fatal(err)
	}
	kept := weak.Make(old)
	old = nil
	// Other access (the flag is in its fingerprint) is a new client set.
	if _, err := r.Update(ctx, "prod", Access{Kubeconfig: env.Kubeconfig, AllowInsecureTLS: true}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		runtime.GC()
	}
	if kept.Value() != nil {
		t.Fatal("the replaced cluster is still reachable after its credentials were replaced")
	}
}
