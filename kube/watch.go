package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kukie/kukie-gitops/argocd"
)

// watchKey names one shared informer of a cluster: every Application (name and
// namespace empty), or one object, field-selected by name in its namespace.
type watchKey struct {
	resource  schema.GroupVersionResource
	namespace string
	name      string
}

func (k watchKey) String() string {
	if k.name == "" {
		return k.resource.Resource
	}
	if k.namespace == "" {
		return k.resource.Resource + " " + k.name
	}
	return k.resource.Resource + " " + k.namespace + "/" + k.name
}

// watches are a cluster's running informers, shared by everyone following an object
// they watch: an informer starts with its first follower and stops with its last.
// Each informer lists once and then watches, resuming from the resource version it
// last saw when a watch drops (it lists again only when the API server no longer
// has that version), so no transition is missed while it runs.
type watches struct {
	mu      sync.Mutex
	running map[watchKey]*sharedWatch
	starts  map[watchKey]int // informers started, for tests
	readers appReaders
	// closed refuses new informers once the cluster is closed; informers counts
	// the goroutines running one, which close waits for.
	closed    bool
	informers sync.WaitGroup
}

// errWatchesClosed is why a closed cluster follows nothing.
var errWatchesClosed = errors.New("cluster access is shut down")

// sharedWatch is one informer and its followers, by object key ("namespace/name",
// or "name" for a cluster-scoped object).
type sharedWatch struct {
	key       watchKey
	informer  cache.SharedIndexInformer
	cancel    context.CancelFunc
	ready     chan struct{} // closed once started (err says whether it failed)
	err       error
	followers map[string]map[*follower]bool // guarded by watches.mu
	// apps are the Applications the informer holds, decoded once per change, for
	// the informer on all Applications only; snap indexes them until the next
	// change. Guarded by watches.mu.
	apps map[string]argocd.Application
	snap *appSnapshot
	// degraded is set once a watch was refused (forbidden, not found): the
	// informer's objects may be stale.
	degraded bool
}

type follower struct{ ch chan struct{} }

// Follow is one follower of one object. Changes receives a value at each change
// the watch sees (added, updated, deleted), starting with the object as first
// listed; a change that finds the channel full is merged into the one waiting
// there, so the reader never falls behind. Stop ends the follow.
type Follow struct {
	Changes <-chan struct{}
	w       *sharedWatch
	key     string
	stop    func()
}

// Stop ends the follow; the informer stops with its last follower. Calling it again
// does nothing.
func (f *Follow) Stop() { f.stop() }

// Latest returns the object as the watch last saw it, shared with the informer:
// read it, do not modify it. ok is false while it does not exist.
func (f *Follow) Latest() (obj *unstructured.Unstructured, ok bool) {
	v, exists, err := f.w.informer.GetStore().GetByKey(f.key)
	if err != nil || !exists {
		return nil, false
	}
	u, ok := v.(*unstructured.Unstructured)
	return u, ok
}

// FollowApplication follows the Application namespace/name (see Follow). The
// cluster's followers of Applications share one informer on all of them. An error
// means the watch could not be established (Applications cannot be listed and
// watched): the caller polls instead.
func (c *Cluster) FollowApplication(ctx context.Context, namespace, name string) (*Follow, error) {
	return c.follow(ctx, watchKey{resource: ApplicationResource}, namespace+"/"+name)
}

// HoldApplications keeps the cluster's informer on all Applications running (it
// starts it when none runs) until linger after the last holder released it, so that
// ListApplications, AppList and Decide read Applications from it instead of listing
// them: readers coming one after the other within linger share one informer and
// its one initial list. An error means Applications cannot be watched (a failed
// start is not tried again within Options.CacheTTL); reads then list them as before.
func (c *Cluster) HoldApplications(ctx context.Context, linger time.Duration) (release func(), err error) {
	r := &c.watches.readers
	r.mu.Lock()
	if r.follow == nil && r.err != nil && c.opts.Clock.Since(r.failedAt) < c.opts.CacheTTL {
		err := r.err
		r.mu.Unlock()
		return nil, err
	}
	if r.follow == nil {
		r.mu.Unlock()
		f, err := c.follow(ctx, watchKey{resource: ApplicationResource}, "")
		r.mu.Lock()
		switch {
		case err != nil:
			r.err, r.failedAt = err, c.opts.Clock.Now()
			r.mu.Unlock()
			return nil, err
		case r.follow == nil:
			r.follow = f
		default:
			defer f.Stop() // another holder started one meanwhile
		}
	}
	r.holders++
	if r.linger != nil {
		r.linger.Stop()
		r.linger = nil
	}
	r.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { r.release(linger) }) }, nil
}

// appReaders is the one hold on the informer on Applications for readers.
type appReaders struct {
	mu       sync.Mutex
	follow   *Follow
	holders  int
	linger   *time.Timer // ends the hold once nobody held it for a while
	err      error       // the last failed start, at failedAt
	failedAt time.Time
	closed   bool // the cluster was closed: nothing lingers
}

