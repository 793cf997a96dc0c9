package kube_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// recheck is the watches' bound in these tests: a revoked token or a withdrawn
// right is met at the next watch request, at most this long after the last.
const recheck = 2 * time.Second

// TestFollowGoesOnAcrossACredentialRotation: a Deployment followed with a
// ServiceAccount token goes on being followed once the cluster's kubeconfig is
// replaced by one with a new token and the old token is revoked: the informer runs
// with the new token (the cluster refuses nothing after the revocation, and
// watches again with it), and a change made after the revocation is seen.
func TestFollowGoesOnAcrossACredentialRotation(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, "rotate")
	env.Create(t, deploymentObject(ns, "web", int64(2)))
	account := env.NewAccount(t, "kukie")
	oldConfig, revokeOld := account.Token(t, "token-1")
	answers := &answerLog{}
	r := kube.NewClusters(kube.Options{WatchRecheck: recheck, WrapTransport: answers.wrap})
	t.Cleanup(r.Close)
	ctx := context.Background()
	c, err := r.Get("prod", kube.Access{Kubeconfig: oldConfig})
	if err != nil {
		t.Fatal(err)
	}
	ref := argocd.ResourceRef{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: ns, Name: "web"}
	f, err := c.FollowResource(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()

	newConfig, _ := account.Token(t, "token-2")
	if _, err := r.Update(ctx, "prod", kube.Access{Kubeconfig: newConfig}); err != nil {
		t.Fatal(err)
	}
	revokeOld()
	awaitRevoked(t, oldConfig, ref)
	revoked := answers.mark()
	// A watch request past the revocation, which the API server authenticates
	// anew: the old token would be refused there.
	answers.await(t, revoked, func(a answer) bool { return a.watch && a.status == http.StatusOK })
	setReplicasStatus(t, env, ns, "web", 7)
	awaitFollowed(t, f, func(obj *unstructured.Unstructured) bool {
		n, _, _ := unstructured.NestedInt64(obj.Object, "status", "replicas")
		return n == 7
	})
	if refused := answers.since(revoked, func(a answer) bool { return a.status == http.StatusUnauthorized }); refused > 0 {
		t.Fatalf("%d requests after the rotation were refused: the old token is still in use", refused)
	}
}

