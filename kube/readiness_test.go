package kube_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/kube"
)

// rollout is a Deployment of four replicas at generation 3 with the status its
// controller and the kubelets write at one moment of a rollout.
func rollout(status map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "generation": int64(3)},
		"spec":     map[string]any{"replicas": int64(4), "progressDeadlineSeconds": int64(600)},
	}}
	if status != nil {
		obj.Object["status"] = status
	}
	return obj
}

func condition(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message}
}

var (
	progressing = condition("Progressing", "True", "ReplicaSetUpdated", `ReplicaSet "web-7d9c" is progressing.`)
	progressed  = condition("Progressing", "True", "NewReplicaSetAvailable", `ReplicaSet "web-7d9c" has successfully progressed.`)
	available   = condition("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
)

// TestReadinessOf: every moment of a rollout before its end is InProgress, even when
// the controller has observed the generation and no condition is False; a rollout
// past its progress deadline is Failed with the Deployment's own message.
func TestReadinessOf(t *testing.T) {
	tests := map[string]struct {
		obj  *unstructured.Unstructured
		want kube.ReadinessState
		msg  string // in the message
	}{
		"created, no controller yet": {obj: rollout(nil), want: kube.ReadinessInProgress, msg: "Replicas: 0/4"},
		"generation not observed yet": {
			obj: rollout(map[string]any{"observedGeneration": int64(2), "replicas": int64(4), "updatedReplicas": int64(4),
				"readyReplicas": int64(4), "availableReplicas": int64(4), "conditions": []any{progressed, available}}),
			want: kube.ReadinessInProgress, msg: "generation is 3, but latest observed generation is 2",
		},
		"new replica set scaling up: updated < desired": {
			obj: rollout(map[string]any{"observedGeneration": int64(3), "replicas": int64(4), "updatedReplicas": int64(1),
				"readyReplicas": int64(3), "availableReplicas": int64(3), "unavailableReplicas": int64(1), "conditions": []any{progressing, available}}),
			want: kube.ReadinessInProgress, msg: "Updated: 1/4",
		},
		"all updated, new pods not available": {
			obj: rollout(map[string]any{"observedGeneration": int64(3), "replicas": int64(4), "updatedReplicas": int64(4),
				"readyReplicas": int64(2), "availableReplicas": int64(2), "unavailableReplicas": int64(2), "conditions": []any{progressing, available}}),
			want: kube.ReadinessInProgress, msg: "Available: 2/4",
		},
		"old pods pending termination": {
			obj: rollout(map[string]any{"observedGeneration": int64(3), "replicas": int64(5), "updatedReplicas": int64(4),
				"readyReplicas": int64(5), "availableReplicas": int64(5), "conditions": []any{progressing, available}}),
			want: kube.ReadinessInProgress, msg: "Pending termination: 1",
		},
		"progress deadline exceeded": {
			obj: rollout(map[string]any{"observedGeneration": int64(3), "replicas": int64(5), "updatedReplicas": int64(2),
				"readyReplicas": int64(3), "availableReplicas": int64(3), "unavailableReplicas": int64(2), "conditions": []any{
					condition("Progressing", "False", "ProgressDeadlineExceeded", `ReplicaSet "web-7d9c" has timed out progressing.`), available}}),
			want: kube.ReadinessFailed, msg: `Progress deadline exceeded: ReplicaSet "web-7d9c" has timed out progressing.`,
		},
		"rolled out": {
			obj: rollout(map[string]any{"observedGeneration": int64(3), "replicas": int64(4), "updatedReplicas": int64(4),
				"readyReplicas": int64(4), "availableReplicas": int64(4), "conditions": []any{progressed, available}}),
			want: kube.ReadinessCurrent,
		},
		"kind without status": {
			obj:  &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "settings"}}},
			want: kube.ReadinessCurrent,
		},
		"being deleted": {
			obj: &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "settings", "deletionTimestamp": "2026-11-30T10:00:00Z"}}},
			want: kube.ReadinessTerminating,
		},
		"custom resource not Ready": {
			obj:  widget(condition("Ready", "False", "Provisioning", "waiting for the bucket")),
			want: kube.ReadinessInProgress, msg: "waiting for the bucket",
		},
		"custom resource Stalled": {
			obj:  widget(condition("Stalled", "True", "QuotaExceeded", "bucket quota exceeded")),
			want: kube.ReadinessFailed, msg: "bucket quota exceeded",
		},
		"custom resource Ready": {obj: widget(condition("Ready", "True", "Provisioned", "")), want: kube.ReadinessCurrent},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := kube.ReadinessOf(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tc.want || !strings.Contains(got.Message, tc.msg) {
				t.Errorf("readiness %+v, want %s with a message holding %q", got, tc.want, tc.msg)
			}
		})
	}
}

func widget(cond map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "shop", "generation": int64(1)},
		"status":   map[string]any{"observedGeneration": int64(1), "conditions": []any{cond}},
	}}
}

// A status field of the wrong type is an error naming the object, not a guess.
func TestReadinessOfUnreadableStatus(t *testing.T) {
	obj := rollout(map[string]any{"observedGeneration": "three"})
	_, err := kube.ReadinessOf(obj)
	if err == nil || !strings.Contains(err.Error(), "Deployment shop/web") {
		t.Fatalf("error %v, want one naming Deployment shop/web", err)
	}
}
