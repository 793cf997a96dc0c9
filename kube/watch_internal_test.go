package kube

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kukie/kukie-gitops/argocd"
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
	web, err := c.FollowApplication(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	api, err := c.FollowApplication(ctx, ns, "api")
	if err != nil {
		t.Fatal(err)
	}
	app := func(name string) *unstructured.Unstructured {
		return kubetest.Application(kubetest.App{Namespace: ns, Name: name, RepoURL: "https://github.com/acme/deploy", Path: "apps/" + name})
	}
	env.Create(t, app("web"))
	awaitChange(t, web) // the creation
	setSync(t, env, ns, "web", "OutOfSync")
	for {
		awaitChange(t, web) // the status change
		if got, ok := web.Latest(); ok && syncStatus(got) == "OutOfSync" {
			break
		}
	}
	select {
	case <-api.Changes:
		t.Fatal("the follower of api was told of a change of web")
	default:
	}
	appsKey := watchKey{resource: ApplicationResource}
	if n := c.startsOf(appsKey); n != 1 {
		t.Fatalf("%d informers started for two followers, want 1", n)
	}
	web.Stop()
	api.Stop()
	if c.runs(appsKey) {
		t.Fatal("the informer runs on with nobody following")
	}
	again, err := c.FollowApplication(ctx, ns, "api")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Stop()
	env.Create(t, app("api"))
	awaitChange(t, again)
	if n := c.startsOf(appsKey); n != 2 {
		t.Fatalf("%d informers started, want a second one for the new follower", n)
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
	if _, err := c.FollowApplication(context.Background(), "argocd", "web"); err == nil {
		t.Fatal("followed an Application on a cluster that has none")
	}
	if c.runs(watchKey{resource: ApplicationResource}) {
		t.Fatal("a failed watch was left running")
	}
}

var deploymentsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

// TestFollowResourceWatchesItsObjectAlone: a target is followed through a watch of
// its kind in its namespace selected by its name, shared by its followers and stopped
// with the last; its status changes reach them, and the object they read is the
// latest the watch saw.
func TestFollowResourceWatchesItsObjectAlone(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, "target")
	env.Create(t, deployment(ns, "web"), deployment(ns, "api"))
	requests := &watchTransport{}
	c, err := NewCluster("envtest", env.Config, Options{WrapTransport: requests.wrap})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ref := argocd.ResourceRef{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "web"}
	first, err := c.FollowResource(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.FollowResource(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	key := watchKey{resource: deploymentsResource, namespace: ns, name: "web"}
	if n := c.startsOf(key); n != 1 {
		t.Fatalf("%d informers started for two followers of one object, want 1", n)
	}
	for _, q := range requests.seen() {
		if q.path == "/apis/apps/v1/namespaces/"+ns+"/deployments" && q.query.Get("fieldSelector") != "metadata.name=web" {
			t.Fatalf("the target's watch reads %s?%s, want only the object web", q.path, q.query.Encode())
		}
	}

	setRollout(t, env, ns, "web", 1)
	for _, f := range []*Follow{first, second} {
		awaitUpdated(t, f, 1)
	}
	first.Stop()
	if !c.runs(key) {
		t.Fatal("the informer stopped while the object still has a follower")
	}
	second.Stop()
	if c.runs(key) {
		t.Fatal("the informer runs on with nobody following")
	}
}

// TestFollowResourceResumesAfterTheWatchDrops: mid-rollout the watch connection
// drops and, while it is down, the rollout completes; the watch resumes from the
// resource version it last saw (no list, no initial events sent again) and the
// follower is told of the transition it would otherwise have missed.
func TestFollowResourceResumesAfterTheWatchDrops(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, "resume")
	env.Create(t, deployment(ns, "web"))
	requests := &watchTransport{}
	c, err := NewCluster("envtest", env.Config, Options{WrapTransport: requests.wrap})
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.FollowResource(context.Background(), argocd.ResourceRef{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	setRollout(t, env, ns, "web", 1)
	// Seen through the watch (not only in the first list): a watch that ends within
	// a second of its start having delivered nothing is taken for a broken one and
	// listed again.
	awaitUpdated(t, f, 1)
	seen, _ := f.Latest()
	lastRV := seen.GetResourceVersion()

	before := len(requests.seen())
	requests.drop() // the open watch ends; the next one waits until resume
	setRollout(t, env, ns, "web", 2)
	requests.resume()
	awaitUpdated(t, f, 2)
	awaitReadiness(t, f, ReadinessCurrent)

	var resumed []request
	for _, q := range requests.seen()[before:] {
		if q.path != "/apis/apps/v1/namespaces/"+ns+"/deployments" {
			continue
		}
		if q.query.Get("watch") != "true" {
			t.Fatalf("the dropped watch was followed by a list: ?%s", q.query.Encode())
		}
		resumed = append(resumed, q)
	}
	if len(resumed) == 0 {
		t.Fatal("the transition was seen without a new watch")
	}
	q := resumed[0].query
	if rv := q.Get("resourceVersion"); rv == "" || rv == "0" || q.Get("sendInitialEvents") != "" {
		t.Fatalf("the watch resumed with ?%s, want from the last resource version seen (%s) without initial events", q.Encode(), lastRV)
	}
}

// awaitChange waits for a change of f; a minute without one means it was lost.
func awaitChange(t *testing.T, f *Follow) {
	t.Helper()
	select {
	case <-f.Changes:
	case <-time.After(time.Minute):
		t.Fatal("no change reported within a minute")
	}
}

// awaitReadiness waits for changes of f until the object it holds is in state.
func awaitReadiness(t *testing.T, f *Follow, state ReadinessState) {
	t.Helper()
	for {
		if obj, ok := f.Latest(); ok {
			r, err := ReadinessOf(obj)
			if err != nil {
				t.Fatal(err)
			}
			if r.State == state {
				return
			}
		}
		awaitChange(t, f)
	}
}

// awaitUpdated waits for changes of f until its Deployment reports updated replicas.
func awaitUpdated(t *testing.T, f *Follow, updated int64) {
	t.Helper()
	for {
		if obj, ok := f.Latest(); ok {
			if n, _, _ := unstructured.NestedInt64(obj.Object, "status", "updatedReplicas"); n == updated {
				return
			}
		}
		awaitChange(t, f)
	}
}

func (c *Cluster) startsOf(key watchKey) int {
	c.watches.mu.Lock()
	defer c.watches.mu.Unlock()
	return c.watches.starts[key]
}

func (c *Cluster) runs(key watchKey) bool {
	c.watches.mu.Lock()
	defer c.watches.mu.Unlock()
	_, ok := c.watches.running[key]
	return ok
}

func syncStatus(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(u.Object, "status", "sync", "status")
	return s
}

func deployment(ns, name string) *unstructured.Unstructured {
	labels := map[string]any{"app": name}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"replicas": int64(2),
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": name, "image": "nginx:1.27"}}},
			},
		},
	}}
}