// awaitRevoked waits until the API server refuses a read with kubeconfig: it
// caches a token's validation for a few seconds after the token was revoked.
func awaitRevoked(t *testing.T, kubeconfig []byte, ref argocd.ResourceRef) {
	t.Helper()
	c, err := kube.NewClusters(kube.Options{}).Get("revoked", kube.Access{Kubeconfig: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.GetResource(context.Background(), ref, kube.Fresh)
		if kube.ClassOf(err) == argocd.FailureUnreachable && strings.Contains(err.Error(), "Unauthorized") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a read with the revoked token still gives %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRefusedCredentialsAreReportedToFollowers: when the cluster refuses the
// credentials an informer watches with, a revoked token (401) or a withdrawn
// binding (403), its followers are woken and Err says so; once credentials are
// accepted again (a new kubeconfig, the binding restored) Err is nil again and
// changes are seen.
func TestRefusedCredentialsAreReportedToFollowers(t *testing.T) {
	cases := map[string]struct {
		revoke  func(t *testing.T, a *kubetest.Account, revokeToken func())
		restore func(t *testing.T, r *kube.Clusters, a *kubetest.Account)
		class   argocd.FailureClass
		text    string
	}{
		"token revoked": {
			revoke: func(t *testing.T, _ *kubetest.Account, revokeToken func()) { revokeToken() },
			restore: func(t *testing.T, r *kube.Clusters, a *kubetest.Account) {
				kc, _ := a.Token(t, "token-2")
				if _, err := r.Update(context.Background(), "prod", kube.Access{Kubeconfig: kc}); err != nil {
					t.Fatal(err)
				}
			},
			class: argocd.FailureUnreachable, text: "Unauthorized",
		},
		"binding deleted": {
			revoke:  func(t *testing.T, a *kubetest.Account, _ func()) { a.Unbind(t) },
			restore: func(t *testing.T, _ *kube.Clusters, a *kubetest.Account) { a.Bind(t) },
			class:   argocd.FailureForbidden, text: "forbidden",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := kubetest.Start(t)
			w := newWorld(t, env, true)
			account := env.NewAccount(t, "kukie")
			kc, revokeToken := account.Token(t, "token-1")
			r := kube.NewClusters(kube.Options{WatchRecheck: recheck})
			t.Cleanup(r.Close)
			c, err := r.Get("prod", kube.Access{Kubeconfig: kc})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			app, err := c.FollowApplication(ctx, w.argoNS, "shop")
			if err != nil {
				t.Fatal(err)
			}
			defer app.Stop()
			target, err := c.FollowResource(ctx, w.deployment("web"))
			if err != nil {
				t.Fatal(err)
			}
			defer target.Stop()

			tc.revoke(t, account, revokeToken)
			for _, f := range []*kube.Follow{app, target} {
				err := awaitErr(t, f, true)
				if kube.ClassOf(err) != tc.class || !strings.Contains(err.Error(), tc.text) {
					t.Fatalf("the follow reports %v (class %s), want class %s saying %q", err, kube.ClassOf(err), tc.class, tc.text)
				}
			}

			tc.restore(t, r, account)
			for _, f := range []*kube.Follow{app, target} {
				awaitErr(t, f, false)
			}
			setReplicasStatus(t, env, w.ns, "web", 9)
			awaitFollowed(t, target, func(obj *unstructured.Unstructured) bool {
				n, _, _ := unstructured.NestedInt64(obj.Object, "status", "replicas")
				return n == 9
			})
		})
	}
}

// TestRefusedCredentialsAreReadAgain: another replica took the team's new
// kubeconfig, so this one learns of it only from the store. When the cluster
// refuses the old token, the registry reads the cluster's credentials from its
// access source, starts the informer again with the new ones, and the follow goes
// on: a change made after that is seen.
func TestRefusedCredentialsAreReadAgain(t *testing.T) {
	env := kubetest.Start(t)
	ns := env.Namespace(t, "reread")
	env.Create(t, deploymentObject(ns, "web", int64(2)))
	account := env.NewAccount(t, "kukie")
	oldConfig, revokeOld := account.Token(t, "token-1")
	var stored atomic.Pointer[[]byte]
	stored.Store(&oldConfig)
	answers := &answerLog{}
	r := kube.NewClusters(kube.Options{WatchRecheck: recheck, WrapTransport: answers.wrap})
	r.SetAccessSource(func(_ context.Context, name string) (kube.Access, error) {
		return kube.Access{Kubeconfig: *stored.Load()}, nil
	})
	t.Cleanup(r.Close)
	c, err := r.Get("prod", kube.Access{Kubeconfig: oldConfig})
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.FollowResource(context.Background(), argocd.ResourceRef{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()

	newConfig, _ := account.Token(t, "token-2")
	stored.Store(&newConfig)
	revokeOld()
	answers.await(t, answers.mark(), func(a answer) bool { return a.status == http.StatusUnauthorized })
	// The old informer's watch has ended (its next request was refused): only
	// one started with the new token can report what follows.
	setReplicasStatus(t, env, ns, "web", 5)
	timeout := time.After(time.Minute)
	for {
		if obj, found := f.Latest(); found && f.Err() == nil {
			if n, _, _ := unstructured.NestedInt64(obj.Object, "status", "replicas"); n == 5 {
				return
			}
		}
		select {
		case <-f.Changes:
		case <-timeout:
			t.Fatalf("the change was not seen within a minute; the follow reports %v", f.Err())
		}
	}
}

// awaitErr waits for changes of f until Err is set (or, with !set, nil) and
// returns it, for a minute at most.
func awaitErr(t *testing.T, f *kube.Follow, set bool) error {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		if err := f.Err(); (err != nil) == set {
			return err
		}
		select {
		case <-f.Changes:
		case <-timeout:
			t.Fatalf("the follow's error stayed %v for a minute", f.Err())
		}
	}
}

// awaitFollowed waits for changes of f until the object it holds satisfies ok,
// while the follow reports no error, for a minute at most.
func awaitFollowed(t *testing.T, f *kube.Follow, ok func(*unstructured.Unstructured) bool) {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		if err := f.Err(); err != nil {
			t.Fatalf("the follow reports %v", err)
		}
		if obj, found := f.Latest(); found && ok(obj) {
			return
		}
		select {
		case <-f.Changes:
		case <-timeout:
			t.Fatal("no change reported within a minute")
		}
	}
}

// setReplicasStatus writes the Deployment's status.replicas.
func setReplicasStatus(t *testing.T, env *kubetest.Env, ns, name string, replicas int64) {
	t.Helper()
	ctx := context.Background()
	res := env.Dynamic.Resource(deployments).Namespace(ns)
	u, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = map[string]any{"replicas": replicas, "observedGeneration": u.GetGeneration()}
	if _, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// answer is how the API server answered one request of a cluster (0: no answer).
type answer struct {
	watch  bool
	status int
}

// answerLog records the answers to a registry's requests in order.
type answerLog struct {
	mu      sync.Mutex
	answers []answer
	changed chan struct{}
}

func (l *answerLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		a := answer{watch: r.URL.Query().Get("watch") == "true"}
		if err == nil {
			a.status = resp.StatusCode
		}
		l.mu.Lock()
		l.answers = append(l.answers, a)
		if l.changed != nil {
			close(l.changed)
			l.changed = nil
		}
		l.mu.Unlock()
		return resp, err
	})
}

// mark is the index of the next answer.
func (l *answerLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answers)
}

// since counts the answers from index from on that match.
func (l *answerLog) since(from int, match func(answer) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.answers[from:] {
		if match(a) {
			n++
		}
	}
	return n
}

// await waits until an answer from index from on matches and returns the index
// after it, for a minute at most.
func (l *answerLog) await(t *testing.T, from int, match func(answer) bool) int {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		l.mu.Lock()
		for i := from; i < len(l.answers); i++ {
			if match(l.answers[i]) {
				l.mu.Unlock()
				return i + 1
			}
		}
		from = len(l.answers)
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			t.Fatal("no such answer from the API server within a minute")
		}
	}
}
