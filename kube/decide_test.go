package kube_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/kube"
	"github.com/kukie/kukie-gitops/kube/kubetest"
)

func TestDecide(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	c := clusterFor(t, env.Kubeconfig, kube.Options{})
	shop := argocd.AppKey{Namespace: w.argoNS, Name: "shop"}

	tests := map[string]struct {
		targets     []argocd.ResourceRef
		wantPath    argocd.Path
		wantLevel   argocd.Level
		wantApps    []argocd.AppKey
		wantEvident argocd.Evidence
		wantReason  string
		wantWarning string
	}{
		"annotation": {
			targets: []argocd.ResourceRef{w.deployment("web")}, wantPath: argocd.PathGit, wantLevel: argocd.LevelSelfHeal,
			wantApps: []argocd.AppKey{shop}, wantEvident: argocd.EvidenceAnnotation,
			wantWarning: "Argo CD will revert this within seconds",
		},
		"annotation on a core-group object": {
			targets: []argocd.ResourceRef{w.configMap("shop-settings")}, wantPath: argocd.PathGit, wantLevel: argocd.LevelSelfHeal,
			wantApps: []argocd.AppKey{shop}, wantEvident: argocd.EvidenceAnnotation,
		},
		"label confirmed by the Application": {
			targets: []argocd.ResourceRef{w.deployment("billing-api")}, wantPath: argocd.PathGit, wantLevel: argocd.LevelAuto,
			wantApps: []argocd.AppKey{{Namespace: w.argoNS, Name: "billing"}}, wantEvident: argocd.EvidenceLabel,
		},
		"label not confirmed (Helm)": {
			targets: []argocd.ResourceRef{w.deployment("helm-web")}, wantPath: argocd.PathDirect, wantLevel: argocd.LevelNone,
			wantReason: "does not manage it", wantWarning: "is not trusted: no such Application exists",
		},
		"hub and spoke": {
			targets: []argocd.ResourceRef{w.deployment("hub-web")}, wantPath: argocd.PathGit, wantLevel: argocd.LevelUnknown,
			wantApps: []argocd.AppKey{{Name: "platform-hub"}}, wantEvident: argocd.EvidenceAnnotation,
		},
		"apps in any namespace": {
			targets: []argocd.ResourceRef{w.deployment("payments-api")}, wantPath: argocd.PathGit, wantLevel: argocd.LevelSelfHeal,
			wantApps: []argocd.AppKey{{Namespace: w.appsNS, Name: "payments"}}, wantEvident: argocd.EvidenceAnnotation,
		},
		"copied annotation": {
			targets: []argocd.ResourceRef{w.configMap("copied-settings")}, wantPath: argocd.PathDirect, wantLevel: argocd.LevelNone,
			wantWarning: "not trusted",
		},
		"no marks": {
			targets: []argocd.ResourceRef{w.deployment("plain")}, wantPath: argocd.PathDirect, wantLevel: argocd.LevelNone,
		},
		"two targets with different levels": {
			targets:  []argocd.ResourceRef{w.deployment("reports-api"), w.deployment("billing-api")},
			wantPath: argocd.PathGit, wantLevel: argocd.LevelAuto,
			wantApps: []argocd.AppKey{{Namespace: w.argoNS, Name: "reports"}, {Namespace: w.argoNS, Name: "billing"}},
		},
		// kubectl takes a kind in any case, and so do people naming what to change:
		// the one served kind it names but for case is read, not taken as missing.
		"kind in lower case": {
			targets: []argocd.ResourceRef{lowerKind(w.deployment("web"))}, wantPath: argocd.PathGit, wantLevel: argocd.LevelSelfHeal,
			wantApps: []argocd.AppKey{shop}, wantEvident: argocd.EvidenceAnnotation,
		},
		"kind of the core group in lower case": {
			targets: []argocd.ResourceRef{lowerKind(w.configMap("shop-settings"))}, wantPath: argocd.PathGit, wantLevel: argocd.LevelSelfHeal,
			wantApps: []argocd.AppKey{shop}, wantEvident: argocd.EvidenceAnnotation,
		},
		"missing target": {
			targets: []argocd.ResourceRef{w.deployment("does-not-exist")}, wantPath: argocd.PathDirect, wantLevel: argocd.LevelNone,
			wantReason: "does not exist in the cluster",
		},
		"kind not served": {
			targets: []argocd.ResourceRef{{Group: "example.com", Kind: "Widget", Namespace: w.ns, Name: "w"}}, wantPath: argocd.PathDirect, wantLevel: argocd.LevelNone,
			wantReason: "does not exist in the cluster",
		},
		"cluster-scoped target given a namespace": {
			targets: []argocd.ResourceRef{{Kind: "Namespace", Namespace: "ignored", Name: w.ns}}, wantPath: argocd.PathDirect, wantLevel: argocd.LevelNone,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := c.Decide(context.Background(), tc.targets)
			mustDecide(t, d, tc.wantPath, true, tc.wantLevel, "")
			var apps []argocd.AppKey
			for _, td := range d.Targets {
				if td.Ownership.Managed {
					apps = append(apps, td.Ownership.App)
					if tc.wantEvident != "" && td.Ownership.By != tc.wantEvident {
						t.Errorf("evidence = %s, want %s", td.Ownership.By, tc.wantEvident)
					}
				}
			}
			if len(apps) != len(tc.wantApps) {
				t.Fatalf("managing applications = %v, want %v", apps, tc.wantApps)
			}
			for i := range apps {
				if apps[i] != tc.wantApps[i] {
					t.Errorf("application %d = %v, want %v", i, apps[i], tc.wantApps[i])
				}
			}
			if !strings.Contains(d.Reason, tc.wantReason) {
				t.Errorf("reason %q does not contain %q", d.Reason, tc.wantReason)
			}
			if w := d.Payload().Warning; !strings.Contains(w, tc.wantWarning) {
				t.Errorf("warning %q does not contain %q", w, tc.wantWarning)
			}
		})
	}
}

