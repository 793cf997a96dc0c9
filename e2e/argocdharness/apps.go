package argocdharness

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kukie/kukie-gitops/argocd"
)

// Application describes an Argo CD Application a test creates: what CreateApplication
// writes, not a model of what Argo CD returns (AppStatus reads that with package
// argocd).
type Application struct {
	Name string
	// Namespace defaults to Namespace; another one needs Options.ApplicationNamespaces.
	Namespace            string
	RepoURL              string
	Path                 string
	TargetRevision       string
	DestinationNamespace string
	// Helm, when set, is spec.source.helm.
	Helm map[string]any
	// Sources, when set, makes a multi-source Application: spec.sources instead of
	// spec.source (Path and Helm then unused). A source without repoURL or
	// targetRevision takes RepoURL and TargetRevision.
	Sources []map[string]any
	// Automated turns on automated sync; SelfHeal additionally reverts live changes.
	Automated bool
	SelfHeal  bool
	// SyncRetries, when set, replaces Argo CD's default for automated syncs (5 retries
	// with backoff from 10 s, about 5 minutes in all before a sync is Failed) with this
	// many retries one second apart.
	SyncRetries *int64
}

// CreateApplication creates app in the API server.
func (a *ArgoCD) CreateApplication(t testing.TB, app Application) *unstructured.Unstructured {
	t.Helper()
	if app.Namespace == "" {
		app.Namespace = Namespace
	}
	syncPolicy := map[string]any{
		"syncOptions": []any{
			"CreateNamespace=true",
			// Without a garbage collector in the test control plane foreground deletion
			// never finishes.
			"PrunePropagationPolicy=background",
		},
	}
	if app.Automated {
		syncPolicy["automated"] = map[string]any{"prune": true, "selfHeal": app.SelfHeal}
	}
	if app.SyncRetries != nil {
		syncPolicy["retry"] = map[string]any{"limit": *app.SyncRetries, "backoff": map[string]any{"duration": "1s", "factor": int64(1), "maxDuration": "1s"}}
	}
	spec := map[string]any{
		"project":     "default",
		"destination": map[string]any{"server": InClusterServer, "namespace": app.DestinationNamespace},
		"syncPolicy":  syncPolicy,
	}
	if len(app.Sources) > 0 {
		sources := make([]any, 0, len(app.Sources))
		for _, src := range app.Sources {
			s := map[string]any{"repoURL": app.RepoURL, "targetRevision": app.TargetRevision}
			for k, v := range src {
				s[k] = v
			}
			sources = append(sources, s)
		}
		spec["sources"] = sources
	} else {
		source := map[string]any{
			"repoURL":        app.RepoURL,
			"path":           app.Path,
			"targetRevision": app.TargetRevision,
		}
		if app.Helm != nil {
			source["helm"] = app.Helm
		}
		spec["source"] = source
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": app.Name, "namespace": app.Namespace},
		"spec":       spec,
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	created, err := a.Dynamic.Resource(ApplicationResource).Namespace(app.Namespace).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create application %s/%s: %v", app.Namespace, app.Name, err)
	}
	return created
}

// GetApplication reads an Application.
func (a *ArgoCD) GetApplication(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	app, err := a.Dynamic.Resource(ApplicationResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read application %s/%s: %w", namespace, name, err)
	}
	return app, nil
}

