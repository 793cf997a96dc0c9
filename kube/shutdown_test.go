package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// pooledConnection is the read loop of an idle HTTP/2 connection to the API
// server: the connection pool keeps it for the cluster's next request until the
// registry is closed.
var pooledConnection = goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop")

// TestInformersEndWithTheirLastFollower: an Application and a Deployment are
// followed, each by its own informer; once the last follower of each stopped, none
// of their goroutines runs on. The cluster's connection, which its informers
// share with its reads, is opened by a read before: the informers open none of
// their own, whose read loop would run on.
func TestInformersEndWithTheirLastFollower(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	c := clusterFor(t, env.Kubeconfig, kube.Options{})
	ctx := context.Background()
	if _, err := c.ListApplications(ctx, kube.Fresh); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	app, err := c.FollowApplication(ctx, w.appsNS, "web")
	if err != nil {
		t.Fatal(err)
	}
	target, err := c.FollowResource(ctx, w.deployment("web"))
	if err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(before, pooledConnection); err == nil {
		t.Fatal("no informer goroutine runs while two objects are followed: this test would prove nothing")
	}
	app.Stop()
	target.Stop()
	goleak.VerifyNone(t, before, pooledConnection)
}

// TestClosedRegistryStopsEveryInformer: informers held for an hour after the last
// read of Applications, and one following a target, end when the registry is
// closed, with the connections they used; the registry then opens nothing more.
func TestClosedRegistryStopsEveryInformer(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	before := goleak.IgnoreCurrent()
	r := kube.NewClusters(kube.Options{})
	c, err := r.Get("test", kube.Access{Kubeconfig: env.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release, err := c.HoldApplications(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := c.FollowResource(ctx, w.deployment("web")); err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(before); err == nil {
		t.Fatal("no informer goroutine runs: this test would prove nothing")
	}
	r.Close()
	goleak.VerifyNone(t, before)
	if _, err := r.Get("test", kube.Access{Kubeconfig: env.Kubeconfig}); !errors.Is(err, kube.ErrClosed) {
		t.Fatalf("a closed registry returned %v, want ErrClosed", err)
	}
	if _, err := c.FollowApplication(ctx, w.appsNS, "web"); err == nil {
		t.Fatal("a cluster of a closed registry started a watch")
	}
}
