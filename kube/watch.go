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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
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
//
// The registry's successive clusters of one name (built anew when its credentials
// change) share one watches: when the credentials change, every informer is started
// again with the new ones (a list, then a watch) and replaces the old one once it has
// listed, so its followers see the objects as the new credentials read them without
// a gap (see rebind).
type watches struct {
	mu sync.Mutex
	// source is the cluster whose clients start informers: the newest credentials.
	source  *Cluster
	running map[watchKey]*sharedWatch
	starts  map[watchKey]int // informers started, for tests
	readers appReaders
	// closed refuses new informers once the cluster is closed; informers counts
	// the goroutines running one (and the restarts and notices about them), which
	// close waits for.
	closed    bool
	informers sync.WaitGroup
	// replaced are the connections of the clusters of credentials replaced
	// since, which close with the watches (the clusters themselves, with their
	// caches, are not kept).
	replaced []*connections
	// onRejected, when set, is told in a goroutine of its own that the cluster
	// refused the credentials of a running informer (the registry then looks for
	// newer ones).
	onRejected func()
}

func newWatches(source *Cluster) *watches {
	return &watches{source: source, running: map[watchKey]*sharedWatch{}, starts: map[watchKey]int{}}
}

// errWatchesClosed is why a closed cluster follows nothing.
var errWatchesClosed = errors.New("cluster access is shut down")

// sharedWatch is one informer and its followers, by object key ("namespace/name",
// or "name" for a cluster-scoped object).
type sharedWatch struct {
	key       watchKey
	ready     chan struct{} // closed once started (err says whether it failed)
	err       error
	followers map[string]map[*follower]bool // guarded by watches.mu
	// run is the informer that follows now, replaced when the credentials
	// change; rejected is why the cluster refuses its credentials (a list or
	// watch answered 401 or 403), nil while it follows. Guarded by watches.mu.
	run      *watchRun
	rejected error
}

// watchRun is one informer of a sharedWatch, with the credentials it started with.
type watchRun struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
	source   *Cluster
	// apps are the Applications the informer holds, decoded once per change, for
	// the informer on all Applications only; snap indexes them until the next
	// change. Guarded by watches.mu.
	apps map[string]argocd.Application
	snap *appSnapshot
	// degraded is set once a watch was refused (forbidden, not found): the
	// informer's objects may be stale.
	degraded bool
}

// signal tells every follower of w that something changed; called with
// watches.mu held.
func (w *sharedWatch) signal() {
	for _, fs := range w.followers {
		for f := range fs {
			f.signal()
		}
	}
}

type follower struct{ ch chan struct{} }

func (f *follower) signal() {
	select {
	case f.ch <- struct{}{}:
	default:
	}
}

// Follow is one follower of one object. Changes receives a value at each change
// the watch sees (added, updated, deleted), starting with the object as first
// listed, and when the watch stops or starts following (see Err); a change that
// finds the channel full is merged into the one waiting there, so the reader never
// falls behind. Stop ends the follow.
type Follow struct {
	Changes <-chan struct{}
	ws      *watches
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
	f.ws.mu.Lock()
	run := f.w.run
	f.ws.mu.Unlock()
	if run == nil {
		return nil, false
	}
	v, exists, err := run.informer.GetStore().GetByKey(f.key)
	if err != nil || !exists {
		return nil, false
	}
	u, ok := v.(*unstructured.Unstructured)
	return u, ok
}

