// Package kube is the only package that talks to Kubernetes clusters. It owns cluster
// access (client-go dynamic and discovery clients built from a kubeconfig or the
// in-cluster config, one set per cluster, reused), time budgets, error classes and a
// read cache shared by everyone reading one cluster.
//
// Entry points:
//
//   - Clusters is the registry: Clusters.Get(name, Access) returns the *Cluster for a
//     name, building it on first use and again only when its credentials change.
//     Clusters.Close stops every informer of every cluster it built and waits for
//     their goroutines: nothing started here outlives the registry.
//     Clusters.Update takes a cluster's new credentials and returns once its
//     informers run with them; a refused informer asks the access source
//     (SetAccessSource) for newer ones.
//   - LoadKubeconfig accepts a team's kubeconfig only with inline settings (https
//     server, inline TLS data and credentials): no exec plugin, auth provider, file
//     path or proxy, in any entry, and no field kubeconfigs do not have (a
//     misspelt setting, which client-go ignores, is refused naming it, never its
//     value). RESTConfig applies it at every use, so a document
//     stored before the check cannot run a command or read a file of the service's.
//     Every connection to an API server checks the address its host resolves to
//     then (netguard: no cloud metadata endpoint, link-local or unspecified
//     address), through one connection pool per Cluster that its clients and
//     informers share and that closes with it, or, once newer credentials
//     replaced it, as soon as its calls in flight and its informers have ended.
//     No redirect of a server is followed: it would carry the credentials elsewhere.
//   - Cluster.Decide(ctx, targets) returns the Git-or-direct argocd.Decision for up to
//     Options.MaxTargets targets within Options.DecisionBudget; it never fails: a read
//     that fails or runs out of time makes the decision unknown (Known=false, direct)
//     with the failure's class.
//   - Cluster.ListApplications, GetApplication, AppList and AppDetail read Argo CD
//     Applications for people (through the read cache).
//   - Cluster.GetResource reads one object, and ReadinessOf tells how far its rollout
//     is (kstatus: Current, InProgress, Failed, Terminating).
//   - Cluster.FollowApplication and FollowResource report an Application's or one
//     object's changes from shared informers (one on all Applications, one per
//     followed object field-selected by its name), each running while it has
//     followers; a dropped watch resumes from the last resource version seen.
//     Each watch request lasts at most Options.WatchRecheck, so credentials the
//     API server stops accepting (401, 403) are met there and reported to the
//     followers (Follow.Err); the informers start again with a cluster's new
//     credentials without missing a transition (they list, then take over).
//     HoldApplications keeps the informer on Applications running for readers too:
//     while it runs, ListApplications, AppList and Decide read Applications from it
//     (decoded once per change) and list nothing.
//   - Cluster.DryRun validates manifests with a server-side apply in dryRun=All mode
//     and reports each rejection with the API server's message verbatim.
//
// Budgets: each API call gets min(Options.CallTimeout, what the caller's context has
// left), and waiting for one of the cluster's Options.Concurrency slots counts against
// it. Errors are *Error values classified as argocd.FailureNotInstalled, Forbidden,
// Unreachable, NotFound or Other by client-go and net error types.
// Options.Observer, when set, is told each read's outcome class, for metrics.
//
// Cache: identical reads of one cluster within Options.CacheTTL share one API call and
// concurrent identical reads wait on a single request; a Refresh read re-reads only if
// the cached result is older than Options.RefreshFloor. Decide re-reads the
// Application list that way when a target's tracking annotation or instance label
// names an Application the cached list lacks (one created since), so a new
// Application is seen at once and a flood of misses costs one list per RefreshFloor.
// Cached values are cluster objects read with the service's credentials and carry
// nothing about the person who asked.
package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/kukie/kukie-gitops/argocd"
)

// Defaults of Options.
const (
	DefaultCallTimeout    = 5 * time.Second
	DefaultDecisionBudget = 10 * time.Second
	DefaultMaxTargets     = 5
	DefaultConcurrency    = 8
	DefaultCacheTTL       = 10 * time.Second
	DefaultRefreshFloor   = 2 * time.Second
	DefaultDiscoveryTTL   = 10 * time.Minute
	DefaultWatchRecheck   = time.Minute
	DefaultQPS            = 50
	DefaultBurst          = 100
	DefaultUserAgent      = "kukie-gitops"
	DefaultFieldManager   = "kukie-gitops"
	// DefaultMaxResponseBytes is far above the list of Applications of the largest
	// Argo CD instances (thousands of apps with their resources' status), and a
	// bound on what a server that is no API server can make the service hold.
	DefaultMaxResponseBytes = 256 << 20
)

