package kube

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// appWatch is a cluster's one informer on Applications, shared by everyone following
// one: it runs while somebody follows an Application and stops with the last of
// them. The informer lists once and then watches, resuming from the resource version
// it saw when a watch drops, so no transition is missed while it runs.
type appWatch struct {
	mu        sync.Mutex
	followers map[string]map[*follower]bool // by "namespace/name"
	stop      chan struct{}                 // closed to stop the running informer; nil when none runs
	starts    int                           // informers started, for tests
}

type follower struct{ ch chan struct{} }

// FollowApplication reports every change of the Application namespace/name on the
// returned channel (a change that finds the channel full is merged into the one
// waiting there, so the reader never falls behind) until stop is called. The
// cluster's followers share one informer on Applications, started with the first of
// them and stopped with the last. An error means the watch could not be established
// (Applications cannot be listed and watched): the caller polls instead.
func (c *Cluster) FollowApplication(ctx context.Context, namespace, name string) (<-chan struct{}, func(), error) {
	key := namespace + "/" + name
	f := &follower{ch: make(chan struct{}, 1)}
	w := &c.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop == nil {
		if err := c.startWatchLocked(ctx); err != nil {
			return nil, nil, err
		}
	}
	if w.followers[key] == nil {
		w.followers[key] = map[*follower]bool{}
	}
	w.followers[key][f] = true
	var once sync.Once
	return f.ch, func() { once.Do(func() { c.unfollow(key, f) }) }, nil
}

func (c *Cluster) unfollow(key string, f *follower) {
	w := &c.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.followers[key], f)
	if len(w.followers[key]) == 0 {
		delete(w.followers, key)
	}
	if len(w.followers) == 0 && w.stop != nil {
		close(w.stop)
		w.stop = nil
	}
}

// startWatchLocked starts the informer and waits (within the call timeout) until it
// has listed the Applications; a watch that cannot list is stopped again and
// reported.
func (c *Cluster) startWatchLocked(ctx context.Context) error {
	w := &c.watch
	stop := make(chan struct{})
	factory := dynamicinformer.NewDynamicSharedInformerFactory(c.dynamic, 0)
	informer := factory.ForResource(ApplicationResource).Informer()
	notify := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for f := range w.followers[u.GetNamespace()+"/"+u.GetName()] {
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
		return fmt.Errorf("watch Applications of cluster %s: %w", c.name, err)
	}
	factory.Start(stop)
	syncCtx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		close(stop)
		return fmt.Errorf("watch Applications of cluster %s: not listed within %s", c.name, c.opts.CallTimeout)
	}
	if w.followers == nil {
		w.followers = map[string]map[*follower]bool{}
	}
	w.stop = stop
	w.starts++
	return nil
}
