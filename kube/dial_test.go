package kube_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

// records is a DNS of the test's own: host names and the addresses they resolve
// to, which a test changes as it goes.
type records struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr
}

func (r *records) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hosts == nil {
		r.hosts = map[string][]netip.Addr{}
	}
	r.hosts[host] = nil
	for _, a := range addrs {
		r.hosts[host] = append(r.hosts[host], netip.MustParseAddr(a))
	}
}

func (r *records) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	addrs, ok := r.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// kubeconfigAt is env's kubeconfig with its server at host:port (the API server's
// own port when port is empty), its certificate checked for the name the API
// server's has, a token beside its client certificate, and namespace as the
// context's (a kubeconfig that differs in it is other credentials to the
// registry).
func kubeconfigAt(t *testing.T, env *kubetest.Env, host, port, token, namespace string) []byte {
	t.Helper()
	raw, err := clientcmd.Load(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	current := raw.Contexts[raw.CurrentContext]
	cluster := raw.Clusters[current.Cluster]
	u, err := url.Parse(cluster.Server)
	if err != nil {
		t.Fatal(err)
	}
	if port == "" {
		port = u.Port()
	}
	cluster.TLSServerName = u.Hostname()
	cluster.Server = "https://" + net.JoinHostPort(host, port)
	raw.AuthInfos[current.AuthInfo].Token = token
	current.Namespace = namespace
	doc, err := clientcmd.Write(*raw)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestAServerNameIsCheckedWhereItResolvesAtEachConnection: a kubeconfig whose
// server is a host name resolving to loopback reaches the API server; one whose
// name resolves to a cloud metadata endpoint or a link-local address, or comes to
// after it was used (DNS rebinding), is refused when connecting, with an error
// naming the kubeconfig's server setting, the server and the address, never the
// credentials.
func TestAServerNameIsCheckedWhereItResolvesAtEachConnection(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	dns := &records{}
	dns.set("cluster.test", "127.0.0.1")
	dns.set("metadata.test", "169.254.169.254")
	dns.set("aws.test", "10.0.0.7", "fd00:ec2::254")
	r := kube.NewClusters(kube.Options{Resolve: dns.resolve, CallTimeout: 20 * time.Second})
	t.Cleanup(r.Close)
	ctx := context.Background()
	const token = "team-secret-token"
	raw, err := clientcmd.Load(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	field := "clusters[" + raw.Contexts[raw.CurrentContext].Cluster + "].server"

	c, err := r.Get("by-name", kube.Access{Kubeconfig: kubeconfigAt(t, env, "cluster.test", "", token, "a")})
	if err != nil {
		t.Fatal(err)
	}
	mustDecide(t, c.Decide(ctx, []argocd.ResourceRef{w.deployment("web")}), argocd.PathGit, true, argocd.LevelSelfHeal, "")

	refused := func(name, host, addr string, access kube.Access) {
		t.Helper()
		c, err := r.Get(name, access)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = c.ListApplications(ctx, kube.Fresh)
		var kerr *kube.KubeconfigError
		if !errors.As(err, &kerr) || kerr.Field != field || kube.ClassOf(err) != argocd.FailureUnreachable {
			t.Fatalf("%s: %v, want an unreachable cluster for a *KubeconfigError naming %s", name, err, field)
		}
		msg := err.Error()
		for _, want := range []string{"kubeconfig refused: " + field, "https://" + host, addr, "an API server is not reached at it"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q does not say %q", name, msg, want)
			}
		}
		if strings.Contains(msg, token) || strings.Contains(msg, "GET") || strings.Contains(msg, "/apis/") {
			t.Errorf("%s: %q shows the token or the request", name, msg)
		}
	}
	refused("metadata", "metadata.test", "169.254.169.254", kube.Access{Kubeconfig: kubeconfigAt(t, env, "metadata.test", "443", token, "a")})
	refused("aws", "aws.test", "fd00:ec2::254", kube.Access{Kubeconfig: kubeconfigAt(t, env, "aws.test", "443", token, "a")})

	// The name the cluster was reached by now resolves to the metadata endpoint:
	// the next connection (here the one of its next credentials) is refused.
	dns.set("cluster.test", "100.100.100.200")
	refused("by-name", "cluster.test", "100.100.100.200", kube.Access{Kubeconfig: kubeconfigAt(t, env, "cluster.test", "", token, "b")})
}

// countingProxy forwards TCP connections to target and counts them.
type countingProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	opened int
	open   int
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	return p
}

func (p *countingProxy) port() string {
	_, port, _ := net.SplitHostPort(p.ln.Addr().String())
	return port
}

func (p *countingProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.opened++
		p.open++
		p.mu.Unlock()
		go func() {
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				// Either side ending ends the connection.
				dst.Close()
				src.Close()
			}
			go pipe(out, in)
			go pipe(in, out)
			wg.Wait()
			p.mu.Lock()
			p.open--
			p.mu.Unlock()
		}()
	}
}