func (r *appReaders) release(linger time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holders--
	if r.holders > 0 || r.closed {
		return
	}
	f := r.follow
	r.linger = time.AfterFunc(linger, func() {
		r.mu.Lock()
		end := r.follow == f && r.holders == 0
		if end {
			r.follow, r.linger = nil, nil
		}
		r.mu.Unlock()
		if end {
			f.Stop()
		}
	})
}

// watchedApplications returns the Applications of the running informer on all of
// them, indexed; ok is false when none runs.
func (c *Cluster) watchedApplications() (*appSnapshot, bool) {
	ws := &c.watches
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.running[watchKey{resource: ApplicationResource}]
	if !ok {
		return nil, false
	}
	select {
	case <-w.ready:
	default:
		return nil, false
	}
	if w.err != nil || w.degraded {
		return nil, false
	}
	if w.snap == nil {
		apps := make([]argocd.Application, 0, len(w.apps))
		for _, a := range w.apps {
			apps = append(apps, a)
		}
		// The list's order, as the API server lists them.
		slices.SortFunc(apps, func(a, b argocd.Application) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		w.snap = &appSnapshot{index: argocd.NewAppIndex(apps)}
	}
	return w.snap, true
}

// FollowResource follows one object (see Follow), for instance a deployment's
// target: an informer on its kind, in its namespace, field-selected by its name, so
// the watch carries that object's changes only. Followers of one object share the
// informer. An error means the kind is not served or the object cannot be listed and
// watched: the caller polls instead.
func (c *Cluster) FollowResource(ctx context.Context, ref argocd.ResourceRef) (*Follow, error) {
	kind, err := c.mapKind(ctx, ref.GroupKind(), ref.Version)
	if err != nil {
		return nil, err
	}
	key := watchKey{resource: kind.resource, name: ref.Name}
	objKey := ref.Name
	if kind.namespaced {
		if ref.Namespace == "" {
			return nil, fmt.Errorf("watch %s: kind %s is namespaced and no namespace was given", ref, ref.Kind)
		}
		key.namespace = ref.Namespace
		objKey = ref.Namespace + "/" + ref.Name
	}
	return c.follow(ctx, key, objKey)
}

// follow adds a follower of objKey to the informer key, starting the informer when
// none runs; followers arriving while it starts wait for it.
func (c *Cluster) follow(ctx context.Context, key watchKey, objKey string) (*Follow, error) {
	ws := &c.watches
	f := &follower{ch: make(chan struct{}, 1)}
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return nil, fmt.Errorf("watch %s of cluster %s: %w", key, c.name, errWatchesClosed)
	}
	if ws.running == nil {
		ws.running, ws.starts = map[watchKey]*sharedWatch{}, map[watchKey]int{}
	}
	w, found := ws.running[key]
	if !found {
		w = &sharedWatch{key: key, ready: make(chan struct{}), followers: map[string]map[*follower]bool{}}
		ws.running[key] = w
		ws.starts[key]++
	}
	if w.followers[objKey] == nil {
		w.followers[objKey] = map[*follower]bool{}
	}
	w.followers[objKey][f] = true
	ws.mu.Unlock()

	if !found {
		w.err = c.startWatch(ctx, w)
		if w.err != nil {
			ws.mu.Lock()
			if ws.running[key] == w {
				delete(ws.running, key)
			}
			ws.mu.Unlock()
		}
		close(w.ready)
	}
	select {
	case <-w.ready:
	case <-ctx.Done():
		c.unfollow(w, objKey, f)
		return nil, fmt.Errorf("watch %s of cluster %s: %w", key, c.name, ctx.Err())
	}
	if w.err != nil {
		c.unfollow(w, objKey, f)
		return nil, w.err
	}
	var once sync.Once
	return &Follow{Changes: f.ch, w: w, key: objKey, stop: func() { once.Do(func() { c.unfollow(w, objKey, f) }) }}, nil
}

// unfollow removes a follower; the last one stops the informer (or, while it still
// starts, has it stopped once started).
func (c *Cluster) unfollow(w *sharedWatch, objKey string, f *follower) {
	ws := &c.watches
	ws.mu.Lock()
	defer ws.mu.Unlock()
	delete(w.followers[objKey], f)
	if len(w.followers[objKey]) == 0 {
		delete(w.followers, objKey)
	}
	if len(w.followers) > 0 {
		return
	}
	if ws.running[w.key] == w {
		delete(ws.running, w.key)
	}
	select {
	case <-w.ready:
		if w.cancel != nil {
			w.cancel()
		}
	default:
		// Still starting: its starter sees no follower left and stops it.
	}
}

