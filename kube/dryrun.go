package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
)

// DryRunError is one object the API server would not accept.
type DryRunError struct {
	// Index is the object's position among those sent.
	Index int
	Ref   argocd.ResourceRef
	Class argocd.FailureClass
	// Message is the API server's message, verbatim.
	Message string
	// Fields are the field paths the API server names as the cause, in its order
	// ("spec.replicas", "spec.template.spec.containers[0].image"), and
	// metadata.namespace for a namespace that does not exist; empty when it names
	// none.
	Fields []string
}

func (e *DryRunError) Error() string {
	return fmt.Sprintf("dry-run apply %s: %s", e.Ref, e.Message)
}

// DryRunErrors returns the rejections carried by an error of DryRun, in order.
func DryRunErrors(err error) []*DryRunError {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*DryRunError
		for _, e := range joined.Unwrap() {
			out = append(out, DryRunErrors(e)...)
		}
		return out
	}
	var d *DryRunError
	if errors.As(err, &d) {
		return []*DryRunError{d}
	}
	return nil
}

// DryRun asks the API server to apply each object with server-side apply in
// dryRun=All mode: admission, validation and defaulting run, nothing is stored. It
// returns nil when every object would be accepted, otherwise the errors.Join of one
// *DryRunError per rejected object (in order) carrying the API server's message
// verbatim. The objects are not modified.
func (c *Cluster) DryRun(ctx context.Context, objs []*unstructured.Unstructured) error {
	var errs []error
	for i, obj := range objs {
		if err := c.dryRunOne(ctx, obj); err != nil {
			var d *DryRunError
			if errors.As(err, &d) {
				d.Index = i
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) dryRunOne(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	ref := argocd.ResourceRef{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	reject := func(class argocd.FailureClass, msg string) error {
		return &DryRunError{Ref: ref, Class: class, Message: msg}
	}
	if gvk.Kind == "" || gvk.Version == "" || obj.GetName() == "" {
		return reject(argocd.FailureOther, "apiVersion, kind and metadata.name are required")
	}
	kind, err := c.mapKind(ctx, gvk.GroupKind(), gvk.Version)
	if err != nil {
		if ClassOf(err) == argocd.FailureNotFound {
			return reject(argocd.FailureNotFound, fmt.Sprintf("the cluster does not serve kind %s in version %s", gvk.Kind, gvk.GroupVersion()))
		}
		return reject(ClassOf(err), err.Error())
	}
	if kind.namespaced && obj.GetNamespace() == "" {
		return reject(argocd.FailureOther, fmt.Sprintf("kind %s is namespaced and the object has no metadata.namespace", gvk.Kind))
	}
	body := obj.DeepCopy()
	// Fields only the API server may set would make the apply a conflicting
	// precondition or be refused.
	body.SetManagedFields(nil)
	body.SetResourceVersion("")
	ns := ""
	if kind.namespaced {
		ns = obj.GetNamespace()
	}
	err = c.do(ctx, "dry-run apply "+ref.String(), func(ctx context.Context) error {
		_, err := c.dynamic.Resource(kind.resource).Namespace(ns).Apply(ctx, obj.GetName(), body, metav1.ApplyOptions{
			FieldManager: c.opts.FieldManager,
			// The service's edit wins over fields another manager (Argo CD) owns; the
			// question is only whether the result is valid.
			Force:  true,
			DryRun: []string{metav1.DryRunAll},
		})
		return err
	})
	if err == nil {
		return nil
	}
	msg := err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		msg = status.Status().Message
	}
	d := reject(ClassOf(err), msg).(*DryRunError)
	if status != nil {
		d.Fields = causeFields(status.Status().Details)
	}
	return d
}

// causeFields are the fields a refusal's details name: its causes' fields, or
// metadata.namespace when what is not found is the object's namespace.
func causeFields(details *metav1.StatusDetails) []string {
	if details == nil {
		return nil
	}
	var out []string
	for _, c := range details.Causes {
		if c.Field != "" && !slices.Contains(out, c.Field) {
			out = append(out, c.Field)
		}
	}
	if len(out) == 0 && details.Kind == "namespaces" {
		out = append(out, "metadata.namespace")
	}
	return out
}