// Err says why the watch does not follow the object now: the cluster refuses the
// credentials it watches with (an *Error of class unreachable for a 401, forbidden
// for a 403, on a list or a watch), so Latest may be stale and nothing more may be
// reported until they are accepted again (the informer keeps trying, and starts
// again with new credentials when the cluster's change). It is nil while the watch
// follows. Changes receives a value whenever it changes.
func (f *Follow) Err() error {
	f.ws.mu.Lock()
	defer f.ws.mu.Unlock()
	return f.w.rejected
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
// them, indexed; ok is false when none runs or it does not follow now.
func (c *Cluster) watchedApplications() (*appSnapshot, bool) {
	ws := c.watches
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
	if w.err != nil || w.run == nil || w.run.degraded || w.rejected != nil {
		return nil, false
	}
	run := w.run
	if run.snap == nil {
		apps := make([]argocd.Application, 0, len(run.apps))
		for _, a := range run.apps {
			apps = append(apps, a)
		}
		// The list's order, as the API server lists them.
		slices.SortFunc(apps, func(a, b argocd.Application) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		run.snap = &appSnapshot{index: argocd.NewAppIndex(apps)}
	}
	return run.snap, true
}

// FollowResource follows one object (see Follow), for instance a deployment's
// target: an informer on its kind, in its namespace, field-selected by its name, so
// the watch carries that object's changes only. Followers of one object share the
// informer. An error means the kind is not served or the object cannot be listed and
// watched: the caller polls instead.
func (c *Cluster) FollowResource(ctx context.Context, ref argocd.ResourceRef) (*Follow, error) {
	kind, _, err := c.mapTargetKind(ctx, ref.GroupKind(), ref.Version)
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
	ws := c.watches
	f := &follower{ch: make(chan struct{}, 1)}
	ws.mu.Lock()
	if ws.closed {
		ws.mu.Unlock()
		return nil, fmt.Errorf("watch %s of cluster %s: %w", key, c.name, errWatchesClosed)
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
	source := ws.source
	ws.mu.Unlock()

	if !found {
		w.err = ws.start(ctx, w, source)
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
		ws.unfollow(w, objKey, f)
		return nil, fmt.Errorf("watch %s of cluster %s: %w", key, c.name, ctx.Err())
	}
	if w.err != nil {
		ws.unfollow(w, objKey, f)
		return nil, w.err
	}
	var once sync.Once
	return &Follow{Changes: f.ch, ws: ws, w: w, key: objKey, stop: func() { once.Do(func() { ws.unfollow(w, objKey, f) }) }}, nil
}

// unfollow removes a follower; the last one stops the informer (or, while it still
// starts, has it stopped once started).
func (ws *watches) unfollow(w *sharedWatch, objKey string, f *follower) {
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
	// Still starting, or restarting, its starter sees no follower left and stops
	// what it started.
	if w.run != nil {
		w.run.cancel()
	}
}

// start starts w's first informer with source's credentials and waits (within the
// call timeout) until it has listed; one that cannot list is stopped again and
// reported.
func (ws *watches) start(ctx context.Context, w *sharedWatch, source *Cluster) error {
	run, err := ws.startRun(ctx, w, source, false)
	if err != nil {
		return err
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.run = run
	if len(w.followers) == 0 || ws.closed {
		run.cancel() // everyone left, or the cluster was closed, while it started
		return nil
	}
	// The first list told nobody (see notify): the followers of what it found are
	// told now.
	for k, fs := range w.followers {
		if _, exists, _ := run.informer.GetStore().GetByKey(k); exists {
			for f := range fs {
				f.signal()
			}
		}
	}
	if ws.source != source {
		// The credentials changed while it started with the old ones.
		ws.restartLocked(context.WithoutCancel(ctx), w, ws.source)
	}
	return nil
}

// startRun starts an informer for w with source's clients and waits (within the
// call timeout) until it has listed. One that cannot list is stopped again and
// reported, unless keepFailing: then it is returned running (it lists again with a
// backoff) with the error. The informer runs detached from ctx's cancellation (it
// is shared) but logs through ctx's logger.
func (ws *watches) startRun(ctx context.Context, w *sharedWatch, source *Cluster, keepFailing bool) (*watchRun, error) {
	key, c := w.key, source
	run := &watchRun{source: source}
	log := zerolog.Ctx(ctx).With().Str("cluster", c.name).Str("watch", key.String()).Logger()
	informer := cache.NewSharedIndexInformerWithOptions(ws.listWatch(w, run), &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{ObjectDescription: key.resource.String()})
	run.informer = informer
	// Nobody here reads managed fields; they are often the larger part of an object.
	if err := informer.SetTransform(dropManagedFields); err != nil {
		return nil, fmt.Errorf("watch %s of cluster %s: %w", key, c.name, err)
	}
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
			ws.mu.Lock()
			run.degraded = true
			ws.mu.Unlock()
		}
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			ws.reject(w, run, err)
		}
		// The reflector watches again from the last resource version it saw (and
		// lists again only if the API server has compacted it away).
		log.Debug().Err(err).Msg("Watch ended; resuming")
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return nil, fmt.Errorf("watch %s of cluster %s: %w", key, c.name, err)
	}
	allApps := key == watchKey{resource: ApplicationResource}
	if allApps {
		run.apps = map[string]argocd.Application{}
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
		ws.mu.Lock()
		defer ws.mu.Unlock()
		if allApps {
			if decoded {
				run.apps[k] = app
			} else {
				delete(run.apps, k)
			}
			run.snap = nil
		}
		// An informer that is starting again with new credentials tells nobody
		// until it replaces the old one; one it replaced tells nobody any more.
		if w.run != run {
			return
		}
		for f := range w.followers[k] {
			f.signal()
		}
	}
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { notify(obj, false) },
		UpdateFunc: func(_, obj any) { notify(obj, false) },
		DeleteFunc: func(obj any) { notify(obj, true) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s of cluster %s: %w", key, c.name, err)
	}
	runCtx, cancel := context.WithCancel(log.WithContext(context.WithoutCancel(ctx)))
	run.cancel = cancel
	// The informer uses source's connections until it has ended (see retire).
	source.acquire()
	if !ws.spawn(func() { defer source.release(); informer.RunWithContext(runCtx) }) {
		source.release()
		cancel()
		return nil, fmt.Errorf("watch %s of cluster %s: %w", key, c.name, errWatchesClosed)
	}
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
	if cache.WaitForCacheSync(syncCtx.Done(), reg.HasSynced) {
		return run, nil
	}
	var startFailure error
	if err := failed.Load(); err != nil {
		startFailure = &Error{Class: Classify(*err), Op: "watch " + key.String(), Err: fmt.Errorf("cluster %s: %w", c.name, *err)}
	} else {
		startFailure = fmt.Errorf("watch %s of cluster %s: not listed within %s", key, c.name, c.opts.CallTimeout)
	}
	if keepFailing {
		return run, startFailure
	}
	cancel()
	return nil, startFailure
}

// listWatch lists and watches w's objects with run's credentials. Each watch
// request lasts at most Options.WatchRecheck, after which the reflector watches
// again from where it was, so the API server checks the credentials and their
// rights again (it does so only when a request starts); a watch it accepts ends a
// rejection of them (a list alone does not: rights to list but not to watch would
// otherwise end and start a rejection at every retry).
func (ws *watches) listWatch(w *sharedWatch, run *watchRun) cache.ListerWatcher {
	key, c := w.key, run.source
	res := c.dynamic.Resource(key.resource).Namespace(key.namespace)
	recheck := int64(c.opts.WatchRecheck / time.Second)
	tweak := func(o *metav1.ListOptions) {
		if key.name != "" {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.name).String()
		}
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			if o.TimeoutSeconds == nil || *o.TimeoutSeconds > recheck {
				o.TimeoutSeconds = &recheck
			}
			wi, err := res.Watch(ctx, o)
			if err == nil {
				ws.accept(w, run)
			}
			return wi, err
		},
	}, c.dynamic)
}