// WaitApplication polls the Application until done accepts it and returns it with the
// time the wait took; on timeout the test fails with the last status seen and the
// controller's log.
func (a *ArgoCD) WaitApplication(t testing.TB, namespace, name string, timeout time.Duration, what string, done func(*unstructured.Unstructured) bool) (*unstructured.Unstructured, time.Duration) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last *unstructured.Unstructured
	var lastErr error
	for {
		app, err := a.GetApplication(ctx, namespace, name)
		if err == nil {
			last, lastErr = app, nil
			if done(app) {
				return app, time.Since(start)
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("application %s/%s: no %s within %s (last read error: %v); status now:\n%s\ncontroller log:\n%s",
				namespace, name, what, timeout, lastErr, StatusSummary(last), a.ControllerLogTail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Wait polls check until it returns true and returns the time that took, failing the
// test with what after timeout.
func Wait(t testing.TB, timeout time.Duration, what string, check func(context.Context) (bool, error)) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lastErr error
	for {
		ok, err := check(ctx)
		if ok {
			return time.Since(start)
		}
		lastErr = err
		select {
		case <-ctx.Done():
			t.Fatalf("no %s within %s (last error: %v)", what, timeout, lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Sync starts a sync of the Application to revision the way `argocd app sync` does: by
// writing the operation the controller then runs.
func (a *ArgoCD) Sync(t testing.TB, namespace, name, revision string) {
	t.Helper()
	patch := map[string]any{"operation": map[string]any{
		"initiatedBy": map[string]any{"username": "e2e"},
		"sync": map[string]any{
			"revision":    revision,
			"syncOptions": []any{"CreateNamespace=true", "PrunePropagationPolicy=background"},
		},
	}}
	a.mergePatch(t, ApplicationResource, namespace, name, patch, "")
}

// HardRefresh asks the controller to re-read the repository now (the annotation the
// Argo CD UI's "hard refresh" sets).
func (a *ArgoCD) HardRefresh(t testing.TB, namespace, name string) {
	t.Helper()
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{"argocd.argoproj.io/refresh": "hard"}}}
	a.mergePatch(t, ApplicationResource, namespace, name, patch, "")
}

// Rollout is a moment of a Deployment's rollout, as PlayKubelet writes it.
type Rollout int

const (
	// RolloutStarted: the controller observed the new generation and surged one pod
	// of the new ReplicaSet, not available yet; the old pods still serve, so no
	// condition is False.
	RolloutStarted Rollout = iota
	// RolloutUpdated: every pod is of the new ReplicaSet, one not available yet.
	RolloutUpdated
	// RolloutComplete: every pod updated and available, no old one left.
	RolloutComplete
	// RolloutDeadlineExceeded: the new pod kept crashing until the Deployment's
	// progress deadline passed; the old pods still serve.
	RolloutDeadlineExceeded
)

// PlayKubelet writes, through the status subresource, the status a Deployment has at
// moment r of rolling out its current generation, which the test control plane's
// missing Deployment controller and kubelets would otherwise never write.
func (a *ArgoCD) PlayKubelet(t testing.TB, namespace, name string, r Rollout) {
	t.Helper()
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := a.Dynamic.Resource(deployments).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read deployment %s/%s: %v", namespace, name, err)
	}
	desired, found, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	if !found {
		desired = 1
	}
	now := time.Now().UTC().Format(time.RFC3339)
	condition := func(typ, status, reason, message string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "lastUpdateTime": now, "lastTransitionTime": now}
	}
	newRS := fmt.Sprintf("%s-%d", name, d.GetGeneration())
	progressing := condition("Progressing", "True", "ReplicaSetUpdated", fmt.Sprintf("ReplicaSet %q is progressing.", newRS))
	available := condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
	// Pods in all, of the new ReplicaSet, and available.
	pods, updated, ready := desired+1, int64(1), desired
	switch r {
	case RolloutUpdated:
		pods, updated, ready = desired, desired, desired-1
	case RolloutComplete:
		pods, updated, ready = desired, desired, desired
		progressing = condition("Progressing", "True", "NewReplicaSetAvailable", fmt.Sprintf("ReplicaSet %q has successfully progressed.", newRS))
	case RolloutDeadlineExceeded:
		progressing = condition("Progressing", "False", "ProgressDeadlineExceeded", fmt.Sprintf("ReplicaSet %q has timed out progressing.", newRS))
	}
	status := map[string]any{"status": map[string]any{
		"observedGeneration":  d.GetGeneration(),
		"replicas":            pods,
		"updatedReplicas":     updated,
		"readyReplicas":       ready,
		"availableReplicas":   ready,
		"unavailableReplicas": pods - ready,
		"conditions":          []any{progressing, available},
	}}
	a.mergePatch(t, deployments, namespace, name, status, "status")
}

func (a *ArgoCD) mergePatch(t testing.TB, gvr schema.GroupVersionResource, namespace, name string, patch map[string]any, subresource string) {
	t.Helper()
	body, err := json.Marshal(patch)
	if err != nil {
		t.Fatalf("encode patch of %s %s/%s: %v", gvr.Resource, namespace, name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	if _, err := a.Dynamic.Resource(gvr).Namespace(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, sub...); err != nil {
		t.Fatalf("patch %s %s/%s: %v", gvr.Resource, namespace, name, err)
	}
}

// AppStatus decodes the Application's status with the service's own model
// (argocd.ParseApplication), so waits read Argo CD's fields the way the service does.
// A status that does not decode reads as empty, which no wait accepts.
func AppStatus(app *unstructured.Unstructured) argocd.AppStatus {
	a, err := argocd.ParseApplication(app.Object)
	if err != nil {
		return argocd.AppStatus{}
	}
	return a.Status
}

// OperationPhase is the phase of the Application's last or running sync operation, ""
// before the first.
func OperationPhase(app *unstructured.Unstructured) string {
	if op := AppStatus(app).OperationState; op != nil {
		return op.Phase
	}
	return ""
}

// StatusSummary renders the parts of an Application status that explain a wait.
func StatusSummary(app *unstructured.Unstructured) string {
	if app == nil {
		return "(never read)"
	}
	status, _, _ := unstructured.NestedMap(app.Object, "status")
	summary := map[string]any{
		"sync":           status["sync"],
		"health":         status["health"],
		"operationState": status["operationState"],
		"conditions":     status["conditions"],
		"resources":      status["resources"],
	}
	out, err := json.MarshalIndent(summary, "", "  ")
	if err != nil {
		return fmt.Sprintf("(unprintable: %v)", err)
	}
	return string(out)
}
