package kubetest

import (
	"crypto/sha1"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// App describes a generated Application, for tests that need many of them.
type App struct {
	Namespace string
	Name      string
	// ControllerNamespace is Argo CD's namespace; Namespace when empty.
	ControllerNamespace string
	// DestinationNamespace is spec.destination.namespace; Namespace when empty.
	DestinationNamespace string
	RepoURL              string
	Path                 string
	TargetRevision       string
	Automated            bool
	SelfHeal             bool
	Sync                 string // Synced when empty
	Health               string // Healthy when empty
	// Resources are listed in status.resources.
	Resources []AppResource
	// Conditions become status.conditions.
	Conditions []AppCondition
	// OperationPhase is status.operationState.phase; Succeeded when empty.
	OperationPhase string
}

// AppCondition is one entry of status.conditions.
type AppCondition struct {
	Type, Message string
}

// AppResource is one managed resource of a generated Application.
type AppResource struct {
	Group, Version, Kind, Namespace, Name string
	Sync                                  string // Synced when empty
}

// Application builds an Application object with status the way Argo CD writes it.
func Application(a App) *unstructured.Unstructured {
	ctrlNS := a.ControllerNamespace
	if ctrlNS == "" {
		ctrlNS = a.Namespace
	}
	sync, health := or(a.Sync, "Synced"), or(a.Health, "Healthy")
	revision := fmt.Sprintf("%x", sha1.Sum([]byte(a.Namespace+"/"+a.Name)))
	spec := map[string]any{
		"project": "default",
		"source": map[string]any{
			"repoURL": a.RepoURL, "path": a.Path, "targetRevision": or(a.TargetRevision, "main"),
		},
		"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": or(a.DestinationNamespace, a.Namespace)},
	}
	if a.Automated {
		spec["syncPolicy"] = map[string]any{"automated": map[string]any{"prune": true, "selfHeal": a.SelfHeal}}
	}
	resources := make([]any, 0, len(a.Resources))
	for _, r := range a.Resources {
		entry := map[string]any{
			"version": or(r.Version, "v1"), "kind": r.Kind, "namespace": r.Namespace, "name": r.Name,
			"status": or(r.Sync, "Synced"),
		}
		if r.Group != "" {
			entry["group"] = r.Group
		}
		resources = append(resources, entry)
	}
	status := map[string]any{
		"controllerNamespace": ctrlNS,
		"reconciledAt":        "2025-06-02T09:00:00Z",
		"sourceType":          "Kustomize",
		"sync":                map[string]any{"status": sync, "revision": revision},
		"health":              map[string]any{"status": health},
		"resources":           resources,
		"operationState": map[string]any{
			"phase": or(a.OperationPhase, "Succeeded"), "message": "successfully synced (all tasks run)",
			"startedAt": "2025-06-02T08:59:50Z", "finishedAt": "2025-06-02T08:59:53Z",
			"operation":  map[string]any{"sync": map[string]any{"revision": revision}},
			"syncResult": map[string]any{"revision": revision},
		},
	}
	if len(a.Conditions) > 0 {
		conds := make([]any, 0, len(a.Conditions))
		for _, c := range a.Conditions {
			conds = append(conds, map[string]any{"type": c.Type, "message": c.Message, "lastTransitionTime": "2025-06-02T09:00:00Z"})
		}
		status["conditions"] = conds
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": a.Name, "namespace": a.Namespace},
		"spec":       spec,
		"status":     status,
	}}
}

// ConfigMap builds a ConfigMap with the given labels and annotations.
func ConfigMap(namespace, name string, labels, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"data":       map[string]any{"owner": name},
	}}
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