// spawn runs fn in a goroutine that close waits for; false when closed.
func (ws *watches) spawn(fn func()) bool {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.spawnLocked(fn)
}

func (ws *watches) spawnLocked(fn func()) bool {
	if ws.closed {
		return false
	}
	// Added under the lock close takes first, so close waits for every one.
	ws.informers.Add(1)
	go func() {
		defer ws.informers.Done()
		fn()
	}()
	return true
}

// reject records that the cluster refused run's credentials, if run is the one
// following for w, and tells w's followers and the registry when that is new.
func (ws *watches) reject(w *sharedWatch, run *watchRun, err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.run != run {
		return
	}
	first := w.rejected == nil
	w.rejected = &Error{Class: Classify(err), Op: "watch " + w.key.String(), Err: err}
	if !first {
		return
	}
	w.signal()
	if ws.onRejected != nil {
		ws.spawnLocked(ws.onRejected)
	}
}

// accept ends a rejection of run's credentials, if run is the one following for w.
func (ws *watches) accept(w *sharedWatch, run *watchRun) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.run != run || w.rejected == nil {
		return
	}
	w.rejected = nil
	w.signal()
}

// rebind makes source's credentials the ones every informer follows with: each
// running informer is started again with them and replaces the old one once it has
// listed (or failed to: then it keeps trying with the new credentials, and its
// followers are told if those are refused). done is closed when every restart has
// ended.
func (ws *watches) rebind(ctx context.Context, source *Cluster) (done <-chan struct{}) {
	ctx = context.WithoutCancel(ctx) // the restarts outlive the call that asked for them
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ch := make(chan struct{})
	old := ws.source
	ws.source = source
	if old != nil && old != source {
		ws.replaced = append(ws.replaced, old.conns)
	}
	var restarts sync.WaitGroup
	for _, w := range ws.running {
		if w.run == nil {
			continue // still starting: it restarts itself once started (see start)
		}
		restarts.Add(1)
		if !ws.spawnLocked(func() { defer restarts.Done(); ws.restart(ctx, w, source) }) {
			restarts.Done()
		}
	}
	if !ws.spawnLocked(func() { restarts.Wait(); close(ch) }) {
		close(ch)
	}
	return ch
}

