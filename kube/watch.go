package kube

import (
	"context"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
}

// sharedWatch is one informer and its followers, by object key ("namespace/name",
// or "name" for a cluster-scoped object).
type sharedWatch struct {
	key       watchKey
	informer  cache.SharedIndexInformer
	cancel    context.CancelFunc
	ready     chan struct{} // closed once started (err says whether it failed)
	err       error
	followers map[string]map[*follower]bool // guarded by watches.mu
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
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		// The reflector watches again from the last resource version it saw (and
		// lists again only if the API server has compacted it away).
		log.Debug().Err(err).Msg("Watch ended; resuming")
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return fmt.Errorf("watch %s of cluster %s: %w", key, c.name, err)
	}
	notify := func(obj any) {
		k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		c.watches.mu.Lock()
		defer c.watches.mu.Unlock()
		for f := range w.followers[k] {
			select {
			case f.ch <- struct{}{}:
			default:
			}
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}); err != nil {
		return fmt.Errorf("watch %s of cluster %s: %w", key, c.name, err)
	}
	runCtx, cancel := context.WithCancel(log.WithContext(context.WithoutCancel(ctx)))
	go informer.RunWithContext(runCtx)
	syncCtx, cancelSync := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancelSync()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		cancel()
		return fmt.Errorf("watch %s of cluster %s: not listed within %s", key, c.name, c.opts.CallTimeout)
	}
	c.watches.mu.Lock()
	defer c.watches.mu.Unlock()
	w.informer, w.cancel = informer, cancel
	if len(w.followers) == 0 {
		cancel() // everyone left while it started
	}
	return nil
}

// dropManagedFields is the informers' transform: objects are kept without
// metadata.managedFields.
func dropManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	}
	return obj, nil
}