// startWatch starts w's informer and waits (within the call timeout) until it has
// listed; one that cannot list is stopped again and reported. The informer runs
// detached from ctx's cancellation (it is shared) but logs through ctx's logger.
func (c *Cluster) startWatch(ctx context.Context, w *sharedWatch) error {
	key := w.key
	var tweak dynamicinformer.TweakListOptionsFunc
	if key.name != "" {
		selector := fields.OneTermEqualSelector("metadata.name", key.name).String()
		tweak = func(o *metav1.ListOptions) { o.FieldSelector = selector }
	}
	informer := dynamicinformer.NewFilteredDynamicInformer(c.dynamic, key.resource, key.namespace, 0, cache.Indexers{}, tweak).Informer()
	// Nobody here reads managed fields; they are often the larger part of an object.
	if err := informer.SetTransform(dropManagedFields); err != nil {
		return fmt.Errorf("watch %s of cluster %s: %w", key, c.name, err)
	}
	log := zerolog.Ctx(ctx).With().Str("cluster", c.name).Str("watch", key.String()).Logger()
	startErr := make(chan error, 1)
	var failed atomic.Pointer[error]
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		select {
		case startErr <- err: // only the first, and only a start waits for it
		default:
		}
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			// Listed but no longer (or never) watchable: what it holds goes stale,
			// so reads list again instead.
			c.watches.mu.Lock()
			w.degraded = true
			c.watches.mu.Unlock()
		}
		// The reflector watches again from the last resource version it saw (and
		// lists again only if the API server has compacted it away).
		log.Debug().Err(err).Msg("Watch ended; resuming")
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return fmt.Errorf("watch %s of cluster %s: %w", key, c.name, err)
	}
	allApps := key == watchKey{resource: ApplicationResource}
	if allApps {
		w.apps = map[string]argocd.Application{}
	}
	notify := func(obj any, deleted bool) {
		k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		var app argocd.Application
		decoded := false
		if allApps && !deleted {
			// Decoded here, once per change, not at every read of the list.
			if u, ok := obj.(*unstructured.Unstructured); ok {
				app, err = decodeApplication(u)
				decoded = err == nil
				if err != nil {
					log.Warn().Err(err).Str("application", k).Msg("Skipping unreadable Application")
				}
			}
		}
		c.watches.mu.Lock()
		defer c.watches.mu.Unlock()
		if allApps {
			if decoded {
				w.apps[k] = app
			} else {
				delete(w.apps, k)
			}
			w.snap = nil
		}
		for f := range w.followers[k] {
			select {
			case f.ch <- struct{}{}:
			default:
			}
		}
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { notify(obj, false) },
		UpdateFunc: func(_, obj any) { notify(obj, false) },
		DeleteFunc: func(obj any) { notify(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("watch %s of cluster %s: %w", key, c.name, err)
	}
	runCtx, cancel := context.WithCancel(log.WithContext(context.WithoutCancel(ctx)))
	c.watches.mu.Lock()
	if c.watches.closed {
		c.watches.mu.Unlock()
		cancel()
		return fmt.Errorf("watch %s of cluster %s: %w", key, c.name, errWatchesClosed)
	}
	// Added under the lock that close takes first, so close waits for every
	// informer started before it.
	c.watches.informers.Add(1)
	c.watches.mu.Unlock()
	go func() {
		defer c.watches.informers.Done()
		informer.RunWithContext(runCtx)
	}()
	syncCtx, cancelSync := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancelSync()
	// Synced once the handler has seen every listed object, so the followers and
	// the decoded Applications are complete; a list or watch that fails while
	// starting ends the wait at once.
	go func() {
		select {
		case err := <-startErr:
			failed.Store(&err)
			cancelSync()
		case <-syncCtx.Done():
		}
	}()
	if !cache.WaitForCacheSync(syncCtx.Done(), reg.HasSynced) {
		cancel()
		if err := failed.Load(); err != nil {
			return &Error{Class: Classify(*err), Op: "watch " + key.String(), Err: fmt.Errorf("cluster %s: %w", c.name, *err)}
		}
		return fmt.Errorf("watch %s of cluster %s: not listed within %s", key, c.name, c.opts.CallTimeout)
	}
	c.watches.mu.Lock()
	defer c.watches.mu.Unlock()
	w.informer, w.cancel = informer, cancel
	if len(w.followers) == 0 || c.watches.closed {
		cancel() // everyone left, or the cluster was closed, while it started
	}
	return nil
}

// close stops every informer of the cluster, the hold of readers on Applications
// included, and waits until their goroutines have ended; then it closes the idle
// connections they leave. Later follows fail.
func (c *Cluster) close() {
	r := &c.watches.readers
	r.mu.Lock()
	if r.linger != nil {
		r.linger.Stop()
	}
	r.follow, r.linger, r.closed = nil, nil, true
	r.mu.Unlock()

	ws := &c.watches
	ws.mu.Lock()
	ws.closed = true
	for key, w := range ws.running {
		delete(ws.running, key)
		select {
		case <-w.ready:
			if w.cancel != nil {
				w.cancel()
			}
		default:
			// Still starting: its starter sees the cluster closed and stops it.
		}
	}
	ws.mu.Unlock()
	ws.informers.Wait()
	utilnet.CloseIdleConnectionsFor(c.httpClient.Transport)
}

// dropManagedFields is the informers' transform: objects are kept without
// metadata.managedFields.
func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	}
	return obj, nil
}

// decodeApplication reads an Application the informer holds as the list decodes
// one.
func decodeApplication(u *unstructured.Unstructured) (argocd.Application, error) {
	data, err := u.MarshalJSON()
	if err != nil {
		return argocd.Application{}, err
	}
	return argocd.DecodeApplication(data)
}
