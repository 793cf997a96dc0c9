package kube

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Access says how to reach a cluster: a kubeconfig document (decrypted by the caller
// from the store) with an optional context, or the service's own in-cluster account.
type Access struct {
	// Kubeconfig is a kubeconfig document. It holds credentials: never log it.
	Kubeconfig []byte
	// Context selects a context of Kubeconfig; its current-context when empty.
	Context string
	// InCluster uses the service account the service runs as.
	InCluster bool
	// AllowInsecureTLS accepts a kubeconfig with insecure-skip-tls-verify (see
	// KubeconfigOptions); it is refused otherwise.
	AllowInsecureTLS bool
}

// InClusterError is why the service's own service account cannot be used: it does
// not run in a pod, or the account's files cannot be read. Its text reaches teams
// and leaves the cause out, since that names the service's own files and variables;
// the cause is for the operator's log.
type InClusterError struct{ Cause error }

func (e *InClusterError) Error() string {
	return "the service's own service account is not available (the service does not run in a Kubernetes pod, or cannot read its account)"
}

// RESTConfig builds the client configuration for access. A kubeconfig is checked
// with LoadKubeconfig every time, not only when it was registered, so a document
// stored before a check existed never runs a plugin or reads a file; only the
// fields that check accepts reach client-go.
func RESTConfig(access Access) (*rest.Config, error) {
	cfg, _, err := restConfig(access)
	return cfg, err
}

// restConfig is RESTConfig, also naming the setting of the server in a refused
// connection's error: clusters[name].server for the kubeconfig's cluster entry.
func restConfig(access Access) (*rest.Config, string, error) {
	cfg, err := restConfigOf(access)
	if err != nil || access.InCluster {
		return cfg, "server", err
	}
	raw, _, _ := LoadKubeconfigWith(access.Kubeconfig, access.kubeconfigOptions()) // parsed and accepted already
	ctxName := access.Context
	if ctxName == "" {
		ctxName = raw.CurrentContext
	}
	if c := raw.Contexts[ctxName]; c != nil {
		return cfg, fmt.Sprintf("clusters[%s].server", c.Cluster), nil
	}
	return cfg, "server", nil
}

func restConfigOf(access Access) (*rest.Config, error) {
	switch {
	case access.InCluster && len(access.Kubeconfig) > 0:
		return nil, errors.New("cluster access: choose a kubeconfig or in-cluster, not both")
	case access.InCluster:
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, &InClusterError{Cause: err}
		}
		return cfg, nil
	case len(access.Kubeconfig) == 0:
		return nil, errors.New("cluster access: no kubeconfig given")
	}
	raw, _, err := LoadKubeconfigWith(access.Kubeconfig, access.kubeconfigOptions())
	var refused *KubeconfigError
	if errors.As(err, &refused) {
		return nil, fmt.Errorf("kubeconfig refused: %w", err)
	}
	if err != nil {
		return nil, err
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: access.Context}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, access.Context, overrides, nil).ClientConfig()
	if err != nil {
		if access.Context != "" {
			return nil, fmt.Errorf("kubeconfig context %q: %w", access.Context, err)
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

func (a Access) kubeconfigOptions() KubeconfigOptions {
	return KubeconfigOptions{AllowInsecureTLS: a.AllowInsecureTLS}
}

// fingerprint identifies access without keeping the credentials themselves.
func (a Access) fingerprint() [sha256.Size]byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%t\x00%t\x00%s\x00", a.InCluster, a.AllowInsecureTLS, a.Context)
	b.Write(a.Kubeconfig)
	return sha256.Sum256(b.Bytes())
}

// Clusters is the registry of cluster client sets, one per cluster name, reused by
// every request so connections, the rate limit, the concurrency slots and the read
// cache are per cluster. It is safe for concurrent use.
//
// The informers of a name outlive a change of its credentials: they start again
// with the new ones (see Get), so a deployment followed across a rotation of the
// cluster's kubeconfig is still followed.
type Clusters struct {
	opts Options

	mu       sync.Mutex
	clusters map[string]registered
	// forgotten are the clusters Forget dropped: their informers run on until
	// their followers stop, and Close stops them too.
	forgotten []*Cluster
	closed    bool
	// source, when set, says which credentials a cluster has now; it is asked
	// when the cluster refuses those of an informer (see SetAccessSource).
	source     func(ctx context.Context, name string) (Access, error)
	refreshing map[string]bool
}

// ErrClosed is returned for clusters of a registry that was closed.
var ErrClosed = errors.New("cluster access is shut down")

type registered struct {
	cluster     *Cluster
	fingerprint [sha256.Size]byte
}

// NewClusters returns an empty registry whose clusters use opts.
func NewClusters(opts Options) *Clusters {
	return &Clusters{opts: opts, clusters: map[string]registered{}, refreshing: map[string]bool{}}
}

// Get returns the client set of the named cluster, building it on first use. The same
// *Cluster is returned while access is unchanged; changed credentials build a new one
// (with an empty cache), and the informers of the old one start again with them in
// the background (see Update, which waits for that). The old one's connections are
// closed as soon as nothing uses them: once its calls in flight and its informers
// have ended.
func (r *Clusters) Get(name string, access Access) (*Cluster, error) {
	c, _, err := r.get(context.Background(), name, access)
	return c, err
}

// Update is Get for credentials that may have just changed (a team replaced the
// cluster's kubeconfig): when they did, it returns once every informer of the
// cluster has started again with them (listed, then watching) and replaced the old
// one, or once ctx ends. The followers of each are told, and go on from what the new
// informer listed, so a transition during the change is not missed; those whose
// watch the new credentials cannot list learn it from Follow.Err.
func (r *Clusters) Update(ctx context.Context, name string, access Access) (*Cluster, error) {
	c, restarted, err := r.get(ctx, name, access)
	if err != nil {
		return nil, err
	}
	select {
	case <-restarted:
		return c, nil
	case <-ctx.Done():
		return c, fmt.Errorf("restart the watches of the cluster with its new credentials: %w", ctx.Err())
	}
}

// closedChan is a restart that has nothing to wait for.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

func (r *Clusters) get(ctx context.Context, name string, access Access) (*Cluster, <-chan struct{}, error) {
	fp := access.fingerprint()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, ErrClosed
	}
	reg, ok := r.clusters[name]
	if ok && reg.fingerprint == fp {
		return reg.cluster, closedChan, nil
	}
	// name is the caller's key (an internal id, say): errors leave it out, for the
	// caller to name the cluster as its people know it.
	cfg, serverField, err := restConfig(access)
	if err != nil {
		return nil, nil, err
	}
	c, err := newCluster(name, cfg, r.opts, serverField)
	if err != nil {
		return nil, nil, err
	}
	r.clusters[name] = registered{cluster: c, fingerprint: fp}
	if !ok {
		c.watches.onRejected = func() { r.refresh(name) }
		return c, closedChan, nil
	}
	// One set of informers per name, following with the newest credentials.
	c.watches = reg.cluster.watches
	restarted := c.watches.rebind(ctx, c)
	// The old informers have been told to start again with c; the old cluster's
	// connections close once they and the calls still in flight with it ended.
	reg.cluster.retire()
	return c, restarted, nil
}