// setRollout writes the Deployment's status as its controller would with updated of
// its two replicas updated and available: still progressing, or done at two.
func setRollout(t *testing.T, env *kubetest.Env, ns, name string, updated int64) {
	t.Helper()
	ctx := context.Background()
	res := env.Dynamic.Resource(deploymentsResource).Namespace(ns)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	progressing := map[string]any{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}
	if updated == 2 {
		progressing["reason"] = "NewReplicaSetAvailable"
	}
	u.Object["status"] = map[string]any{
		"observedGeneration": u.GetGeneration(), "replicas": int64(2),
		"updatedReplicas": updated, "readyReplicas": updated, "availableReplicas": updated,
		"conditions": []any{progressing, map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}},
	}
	if _, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// request is one request the cluster sent.
type request struct {
	path  string
	query url.Values
}

// watchTransport records the requests a cluster sends and can drop its open watch
// connections, holding new watches back until resume.
type watchTransport struct {
	mu       sync.Mutex
	requests []request
	open     []*droppable
	held     chan struct{}
}

func (w *watchTransport) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		isWatch := r.URL.Query().Get("watch") == "true"
		w.mu.Lock()
		w.requests = append(w.requests, request{path: r.URL.Path, query: r.URL.Query()})
		held := w.held
		w.mu.Unlock()
		if isWatch && held != nil {
			select {
			case <-held:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
		resp, err := next.RoundTrip(r)
		if err != nil || !isWatch {
			return resp, err
		}
		body := &droppable{ReadCloser: resp.Body}
		w.mu.Lock()
		w.open = append(w.open, body)
		w.mu.Unlock()
		resp.Body = body
		return resp, nil
	})
}

func (w *watchTransport) seen() []request {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]request(nil), w.requests...)
}

// drop ends every open watch as a connection lost mid-stream would.
func (w *watchTransport) drop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held = make(chan struct{})
	for _, b := range w.open {
		b.drop()
	}
	w.open = nil
}

func (w *watchTransport) resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.held)
	w.held = nil
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// droppable is a watch response body whose connection can be lost: reads then end
// with an unexpected EOF.
type droppable struct {
	io.ReadCloser
	mu      sync.Mutex
	dropped bool
}

func (d *droppable) drop() {
	d.mu.Lock()
	d.dropped = true
	d.mu.Unlock()
	_ = d.Close()
}

func (d *droppable) Read(p []byte) (int, error) {
	n, err := d.ReadCloser.Read(p)
	d.mu.Lock()
	dropped := d.dropped
	d.mu.Unlock()
	if dropped {
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
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
