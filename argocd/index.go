package argocd

import "sort"

// AppIndex answers ownership questions over one cluster's Applications: which
// Application has a key, which ones list an object in status.resources. It is
// immutable once built and safe for concurrent use.
type AppIndex struct {
	apps     []Application
	byKey    map[AppKey]*Application
	byName   map[string][]*Application
	byObject map[objectKey][]*Application
}

// NewAppIndex indexes apps. The slice is kept; callers must not modify it afterwards.
func NewAppIndex(apps []Application) *AppIndex {
	x := &AppIndex{
		apps:     apps,
		byKey:    make(map[AppKey]*Application, len(apps)),
		byName:   make(map[string][]*Application, len(apps)),
		byObject: make(map[objectKey][]*Application),
	}
	for i := range apps {
		a := &apps[i]
		x.byKey[a.Key()] = a
		x.byName[a.Name] = append(x.byName[a.Name], a)
		for _, r := range a.Status.Resources {
			k := keyOf(r.Ref())
			x.byObject[k] = append(x.byObject[k], a)
		}
	}
	return x
}

// Applications returns the indexed Applications (read-only).
func (x *AppIndex) Applications() []Application { return x.apps }

// Len returns the number of Applications.
func (x *AppIndex) Len() int { return len(x.apps) }

// Get returns the Application with the key.
func (x *AppIndex) Get(k AppKey) (*Application, bool) {
	a, ok := x.byKey[k]
	return a, ok
}

// Listing returns the Applications whose status.resources name the object, strongest
// level first.
func (x *AppIndex) Listing(ref ResourceRef) []*Application {
	apps := append([]*Application(nil), x.byObject[keyOf(ref)]...)
	sort.SliceStable(apps, func(i, j int) bool { return apps[i].Level().Stronger(apps[j].Level()) })
	return apps
}

// Resolve finds the Application an instance name (tracking id application part or
// instance label value) refers to, for the object ref. A name without namespace means
// Argo CD's control-plane namespace: controlPlaneNamespace when configured, otherwise
// an Application whose status.controllerNamespace is its own namespace, preferring one
// that lists ref. The returned key is the best description of the Application even
// when it is not found.
func (x *AppIndex) Resolve(instance string, ref ResourceRef, controlPlaneNamespace string) (*Application, AppKey) {
	key := instanceKey(instance)
	ns, name := key.Namespace, key.Name
	if ns == "" {
		ns = controlPlaneNamespace
	}
	if ns != "" {
		key := AppKey{Namespace: ns, Name: name}
		if x == nil {
			return nil, key
		}
		a, ok := x.byKey[key]
		if !ok {
			return nil, key
		}
		return a, key
	}
	if x == nil {
		return nil, AppKey{Name: name}
	}
	var candidates []*Application
	for _, a := range x.byName[name] {
		if a.Status.ControllerNamespace == "" || a.Status.ControllerNamespace == a.Namespace {
			candidates = append(candidates, a)
		}
	}
	var listing []*Application
	for _, a := range candidates {
		if a.Lists(ref) {
			listing = append(listing, a)
		}
	}
	switch {
	case len(listing) == 1:
		return listing[0], listing[0].Key()
	case len(listing) == 0 && len(candidates) == 1:
		return candidates[0], candidates[0].Key()
	default:
		return nil, AppKey{Name: name}
	}
}

// instanceKey returns the key an instance name spells out; the namespace is empty for
// names in Argo CD's control-plane namespace.
func instanceKey(instance string) AppKey {
	ns, name, err := ParseInstanceName(instance)
	if err != nil {
		return AppKey{Name: instance}
	}
	return AppKey{Namespace: ns, Name: name}
}
