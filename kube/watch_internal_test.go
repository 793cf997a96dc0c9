package kube

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// TestFollowApplicationSharesOneWatch follows two Applications of an envtest API
// server before they exist: the creation and a status change of one reach its
// follower, never the other's; both share one informer, which stops with the last
// follower and starts again for the next.
func TestFollowApplicationSharesOneWatch(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, "watch")
	c, err := NewCluster("envtest", env.Config, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	web, stopWeb, err := c.FollowApplication(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	api, stopAPI, err := c.FollowApplication(ctx, ns, "api")
	if err != nil {
		t.Fatal(err)
	}
	app := func(name string) *unstructured.Unstructured {
		return kubetest.Application(kubetest.App{Namespace: ns, Name: name, RepoURL: "https://github.com/acme/deploy", Path: "apps/" + name})
	}
	env.Create(t, app("web"))
	<-web // the creation; a lost event would hang the test here
	setSync(t, env, ns, "web", "OutOfSync")
	<-web // the status change
	select {
	case <-api:
		t.Fatal("the follower of api was told of a change of web")
	default:
	}
	if c.watch.starts != 1 {
		t.Fatalf("%d informers started for two followers, want 1", c.watch.starts)
	}
	stopWeb()
	stopAPI()
	c.watch.mu.Lock()
	stopped := c.watch.stop == nil
	c.watch.mu.Unlock()
	if !stopped {
		t.Fatal("the informer runs on with nobody following")
	}
	again, stopAgain, err := c.FollowApplication(ctx, ns, "api")
	if err != nil {
		t.Fatal(err)
	}
	defer stopAgain()
	env.Create(t, app("api"))
	<-again
	if c.watch.starts != 2 {
		t.Fatalf("%d informers started, want a second one for the new follower", c.watch.starts)
	}
}

// TestFollowApplicationFailsWithoutApplications: a cluster without the Application
// type cannot be watched, and says so, so the caller polls.
func TestFollowApplicationFailsWithoutApplications(t *testing.T) {
	env := kubetest.StartPrivate(t, kubetest.Options{WithoutApplicationCRD: true})
	c, err := NewCluster("no-argo", env.Config, Options{CallTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.FollowApplication(context.Background(), "argocd", "web"); err == nil {
		t.Fatal("followed an Application on a cluster that has none")
	}
	if c.watch.stop != nil {
		t.Fatal("a failed watch was left running")
	}
}

func setSync(t *testing.T, env *kubetest.Env, ns, name, status string) {
	t.Helper()
	ctx := context.Background()
	res := env.Dynamic.Resource(ApplicationResource).Namespace(ns)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, status, "status", "sync", "status"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