// TestDecideTargetWithoutItsNamespace: a namespaced kind named without a namespace
// cannot be read however often it is tried, so the unknown decision says to name
// the namespace (failed before: "retry, and check the API server if it persists",
// which an assistant followed by asking again as it had).
func TestDecideTargetWithoutItsNamespace(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	c := clusterFor(t, env.Kubeconfig, kube.Options{})
	ref := w.deployment("web")
	ref.Namespace = ""
	d := c.Decide(context.Background(), []argocd.ResourceRef{ref})
	mustDecide(t, d, argocd.PathDirect, false, argocd.LevelUnknown, argocd.FailureOther)
	if !strings.Contains(d.Reason, "kind Deployment is namespaced and no namespace was given): name the target's namespace") ||
		strings.Contains(d.Reason, "retry") {
		t.Errorf("reason %q, want it to say to name the namespace, not to retry", d.Reason)
	}
}

func lowerKind(ref argocd.ResourceRef) argocd.ResourceRef {
	ref.Kind = strings.ToLower(ref.Kind)
	return ref
}

// The hub case with no Application at all in the cluster: the tracking annotation
// still marks the resource as Argo CD's.
func TestDecideWithoutAnyApplication(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, false)
	c := clusterFor(t, env.Kubeconfig, kube.Options{Argo: argocd.Options{ControlPlaneNamespace: w.argoNS}})

	d := c.Decide(context.Background(), []argocd.ResourceRef{w.deployment("web")})
	mustDecide(t, d, argocd.PathGit, true, argocd.LevelUnknown, "")
	if !strings.Contains(d.Reason, "no such Application exists in this cluster") {
		t.Errorf("reason = %q", d.Reason)
	}
	d = c.Decide(context.Background(), []argocd.ResourceRef{w.deployment("billing-api")})
	mustDecide(t, d, argocd.PathDirect, true, argocd.LevelNone, "")
}

func TestDecideExaminesFirstTargetsOnly(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	counter := newRequestCounter()
	c := clusterFor(t, env.Kubeconfig, kube.Options{WrapTransport: counter.wrap})

	d := c.Decide(context.Background(), []argocd.ResourceRef{
		w.deployment("plain"), w.deployment("helm-web"), w.configMap("copied-settings"),
		w.deployment("absent-1"), w.deployment("absent-2"),
		w.deployment("web"), w.deployment("reports-api"),
	})
	// web (self-heal) is sixth and must not be looked at.
	mustDecide(t, d, argocd.PathDirect, true, argocd.LevelNone, "")
	if d.Skipped != 2 || len(d.Targets) != kube.DefaultMaxTargets {
		t.Errorf("examined %d, skipped %d; want %d and 2", len(d.Targets), d.Skipped, kube.DefaultMaxTargets)
	}
	if n := counter.count("GET", "/apis/apps/v1/namespaces/"+w.ns+"/deployments/web"); n != 0 {
		t.Errorf("the sixth target was read %d times", n)
	}
	if !strings.Contains(d.Reason, "Only the first 5 of 7 targets were examined") {
		t.Errorf("reason = %q", d.Reason)
	}
}

func TestDecideInstallationID(t *testing.T) {
	env := kubetest.Start(t)
	w := newWorld(t, env, true)
	c := clusterFor(t, env.Kubeconfig, kube.Options{Argo: argocd.Options{InstallationID: "kukie-prod"}})

	d := c.Decide(context.Background(), []argocd.ResourceRef{w.deployment("other-instance")})
	mustDecide(t, d, argocd.PathGit, true, argocd.LevelUnknown, "")
	if !strings.Contains(d.Reason, "another Argo CD instance") {
		t.Errorf("reason = %q", d.Reason)
	}
	// The instance's own resource: installation ids match.
	mark := `{"metadata":{"annotations":{"argocd.argoproj.io/installation-id":"kukie-prod"}}}`
	if _, err := env.Dynamic.Resource(deployments).Namespace(w.ns).Patch(context.Background(), "web", types.MergePatchType, []byte(mark), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	d = c.Decide(context.Background(), []argocd.ResourceRef{w.deployment("web")})
	mustDecide(t, d, argocd.PathGit, true, argocd.LevelSelfHeal, "")

	// Without the instance's id configured, an installation id on the resource is
	// trusted only when an Application here lists the resource.
	unconfigured := clusterFor(t, env.Kubeconfig, kube.Options{})
	mustDecide(t, unconfigured.Decide(context.Background(), []argocd.ResourceRef{w.deployment("web")}), argocd.PathGit, true, argocd.LevelSelfHeal, "")
	d = unconfigured.Decide(context.Background(), []argocd.ResourceRef{w.deployment("other-instance")})
	mustDecide(t, d, argocd.PathGit, true, argocd.LevelUnknown, "")
	if !strings.Contains(d.Reason, `installation id "other-argocd"`) {
		t.Errorf("reason = %q", d.Reason)
	}
}