func (p *countingProxy) counts() (opened, open int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opened, p.open
}

// TestAClustersConnectionsAreSharedAndClosedWithIt: the clients and informers of a
// cluster reached by a host name share one connection pool (each client with a
// transport of its own would connect anew), and every connection the registry
// opened, for the credentials it replaced too, is closed when it is closed.
func TestAClustersConnectionsAreSharedAndClosedWithIt(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCountingProxy(t, u.Host)
	dns := &records{}
	dns.set("cluster.test", "127.0.0.1")
	r := kube.NewClusters(kube.Options{Resolve: dns.resolve, CallTimeout: 20 * time.Second})
	ctx := context.Background()
	use := func(c *kube.Cluster) {
		t.Helper()
		app, err := c.FollowApplication(ctx, w.appsNS, "web")
		if err != nil {
			t.Fatal(err)
		}
		target, err := c.FollowResource(ctx, w.deployment("web"))
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			mustDecide(t, c.Decide(ctx, []argocd.ResourceRef{w.deployment("web")}), argocd.PathGit, true, argocd.LevelSelfHeal, "")
			if _, err := c.GetResource(ctx, w.configMap("settings"), kube.Fresh); err != nil && kube.ClassOf(err) != argocd.FailureNotFound {
				t.Fatal(err)
			}
			if _, err := c.ListApplications(ctx, kube.Fresh); err != nil {
				t.Fatal(err)
			}
		}
		app.Stop()
		target.Stop()
	}
	c, err := r.Get("prod", kube.Access{Kubeconfig: kubeconfigAt(t, env, "cluster.test", proxy.port(), "", "a")})
	if err != nil {
		t.Fatal(err)
	}
	use(c)
	if opened, _ := proxy.counts(); opened == 0 || opened > 2 {
		t.Fatalf("%d connections for the reads and watches of one cluster, want one (two at most)", opened)
	}
	rotated, err := r.Update(ctx, "prod", kube.Access{Kubeconfig: kubeconfigAt(t, env, "cluster.test", proxy.port(), "", "b")})
	if err != nil {
		t.Fatal(err)
	}
	use(rotated)
	if opened, _ := proxy.counts(); opened < 2 || opened > 4 {
		t.Fatalf("%d connections for two credentials of one cluster, want two (four at most)", opened)
	}
	r.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		opened, open := proxy.counts()
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections still open a minute after the registry was closed", open, opened)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holds are the requests a test holds: the response of each request whose path
// ends in path is held until release is closed, its body unread, so the call
// stays in flight on its connection; held is told of each.
type holds struct {
	path    string
	held    chan struct{}
	release chan struct{}
}

// holdingTransport is one cluster's transport, holding the requests of holds.
type holdingTransport struct {
	next  http.RoundTripper
	holds *holds
}

