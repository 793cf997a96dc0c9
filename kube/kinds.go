package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/kukie/kukie-gitops/argocd"
)

// kindInfo is how the API server serves one kind in one version.
type kindInfo struct {
	resource   schema.GroupVersionResource
	namespaced bool
}

// servedKinds is the API server's discovery document reduced to what mapping a
// ResourceRef needs. It is immutable once built.
type servedKinds struct {
	// versions maps a group and kind to its served versions, preferred first.
	versions map[schema.GroupKind][]string
	byGVK    map[schema.GroupVersionKind]kindInfo
	// failed holds the groups whose discovery failed (an aggregated API that is
	// down), by group name: their kinds are unknown, not absent.
	failed map[string]error
	// apiVersions are the Capabilities' APIVersions.
	apiVersions []string
}

var kindsKey = readKey{read: "discovery"}

// servedKinds reads discovery through the cache.
func (c *Cluster) servedKinds(ctx context.Context, mode ReadMode) (*servedKinds, error) {
	v, err := c.cached(ctx, c.kinds, kindsKey, mode, "discover served kinds", func(ctx context.Context) (any, error) {
		groups, lists, err := discovery.ServerGroupsAndResourcesWithContext(ctx, c.discovery)
		var partial *discovery.ErrGroupDiscoveryFailed
		if err != nil && !errors.As(err, &partial) {
			return nil, err
		}
		// A failed aggregated API (metrics-server down) must not hide the other
		// groups; it is remembered so its kinds are not mistaken for absent ones.
		sk := buildServedKinds(groups, lists)
		if partial != nil {
			for gv, gerr := range partial.Groups {
				sk.failed[gv.Group] = fmt.Errorf("discovery of %s failed: %w", gv, gerr)
			}
		}
		return sk, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*servedKinds), nil
}

func buildServedKinds(groups []*metav1.APIGroup, lists []*metav1.APIResourceList) *servedKinds {
	preferred := map[string]string{}
	for _, g := range groups {
		preferred[g.Name] = g.PreferredVersion.Version
	}
	sk := &servedKinds{versions: map[schema.GroupKind][]string{}, byGVK: map[schema.GroupVersionKind]kindInfo{}, failed: map[string]error{}}
	apiVersions := map[string]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue // subresource
			}
			gvk := gv.WithKind(r.Kind)
			// Argo CD's cluster cache keeps the resources it can list and watch.
			if slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch") {
				apiVersions[gv.String()] = true
				apiVersions[gv.String()+"/"+r.Kind] = true
			}
			if _, dup := sk.byGVK[gvk]; dup {
				continue
			}
			sk.byGVK[gvk] = kindInfo{resource: gv.WithResource(r.Name), namespaced: r.Namespaced}
			gk := gvk.GroupKind()
			if gv.Version == preferred[gv.Group] {
				sk.versions[gk] = append([]string{gv.Version}, sk.versions[gk]...)
			} else {
				sk.versions[gk] = append(sk.versions[gk], gv.Version)
			}
		}
	}
	sk.apiVersions = slices.Sorted(maps.Keys(apiVersions))
	return sk
}

// lookup finds how ref's kind is served: in ref.Version when given, otherwise in the
// group's preferred version.
func (sk *servedKinds) lookup(gk schema.GroupKind, version string) (kindInfo, bool) {
	if version == "" {
		vs := sk.versions[gk]
		if len(vs) == 0 {
			return kindInfo{}, false
		}
		version = vs[0]
	}
	k, ok := sk.byGVK[gk.WithVersion(version)]
	return k, ok
}

// mapKind finds how a kind is served, re-reading discovery once (at most every
// RefreshFloor) when the cached document does not know it: a CRD may just have been
// installed. A kind of a group whose discovery failed is an error of class
// argocd.FailureOther, not a missing kind: whether it exists is unknown.
func (c *Cluster) mapKind(ctx context.Context, gk schema.GroupKind, version string) (kindInfo, error) {
	var sk *servedKinds
	for _, mode := range []ReadMode{Cached, Refresh} {
		var err error
		if sk, err = c.servedKinds(ctx, mode); err != nil {
			return kindInfo{}, err
		}
		if k, ok := sk.lookup(gk, version); ok {
			return k, nil
		}
	}
	if gerr, ok := sk.failed[gk.Group]; ok {
		return kindInfo{}, &Error{Class: argocd.FailureOther, Op: fmt.Sprintf("find kind %s", gk), Err: gerr}
	}
	var err error = &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: nonEmpty(version)}
	return kindInfo{}, &Error{Class: argocd.FailureNotFound, Op: fmt.Sprintf("find kind %s", gk), Err: err}
}

// mapTargetKind is mapKind for a kind a caller names to read or follow an object
// by, rather than one a manifest holds, and answers the kind as the cluster spells
// it. kubectl takes a kind in any case ("deployment"), and so do the people and
// assistants naming what to change, while the API server serves one spelling: a
// kind not served as given is the one served kind of its group it names but for
// case. Taken for missing, it made a managed object look like one no Argo CD
// Application lists, to be changed directly. A manifest's kind is never so read
// (the API server would refuse it as written).
func (c *Cluster) mapTargetKind(ctx context.Context, gk schema.GroupKind, version string) (kindInfo, string, error) {
	k, err := c.mapKind(ctx, gk, version)
	if err == nil || ClassOf(err) != argocd.FailureNotFound {
		return k, gk.Kind, err
	}
	// mapKind has just read discovery, refreshed: the cached document is current.
	sk, serr := c.servedKinds(ctx, Cached)
	if serr != nil {
		return kindInfo{}, gk.Kind, err
	}
	var match []schema.GroupKind
	for served := range sk.versions {
		if served.Group == gk.Group && strings.EqualFold(served.Kind, gk.Kind) {
			match = append(match, served)
		}
	}
	if len(match) != 1 {
		return kindInfo{}, gk.Kind, err
	}
	if k, ok := sk.lookup(match[0], version); ok {
		return k, match[0].Kind, nil
	}
	return kindInfo{}, gk.Kind, err
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