// SetAccessSource tells the registry where a cluster's current credentials are
// read (the store, through which another replica of the service may have taken a
// team's new kubeconfig): when a cluster refuses the credentials of one of its
// informers, the registry reads them there and, if they changed, starts the
// informers again with them (see Update). Call it before the registry is used.
func (r *Clusters) SetAccessSource(source func(ctx context.Context, name string) (Access, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.source = source
}

// refresh reads the named cluster's credentials from the access source and
// updates the cluster when they changed; one refresh per name runs at a time.
func (r *Clusters) refresh(name string) {
	r.mu.Lock()
	source, busy := r.source, r.refreshing[name]
	if source == nil || busy || r.closed {
		r.mu.Unlock()
		return
	}
	r.refreshing[name] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.refreshing, name)
		r.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.withDefaults().CallTimeout)
	defer cancel()
	access, err := source(ctx, name)
	if err != nil {
		return // the informers keep trying with what they have
	}
	_, _ = r.Update(ctx, name, access)
}

// Close stops every informer of every cluster the registry built and waits until
// their goroutines have ended, then closes the clusters' idle connections: nothing
// the registry started outlives it. Follows end silently (their Changes send
// nothing more) and later Gets fail with ErrClosed. The service calls it once its
// readers and the pipeline have stopped.
func (r *Clusters) Close() {
	r.mu.Lock()
	r.closed = true
	all := r.forgotten
	for _, reg := range r.clusters {
		all = append(all, reg.cluster)
	}
	r.clusters, r.forgotten = map[string]registered{}, nil
	r.mu.Unlock()
	for _, c := range all {
		c.close()
	}
}

// Forget drops a cluster, for example after it was deleted or its credentials
// revoked; its connections are closed once its calls in flight and its informers
// (which run on until their followers stop) have ended.
func (r *Clusters) Forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reg, ok := r.clusters[name]; ok {
		r.forgotten = append(r.forgotten, reg.cluster)
		reg.cluster.retire()
	}
	delete(r.clusters, name)
}
