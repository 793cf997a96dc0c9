package argocd

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ResourceRef names one Kubernetes object. Version is optional: tracking ids and
// ownership compare group, kind, namespace and name only.
type ResourceRef struct {
	Group     string `json:"group"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// RefFromAPIVersion builds a ResourceRef from the fields of a manifest.
func RefFromAPIVersion(apiVersion, kind, namespace, name string) (ResourceRef, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ResourceRef{}, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	if kind == "" || name == "" {
		return ResourceRef{}, fmt.Errorf("resource %s %s/%s: kind and name are required", apiVersion, namespace, name)
	}
	return ResourceRef{Group: gv.Group, Version: gv.Version, Kind: kind, Namespace: namespace, Name: name}, nil
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
