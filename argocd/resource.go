package argocd

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kukie/kukie-gitops/objref"
)

// ResourceRef names one Kubernetes object as the cluster and Argo CD identify it:
// group and version apart, as tracking ids and status.resources spell them. Version
// is optional: tracking ids and ownership compare group, kind, namespace and name
// only. A change names its object as an objref.Target; RefOf resolves one into the
// other.
type ResourceRef struct {
	Group     string `json:"group"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// RefOf resolves a change target (apiVersion as written) into the object identity the
// cluster and Argo CD compare: group and version apart. A malformed apiVersion, or a
// target without kind or name, is an error naming what is wrong.
func RefOf(t objref.Target) (ResourceRef, error) {
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil {
		return ResourceRef{}, fmt.Errorf("apiVersion %q: %w", t.APIVersion, err)
	}
	if t.Kind == "" || t.Name == "" {
		return ResourceRef{}, fmt.Errorf("resource %s %s/%s: kind and name are required", t.APIVersion, t.Namespace, t.Name)
	}
	return ResourceRef{Group: gv.Group, Version: gv.Version, Kind: t.Kind, Namespace: t.Namespace, Name: t.Name}, nil
}

// GroupKind returns the ref's group and kind.
func (r ResourceRef) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.Group, Kind: r.Kind}
}

// SameObject reports whether both refs name the same object, ignoring the version.
func (r ResourceRef) SameObject(o ResourceRef) bool {
	return r.Group == o.Group && r.Kind == o.Kind && r.Namespace == o.Namespace && r.Name == o.Name
}

// String formats the ref for people: "apps/Deployment shop/web", "ConfigMap shop/app",
// "rbac.authorization.k8s.io/ClusterRole view".
func (r ResourceRef) String() string {
	var b strings.Builder
	if r.Group != "" {
		b.WriteString(r.Group)
		b.WriteByte('/')
	}
	b.WriteString(r.Kind)
	b.WriteByte(' ')
	if r.Namespace != "" {
		b.WriteString(r.Namespace)
		b.WriteByte('/')
	}
	b.WriteString(r.Name)
	return b.String()
}

// objectKey identifies an object independent of its API version.
type objectKey struct {
	group, kind, namespace, name string
}

func keyOf(r ResourceRef) objectKey {
	return objectKey{group: r.Group, kind: r.Kind, namespace: r.Namespace, name: r.Name}
}

// Resource is what ownership needs to know about a live object: its identity and its
// metadata labels and annotations.
type Resource struct {
	Ref         ResourceRef
	Labels      map[string]string
	Annotations map[string]string
}