// Options tune cluster access; zero fields take the defaults above.
type Options struct {
	// CallTimeout bounds one API call, including the wait for a concurrency slot.
	CallTimeout time.Duration
	// DecisionBudget bounds a whole Decide.
	DecisionBudget time.Duration
	// MaxTargets is how many targets Decide examines; the rest are skipped.
	MaxTargets int
	// Concurrency is the number of API calls in flight per cluster.
	Concurrency int
	// CacheTTL is how long a read is shared; RefreshFloor is the age below which a
	// Refresh read still uses the cache.
	CacheTTL     time.Duration
	RefreshFloor time.Duration
	// DiscoveryTTL is how long the list of served kinds is kept; a kind missing from
	// it triggers a re-read (at most every RefreshFloor).
	DiscoveryTTL time.Duration
	// WatchRecheck bounds one watch request of an informer: the next one is
	// authenticated and authorized anew, so credentials revoked (or rights
	// withdrawn) while an informer watches are noticed within it, and its
	// followers told (Follow.Err). The API server checks them only when a request
	// starts; client-go's own bound is 5 to 10 minutes. Above one second.
	WatchRecheck time.Duration
	// QPS and Burst configure client-go's client-side rate limit.
	QPS   float32
	Burst int
	// UserAgent is sent with every request; FieldManager names the service in
	// server-side apply.
	UserAgent    string
	FieldManager string
	// Argo describes the Argo CD instance of the cluster (instance label key,
	// installation id, control-plane namespace).
	Argo argocd.Options
	// Clock measures cache ages; the real clock when nil.
	Clock clock.PassiveClock
	// WrapTransport wraps the HTTP transport, for metrics or request counting.
	WrapTransport transport.WrapperFunc
	// Observer, when set, is told the outcome of every read, for metrics.
	Observer ReadObserver
	// Resolve looks up the host names of API servers, whose addresses every
	// connection checks (see NewCluster); the system's resolver when nil. For
	// tests.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// MaxResponseBytes bounds the body of each answer of the API server but a
	// watch's stream (DefaultMaxResponseBytes when 0): see boundedBodies.
	MaxResponseBytes int64
}

// ReadObserver is told of each read of a cluster: read is "applications" (the
// list), "application", "resource" or "settings" (argocd-cm); outcome is "ok" or the read's failure class
// (not_installed, forbidden, unreachable, not_found, error). Both are fixed sets.
// Calls must not block.
type ReadObserver interface {
	Read(read, outcome string)
}

// observeRead reports a read's outcome to the observer and returns err unchanged.
func (c *Cluster) observeRead(read string, err error) error {
	if c.opts.Observer == nil {
		return err
	}
	outcome := "ok"
	if err != nil {
		var ke *Error
		if errors.As(err, &ke) {
			outcome = string(ke.Class)
		} else {
			outcome = string(Classify(err))
		}
	}
	c.opts.Observer.Read(read, outcome)
	return err
}

