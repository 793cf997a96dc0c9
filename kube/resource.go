package kube

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

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
func (c *Cluster) getResource(ctx context.Context, ref argocd.ResourceRef, mode ReadMode) (_ *unstructured.Unstructured, _ argocd.ResourceRef, err error) {
	defer func() { err = c.observeRead("resource", err) }()
	kind, served, err := c.mapTargetKind(ctx, ref.GroupKind(), ref.Version)
	if err != nil {
		return nil, ref, err
	}
	ref.Kind, ref.Version = served, kind.resource.Version
	if !kind.namespaced {
		ref.Namespace = ""
	} else if ref.Namespace == "" {
		return nil, ref, &Error{Class: argocd.FailureOther, Op: "get " + ref.String(), Err: fmt.Errorf("kind %s is %w", ref.Kind, errNoNamespace)}
	}
	v, err := c.cached(ctx, c.reads, objectKey(kind.resource, ref.Namespace, ref.Name), mode, "get "+ref.String(), func(ctx context.Context) (any, error) {
		return c.dynamic.Resource(kind.resource).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, ref, err
	}
	return v.(*unstructured.Unstructured), ref, nil
}

// errNoNamespace is the failure of a read of a namespaced kind named without a
// namespace, which the caller, not the cluster, can mend.
var errNoNamespace = errors.New("namespaced and no namespace was given")

// Readiness is how far an object's controllers have brought it to its latest spec,
// as kstatus computes it: the status library Flux and kpt use, with rules for the
// built-in workloads (a Deployment is Current only once every replica is updated,
// ready and available and no old one is left) and for any kind with the standard
// Ready, Reconciling or Stalled conditions. Kinds it knows nothing about are Current.
type Readiness struct {
	State ReadinessState `json:"state"`
	// Message says why, in kstatus's words ("Updated: 1/4"); for a failure it ends
	// with the condition that reports it.
	Message string `json:"message"`
}

// ReadinessState is one of kstatus's statuses of a live object.
type ReadinessState string

// The states Readiness reports.
const (
	// ReadinessCurrent: the controllers have fully applied the latest spec.
	ReadinessCurrent ReadinessState = "Current"
	// ReadinessInProgress: still on its way (generation not observed yet, replicas
	// not all updated or available, old ones not gone).
	ReadinessInProgress ReadinessState = "InProgress"
	// ReadinessFailed: the object reports it will not get there by itself (a
	// Deployment past its progress deadline, a Stalled condition).
	ReadinessFailed ReadinessState = "Failed"
	// ReadinessTerminating: the object is being deleted.
	ReadinessTerminating ReadinessState = "Terminating"
)

// ReadinessOf computes obj's readiness from its metadata and status alone. A status
// kstatus cannot read (a field of the wrong type) is an error naming the object.
func ReadinessOf(obj *unstructured.Unstructured) (Readiness, error) {
	res, err := kstatus.Compute(obj)
	if err != nil {
		return Readiness{}, fmt.Errorf("compute the status of %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	r := Readiness{State: ReadinessState(res.Status), Message: res.Message}
	if r.State == ReadinessFailed {
		// kstatus's own message is generic ("Progress deadline exceeded"); the
		// condition it read says which ReplicaSet or step failed.
		for _, c := range res.Conditions {
			if c.Type == kstatus.ConditionStalled && c.Message != "" && c.Message != r.Message {
				r.Message += ": " + c.Message
			}
		}
	}
	return r, nil
}
