package kube

import (
	"bytes"
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
	raw, err := LoadKubeconfig(access.Kubeconfig)
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

// fingerprint identifies access without keeping the credentials themselves.
func (a Access) fingerprint() [sha256.Size]byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%t\x00%s\x00", a.InCluster, a.Context)
	b.Write(a.Kubeconfig)
	return sha256.Sum256(b.Bytes())
}

// Clusters is the registry of cluster client sets, one per cluster name, reused by
// every request so connections, the rate limit, the concurrency slots and the read
// cache are per cluster. It is safe for concurrent use.
type Clusters struct {
	opts Options

	mu       sync.Mutex
	clusters map[string]registered
	// replaced are the clusters Get built before credentials changed: their
	// informers run on until their followers stop, and Close stops them too.
	replaced []*Cluster
	closed   bool
}

// ErrClosed is returned for clusters of a registry that was closed.
var ErrClosed = errors.New("cluster access is shut down")

type registered struct {
	cluster     *Cluster
	fingerprint [sha256.Size]byte
}

// NewClusters returns an empty registry whose clusters use opts.
func NewClusters(opts Options) *Clusters {
	return &Clusters{opts: opts, clusters: map[string]registered{}}
}

// Get returns the client set of the named cluster, building it on first use. The same
// *Cluster is returned while access is unchanged; changed credentials build a new one
// (with an empty cache).
func (r *Clusters) Get(name string, access Access) (*Cluster, error) {
	fp := access.fingerprint()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	reg, ok := r.clusters[name]
	if ok && reg.fingerprint == fp {
		return reg.cluster, nil
	}
	// name is the caller's key (an internal id, say): errors leave it out, for the
	// caller to name the cluster as its people know it.
	cfg, err := RESTConfig(access)
	if err != nil {
		return nil, err
	}
	c, err := NewCluster(name, cfg, r.opts)
	if err != nil {
		return nil, err
	}
	if ok {
		r.replaced = append(r.replaced, reg.cluster)
	}
	r.clusters[name] = registered{cluster: c, fingerprint: fp}
	return c, nil
}

// Close stops every informer of every cluster the registry built and waits until
// their goroutines have ended, then closes the clusters' idle connections: nothing
// the registry started outlives it. Follows end silently (their Changes send
// nothing more) and later Gets fail with ErrClosed. The service calls it once its
// readers and the pipeline have stopped.
func (r *Clusters) Close() {
	r.mu.Lock()
	r.closed = true
	all := r.replaced
	for _, reg := range r.clusters {
		all = append(all, reg.cluster)
	}
	r.clusters, r.replaced = map[string]registered{}, nil
	r.mu.Unlock()
	for _, c := range all {
		c.close()
	}
}

// Forget drops a cluster, for example after it was deleted or its credentials revoked.
func (r *Clusters) Forget(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reg, ok := r.clusters[name]; ok {
		r.replaced = append(r.replaced, reg.cluster)
	}
	delete(r.clusters, name)
}