func (h *holdingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.next.RoundTrip(req)
	if err == nil && strings.HasSuffix(req.URL.Path, h.holds.path) {
		h.holds.held <- struct{}{}
		<-h.holds.release
	}
	return resp, err
}

func (h *holdingTransport) WrappedRoundTripper() http.RoundTripper { return h.next }

// TestAReplacedClustersConnectionsCloseOnceUnused: once a cluster's credentials
// are replaced, the old client set's connections (counted through a proxy of
// their own) are closed as soon as nothing uses them: a call in flight with the
// old credentials finishes first, on its connection, and the old informers,
// started again with the new credentials, end; not left to the transport's idle
// timeout or the registry's Close. A holder of the old client set that calls it
// afterwards still connects, and that connection is closed after its call.
func TestAReplacedClustersConnectionsCloseOnceUnused(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	oldProxy, newProxy := newCountingProxy(t, u.Host), newCountingProxy(t, u.Host)
	dns := &records{}
	dns.set("cluster.test", "127.0.0.1")
	holding := &holds{path: "/configmaps/slow", held: make(chan struct{}, 1), release: make(chan struct{})}
	r := kube.NewClusters(kube.Options{Resolve: dns.resolve, CallTimeout: time.Minute,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return &holdingTransport{next: rt, holds: holding} }})
	t.Cleanup(r.Close)
	ctx := context.Background()
	old, err := r.Get("prod", kube.Access{Kubeconfig: kubeconfigAt(t, env, "cluster.test", oldProxy.port(), "", "")})
	if err != nil {
		t.Fatal(err)
	}
	app, err := old.FollowApplication(ctx, w.appsNS, "web")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Stop()
	target, err := old.FollowResource(ctx, w.deployment("web"))
	if err != nil {
		t.Fatal(err)
	}
	defer target.Stop()
	mustDecide(t, old.Decide(ctx, []argocd.ResourceRef{w.deployment("web")}), argocd.PathGit, true, argocd.LevelSelfHeal, "")

	inFlight := make(chan error, 1)
	go func() {
		_, err := old.GetResource(ctx, w.configMap("slow"), kube.Fresh)
		inFlight <- err
	}()
	select {
	case <-holding.held:
	case err := <-inFlight:
		t.Fatalf("the call to hold ended: %v", err)
	}
	rotated, err := r.Update(ctx, "prod", kube.Access{Kubeconfig: kubeconfigAt(t, env, "cluster.test", newProxy.port(), "", "")})
	if err != nil {
		t.Fatal(err)
	}
	if _, open := oldProxy.counts(); open == 0 {
		t.Fatal("the old credentials' connections were closed under the call in flight")
	}
	close(holding.release)
	if err := <-inFlight; err != nil && kube.ClassOf(err) != argocd.FailureNotFound {
		t.Fatalf("the call in flight with the old credentials: %v, want it answered", err)
	}
	allClosed := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second) // the transport's idle timeout is 90 s
		for {
			opened, open := oldProxy.counts()
			if open == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d of the old credentials' %d connections still open", what, open, opened)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	allClosed("once nothing used them")

	// The new client set follows and reads through its own connections.
	mustDecide(t, rotated.Decide(ctx, []argocd.ResourceRef{w.deployment("web")}), argocd.PathGit, true, argocd.LevelSelfHeal, "")
	if _, err := rotated.ListApplications(ctx, kube.Fresh); err != nil {
		t.Fatal(err)
	}
	if _, open := newProxy.counts(); open == 0 {
		t.Error("the new credentials' connections were closed")
	}
	before, _ := oldProxy.counts()
	// (Applications it reads from the informer the two share: a resource.)
	if _, err := old.GetResource(ctx, w.configMap("settings"), kube.Fresh); err != nil && kube.ClassOf(err) != argocd.FailureNotFound {
		t.Fatalf("a later call of the old client set: %v", err)
	}
	if opened, _ := oldProxy.counts(); opened == before {
		t.Error("a later call of the old client set opened no connection of its own")
	}
	allClosed("after a later call")
}