// restartLocked has w started again with source's credentials, in the background;
// called with ws.mu held.
func (ws *watches) restartLocked(ctx context.Context, w *sharedWatch, source *Cluster) {
	ws.spawnLocked(func() { ws.restart(ctx, w, source) })
}

// restart starts a new informer for w with source's credentials and, once it has
// listed or failed to, puts it in place of the old one, which stops; followers are
// told, since the list may show what changed meanwhile. Nothing is replaced when w
// lost its followers or newer credentials came meanwhile.
func (ws *watches) restart(ctx context.Context, w *sharedWatch, source *Cluster) {
	run, err := ws.startRun(ctx, w, source, true)
	if run == nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("watch", w.key.String()).Msg("Watch not started again with the cluster's new credentials")
		return
	}
	ws.mu.Lock()
	if ws.running[w.key] != w || ws.closed || ws.source != source {
		ws.mu.Unlock()
		run.cancel()
		return
	}
	old := w.run
	w.run, w.rejected = run, nil
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("watch", w.key.String()).Msg("Watch started again with the cluster's new credentials has not listed")
		var ke *Error
		if errors.As(err, &ke) && (apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err)) {
			w.rejected = &Error{Class: ke.Class, Op: "watch " + w.key.String(), Err: errors.Unwrap(ke.Err)}
		}
	}
	w.signal()
	ws.mu.Unlock()
	if old != nil {
		old.cancel()
	}
}

// close stops every informer of the cluster, the hold of readers on Applications
// included, and waits until their goroutines have ended; then it closes the
// connections of the cluster and of those it replaced. Later follows and calls
// fail.
func (c *Cluster) close() {
	ws := c.watches
	r := &ws.readers
	r.mu.Lock()
	if r.linger != nil {
		r.linger.Stop()
	}
	r.follow, r.linger, r.closed = nil, nil, true
	r.mu.Unlock()

	ws.mu.Lock()
	ws.closed = true
	for key, w := range ws.running {
		delete(ws.running, key)
		if w.run != nil {
			w.run.cancel()
		}
		// One still starting sees the cluster closed and stops itself.
	}
	conns := append([]*connections{c.conns, ws.source.conns}, ws.replaced...)
	ws.mu.Unlock()
	ws.informers.Wait()
	for _, cs := range conns {
		cs.close()
	}
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