func (o Options) withDefaults() Options {
	setDuration := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setDuration(&o.CallTimeout, DefaultCallTimeout)
	setDuration(&o.DecisionBudget, DefaultDecisionBudget)
	setDuration(&o.CacheTTL, DefaultCacheTTL)
	setDuration(&o.RefreshFloor, DefaultRefreshFloor)
	setDuration(&o.DiscoveryTTL, DefaultDiscoveryTTL)
	if o.WatchRecheck <= time.Second {
		// A watch ending within a second of its start without an event is taken
		// for a broken one by client-go, which lists again.
		o.WatchRecheck = DefaultWatchRecheck
	}
	if o.MaxTargets <= 0 {
		o.MaxTargets = DefaultMaxTargets
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.QPS <= 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	return o
}

// Cluster is the client set of one cluster with its budgets and read cache. It is
// safe for concurrent use and meant to live as long as the cluster's credentials.
type Cluster struct {
	name    string
	opts    Options
	dynamic dynamic.Interface
	// apps reads Applications as raw JSON, decoded once into argocd types: decoding
	// a large list through unstructured objects costs several times more.
	apps      rest.Interface
	discovery discovery.DiscoveryInterfaceWithContext
	slots     *semaphore.Weighted
	reads     *readCache
	kinds     *readCache
	// httpClient is the connection pool of every client above; conns are its
	// connections, closed when the cluster is closed.
	httpClient *http.Client
	conns      *connections
	// watches are the informers on Applications and on single objects while
	// somebody follows them.
	watches *watches
	// users counts what uses the cluster's connections now: API calls in flight
	// and informers running with its clients. Once the cluster is retired (its
	// credentials were replaced), the last of them to end closes its
	// connections (see retire).
	usersMu sync.Mutex
	users   int
	retired bool
}

// acquire counts a use of the cluster's connections, which release ends.
func (c *Cluster) acquire() {
	c.usersMu.Lock()
	c.users++
	c.usersMu.Unlock()
}

func (c *Cluster) release() {
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	c.users--
	if c.users == 0 && c.retired {
		c.closeConnections()
	}
}

// retire says that the registry no longer hands the cluster out (newer
// credentials replaced it): its connections are closed as soon as nothing uses
// them, the calls in flight and the informers still running with its clients
// ended, rather than left to the transport's idle timeout or the registry's
// Close. A holder that calls it later still connects, and that connection is
// closed when its call ends.
func (c *Cluster) retire() {
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	c.retired = true
	if c.users == 0 {
		c.closeConnections()
	}
}

// closeConnections drops the transport's idle connections from its pool (so no
// call picks one up as it closes) and closes every connection left; called with
// usersMu held, so no call of the cluster starts meanwhile.
func (c *Cluster) closeConnections() {
	utilnet.CloseIdleConnectionsFor(c.httpClient.Transport)
	c.conns.closeOpen()
}

// NewCluster builds the client set for a cluster from a REST configuration. cfg is
// copied; the caller's value is not changed. Every connection to the API server
// checks the address its host resolves to then (a cloud metadata endpoint, a
// link-local or unspecified address is refused, loopback allowed: see
// clusterAddresses), so a server named by a host name cannot reach what the
// service alone can, nor come to by a change of its DNS records after it was
// registered. A refused connection fails the call with a *KubeconfigError naming
// the server, whose Field is "server".
func NewCluster(name string, cfg *rest.Config, opts Options) (*Cluster, error) {
	return newCluster(name, cfg, opts, "server")
}

// newCluster is NewCluster naming the server's setting serverField in a refused
// connection's error (clusters[prod].server).
func newCluster(name string, cfg *rest.Config, opts Options, serverField string) (*Cluster, error) {
	opts = opts.withDefaults()
	cfg = rest.CopyConfig(cfg)
	// The dialer is one function per cluster: client-go keys its shared transports
	// by it, so the cluster gets a transport (a connection pool) of its own, built
	// once here for every client below and closed with the cluster (see close).
	conns := newConnections()
	cfg.Dial = conns.dialer(guardedDial(cfg.Host, serverField, opts.Resolve))
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	// Every call carries a context deadline (see do); an http.Client timeout on top
	// would race with it and blur which budget ran out.
	cfg.Timeout = 0
	cfg.UserAgent = opts.UserAgent
	if opts.WrapTransport != nil {
		cfg.Wrap(opts.WrapTransport)
	}
	maxBody := opts.MaxResponseBytes
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return boundedBodies{next: rt, max: maxBody} })
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return noRedirects{next: rt} })
	// One rate limit and one HTTP client (connection pool) for all clients of the
	// cluster; each client would otherwise get a limiter of its own.
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(opts.QPS, opts.Burst)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	apps, err := applicationsClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("applications client: %w", err)
	}
	c := &Cluster{
		name:      name,
		opts:      opts,
		dynamic:   dyn,
		apps:      apps,
		discovery: discovery.ToDiscoveryInterfaceWithContext(disc),
		slots:     semaphore.NewWeighted(int64(opts.Concurrency)),
		reads:     newReadCache(opts.Clock, opts.CacheTTL, opts.RefreshFloor, opts.CallTimeout),
		kinds:     newReadCache(opts.Clock, opts.DiscoveryTTL, opts.RefreshFloor, opts.CallTimeout),

		httpClient: httpClient,
		conns:      conns,
	}
	c.watches = newWatches(c)
	return c, nil
}

// noRedirects fails a call the API server answers with a redirect, which is then
// not followed. The server is the team's, and the calls made of it are never
// answered with one; a redirect followed would carry the credentials, which
// client-go adds to every request, to whatever address it names, plain http
// included, which the server URL may not be (see checkServer). The address is
// named by its scheme and host: its path and query are the server's text, which
// may carry a token.
type noRedirects struct{ next http.RoundTripper }

func (n noRedirects) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := n.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return resp, nil
	}
	where := "another address"
	if loc, err := resp.Location(); err == nil {
		where = loc.Scheme + "://" + loc.Host
	}
	resp.Body.Close()
	return nil, fmt.Errorf("the API server answered %d, a redirect to %s, which is not followed: the credentials go to the server the kubeconfig names only",
		resp.StatusCode, where)
}

// Name returns the cluster's name in the registry.
func (c *Cluster) Name() string { return c.name }

// do runs one API call: it waits for a concurrency slot and performs fn, both within
// min(CallTimeout, what ctx has left).
func (c *Cluster) do(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	c.acquire()
	defer c.release()
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	if err := c.slots.Acquire(ctx, 1); err != nil {
		return &Error{Class: argocd.FailureUnreachable, Op: op, Err: fmt.Errorf("wait for a free connection slot: %w", err)}
	}
	defer c.slots.Release(1)
	return classified(op, fn(ctx))
}

// cached reads through the cache. The caller waits at most min(CallTimeout, what ctx
// has left); the shared fetch behind it gets CallTimeout of its own.
func (c *Cluster) cached(ctx context.Context, cache *readCache, key readKey, mode ReadMode, op string, fetch func(ctx context.Context) (any, error)) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	v, err := cache.get(ctx, key, mode, func(fctx context.Context) (any, error) {
		var out any
		err := c.do(fctx, op, func(fctx context.Context) error {
			var err error
			out, err = fetch(fctx)
			return err
		})
		return out, err
	})
	if err != nil {
		if !errors.As(err, new(*Error)) {
			// The caller's own budget ran out while waiting.
			err = classified(op, err)
		}
		return nil, err
	}
	return v, nil
}
