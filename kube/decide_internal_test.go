package kube

import (
	"context"
	"strings"
	"testing"

	"github.com/kukie/kukie-gitops/argocd"
)

// A bug inside the decision (here: a Cluster that was never built, or options that
// bypassed the defaults) yields an unknown decision, never a panic in the caller.
func TestDecideNeverPanics(t *testing.T) {
	ref := argocd.ResourceRef{Group: "apps", Kind: "Deployment", Namespace: "shop", Name: "web"}
	tests := map[string]*Cluster{
		"reads panic":            {opts: Options{}.withDefaults()},
		"decision itself panics": {opts: Options{MaxTargets: -1}},
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			d := c.Decide(context.Background(), []argocd.ResourceRef{ref})
			if d.Known || d.Path != argocd.PathDirect || d.Level != argocd.LevelUnknown || d.Failure != argocd.FailureOther {
				t.Fatalf("decision = path %s known %v level %s failure %q", d.Path, d.Known, d.Level, d.Failure)
			}
			if !strings.Contains(d.Reason, "internal error") {
				t.Errorf("reason = %q", d.Reason)
			}
		})
	}
}
