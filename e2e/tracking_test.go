//go:build e2e

package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kukie/kukie-gitops/argocd"
	"github.com/kukie/kukie-gitops/e2e/argocdharness"
)

// testTrackingConformance: everything real Argo CD syncs — a Directory app with a
// cluster-scoped object, a Kustomize overlay with a name prefix, an app in another
// namespace — is found managed by the service with the right Application and level,
// and a Helm-labelled object Argo CD does not manage is not.
func (s *suite) testTrackingConformance(t *testing.T) {
	cases := map[string]struct {
		app argocdharness.Application
		// instance is what Argo CD writes as the application part of tracking ids.
		instance   string
		sourceType string
		level      argocd.Level
		resources  []argocd.ResourceRef
	}{
		"directory app with a cluster-scoped object": {
			app:        argocdharness.Application{Name: "web", Path: "apps/web", DestinationNamespace: "e2e-web", Automated: true},
			instance:   "web",
			sourceType: "Directory",
			level:      argocd.LevelAuto,
			resources: []argocd.ResourceRef{
				{Group: "", Kind: "Service", Namespace: "e2e-web", Name: "web"},
				{Group: "apps", Kind: "Deployment", Namespace: "e2e-web", Name: "web"},
				{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Namespace: "", Name: "web-reader"},
			},
		},
		"kustomize overlay with a name prefix": {
			app:        argocdharness.Application{Name: "shop", Path: "apps/shop/overlays/prod", DestinationNamespace: "e2e-shop", Automated: true, SelfHeal: true},
			instance:   "shop",
			sourceType: "Kustomize",
			level:      argocd.LevelSelfHeal,
			resources: []argocd.ResourceRef{
				{Group: "", Kind: "ConfigMap", Namespace: "e2e-shop", Name: "prod-cart-settings"},
				{Group: "apps", Kind: "Deployment", Namespace: "e2e-shop", Name: "prod-cart"},
			},
		},
		"app in any namespace, synced by hand": {
			app:        argocdharness.Application{Name: "team", Namespace: teamNamespace, Path: "apps/team", DestinationNamespace: "e2e-team"},
			instance:   teamNamespace + "_team",
			sourceType: "Directory",
			level:      argocd.LevelManual,
			resources: []argocd.ResourceRef{
				{Group: "", Kind: "ConfigMap", Namespace: "e2e-team", Name: "team-settings"},
			},
		},
	}
	cluster := s.cluster(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			synced := s.deployApp(t, tc.app)
			app := parseApp(t, synced)
			if got := app.SourceType(); got != tc.sourceType {
				t.Errorf("source type = %q, want %q", got, tc.sourceType)
			}
			if got, want := listed(app), refStrings(tc.resources); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("status.resources lists\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			want := argocd.AppKey{Namespace: synced.GetNamespace(), Name: tc.app.Name}
			for _, ref := range tc.resources {
				obj := s.liveObject(t, ref)
				id, err := argocd.ParseTrackingID(obj.GetAnnotations()[argocd.TrackingIDAnnotation])
				if err != nil {
					t.Errorf("%s: tracking id written by argo cd: %v", ref, err)
					continue
				}
				if id.AppInstance != tc.instance || !namesObject(id, ref) {
					t.Errorf("%s: tracking id %q names app %q and %s, want app %q and the object itself", ref, id, id.AppInstance, id.Resource(), tc.instance)
				}

				d := cluster.Decide(context.Background(), []argocd.ResourceRef{ref})
				if d.Path != argocd.PathGit || !d.Known || d.Level != tc.level {
					t.Errorf("%s: decision path %s known %t level %s, want git, known, %s; reason: %s", ref, d.Path, d.Known, d.Level, tc.level, d.Reason)
					continue
				}
				o := d.Targets[0].Ownership
				if !o.Managed || o.By != argocd.EvidenceAnnotation || o.App != want {
					t.Errorf("%s: ownership managed %t by %q app %s, want managed by annotation, app %s; reason: %s", ref, o.Managed, o.By, o.App, want, o.Reason)
				}
			}
		})
	}

	t.Run("several targets take the strongest level", func(t *testing.T) {
		targets := []argocd.ResourceRef{
			deploymentRef("e2e-web", "web"),                                   // auto
			{Kind: "ConfigMap", Namespace: "e2e-team", Name: "team-settings"}, // manual
			deploymentRef("e2e-shop", "prod-cart"),                            // self-heal
		}
		d := cluster.Decide(context.Background(), targets)
		if d.Path != argocd.PathGit || d.Level != argocd.LevelSelfHeal {
			t.Fatalf("decision path %s level %s, want git self_heal; reason: %s", d.Path, d.Level, d.Reason)
		}
		if !strings.Contains(d.Payload().Warning, "revert") {
			t.Errorf("warning %q does not say the change would be reverted", d.Payload().Warning)
		}
	})

	t.Run("helm-labelled object not managed by argo cd", func(t *testing.T) {
		// The instance label names an existing Application, as Helm's release label
		// would when a release and an app share a name.
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{
				"name": "web-helm-values", "namespace": "e2e-web",
				"labels": map[string]any{
					"app.kubernetes.io/instance":   "web",
					"app.kubernetes.io/managed-by": "Helm",
					"helm.sh/chart":                "web-1.0.0",
				},
			},
			"data": map[string]any{"values.yaml": "replicas: 2\n"},
		}}
		created := time.Now()
		s.kube.Create(t, cm)
		ref := argocd.ResourceRef{Kind: "ConfigMap", Namespace: "e2e-web", Name: "web-helm-values"}

		// Argo CD, reconciling after the object exists, does not adopt it either.
		app, _ := s.argo.WaitApplication(t, argocdharness.Namespace, "web", syncTimeout, "reconciliation after the helm object appeared", func(u *unstructured.Unstructured) bool {
			at, err := time.Parse(time.RFC3339, parseApp(t, u).Status.ReconciledAt)
			return err == nil && at.After(created.Add(time.Second))
		})
		for _, r := range parseApp(t, app).Status.Resources {
			if r.Ref().SameObject(ref) {
				t.Fatalf("argo cd lists the helm object in application web: %+v", r)
			}
		}

		d := cluster.Decide(context.Background(), []argocd.ResourceRef{ref})
		o := d.Targets[0].Ownership
		if d.Path != argocd.PathDirect || !d.Known || o.Managed {
			t.Fatalf("decision path %s known %t managed %t, want direct, known, not managed; reason: %s", d.Path, d.Known, o.Managed, d.Reason)
		}
		if !strings.Contains(strings.Join(o.Warnings, " "), "not trusted") {
			t.Errorf("warnings %q do not say the instance label is not trusted", o.Warnings)
		}
	})
}

// namesObject applies Argo CD's own test of a tracking id (isSelfReferencedObj in its
// controller): group, kind and name must match, and the namespace too unless the object
// is cluster-scoped. For cluster-scoped objects Argo CD writes the Application's
// destination namespace into the id.
func namesObject(id argocd.TrackingID, ref argocd.ResourceRef) bool {
	return id.Group == ref.Group && id.Kind == ref.Kind && id.Name == ref.Name &&
		(ref.Namespace == "" || id.Namespace == ref.Namespace)
}

// listed returns the resources an Application lists, as sorted strings.
func listed(app argocd.Application) []string {
	var refs []argocd.ResourceRef
	for _, r := range app.Status.Resources {
		refs = append(refs, r.Ref())
	}
	return refStrings(refs)
}

func refStrings(refs []argocd.ResourceRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		r.Version = ""
		out[i] = r.String()
	}
	sort.Strings(out)
	return out
}
