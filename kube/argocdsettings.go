package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kukie/kukie-gitops/argocd"
)

var configMapResource = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// DefaultArgoCDNamespace is where Argo CD runs when neither the Applications nor
// the cluster's options say.
const DefaultArgoCDNamespace = "argocd"

// ArgoCDSettings reads the render settings of argocd-cm in namespace (the
// cluster's Argo.ControlPlaneNamespace, else DefaultArgoCDNamespace, when empty).
// A missing argocd-cm is Argo CD's defaults. Only the parsed settings are kept,
// in the read cache: the ConfigMap's other keys are dropped as soon as it is read.
func (c *Cluster) ArgoCDSettings(ctx context.Context, namespace string, mode ReadMode) (argocd.Settings, error) {
	if namespace == "" {
		namespace = c.opts.Argo.ControlPlaneNamespace
	}
	if namespace == "" {
		namespace = DefaultArgoCDNamespace
	}
	op := fmt.Sprintf("get configmap %s/%s", namespace, argocd.SettingsConfigMap)
	v, err := c.cached(ctx, c.reads, readKey{read: "settings", namespace: namespace}, mode, op, func(ctx context.Context) (any, error) {
		obj, err := c.dynamic.Resource(configMapResource).Namespace(namespace).Get(ctx, argocd.SettingsConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return argocd.Settings{}, nil
		}
		if err != nil {
			return nil, err
		}
		data, _, err := unstructured.NestedStringMap(obj.Object, "data")
		if err != nil {
			return nil, fmt.Errorf("read data: %w", err)
		}
		return argocd.ParseSettings(data), nil
	})
	if err != nil {
		return argocd.Settings{}, c.observeRead("settings", err)
	}
	_ = c.observeRead("settings", nil)
	return v.(argocd.Settings), nil
}
