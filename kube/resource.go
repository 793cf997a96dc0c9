package kube

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
)

// GetResource reads one object. ref.Version may be empty (the group's preferred
// version is used); ref.Namespace is ignored for cluster-scoped kinds. The returned
// object is the caller's to modify. A missing object or namespace, or a kind the
// cluster does not serve, is an *Error of class argocd.FailureNotFound.
func (c *Cluster) GetResource(ctx context.Context, ref argocd.ResourceRef, mode ReadMode) (*unstructured.Unstructured, error) {
	obj, _, err := c.getResource(ctx, ref, mode)
	if err != nil {
		return nil, err
	}
	return obj.DeepCopy(), nil
}

// getResource returns the shared cached object (read-only) and ref completed with its
// version and scope.
func (c *Cluster) getResource(ctx context.Context, ref argocd.ResourceRef, mode ReadMode) (*unstructured.Unstructured, argocd.ResourceRef, error) {
	kind, err := c.mapKind(ctx, ref.GroupKind(), ref.Version)
	if err != nil {
		return nil, ref, err
	}
	ref.Version = kind.resource.Version
	if !kind.namespaced {
		ref.Namespace = ""
	} else if ref.Namespace == "" {
		return nil, ref, &Error{Class: argocd.FailureOther, Op: "get " + ref.String(), Err: fmt.Errorf("kind %s is namespaced and no namespace was given", ref.Kind)}
	}
	key := fmt.Sprintf("get %s %s/%s", kind.resource, ref.Namespace, ref.Name)
	v, err := c.cached(ctx, c.reads, key, mode, "get "+ref.String(), func(ctx context.Context) (any, error) {
		return c.dynamic.Resource(kind.resource).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, ref, err
	}
	return v.(*unstructured.Unstructured), ref, nil
}

// ObjectStatus is what following a rollout needs from any object.
type ObjectStatus struct {
	// Generation is metadata.generation, bumped by the API server on spec changes.
	Generation int64 `json:"generation"`
	// ObservedGeneration is status.observedGeneration, the generation the object's
	// controller has acted on; HasObservedGeneration is false for kinds without it.
	ObservedGeneration    int64       `json:"observedGeneration"`
	HasObservedGeneration bool        `json:"hasObservedGeneration"`
	Conditions            []Condition `json:"conditions"`
}

// Condition is one entry of status.conditions.
type Condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

// Observed reports whether the object's controller has seen its latest spec.
func (s ObjectStatus) Observed() bool {
	return !s.HasObservedGeneration || s.ObservedGeneration >= s.Generation
}

// Condition returns the condition of the given type.
func (s ObjectStatus) Condition(conditionType string) (Condition, bool) {
	for _, c := range s.Conditions {
		if c.Type == conditionType {
			return c, true
		}
	}
	return Condition{}, false
}

// StatusOf extracts generation, observedGeneration and conditions from an object.
// Fields of an unexpected type read as absent.
func StatusOf(obj *unstructured.Unstructured) ObjectStatus {
	s := ObjectStatus{Generation: obj.GetGeneration(), Conditions: []Condition{}}
	if og, found, err := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); found && err == nil {
		s.ObservedGeneration, s.HasObservedGeneration = og, true
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, raw := range conds {
		m, ok := raw.(map[string]any)
		if !ok {
			continue
		}
		c := Condition{
			Type:               str(m["type"]),
			Status:             str(m["status"]),
			Reason:             str(m["reason"]),
			Message:            str(m["message"]),
			LastTransitionTime: str(m["lastTransitionTime"]),
		}
		if og, ok := m["observedGeneration"].(int64); ok {
			c.ObservedGeneration = og
		}
		if c.Type != "" {
			s.Conditions = append(s.Conditions, c)
		}
	}
	return s
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
